import { randomUUID, webcrypto } from 'node:crypto'
import { type AccessTokenClaims, ConfigError, type TokenSigner } from '@switchboard/core'
import { jwtVerify, SignJWT } from 'jose'
import { MAX_INTEGER_ID, uuidId } from './path-ids.js'

/** RFC 7518 §3.2: an HS256 key at least as long as its hash. The signer's default minimum. */
export const MIN_JWT_SECRET_BYTES = 32
const DEFAULT_VERIFIED_CACHE_SIZE = 10_000

const isCompanyId = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= MAX_INTEGER_ID
const isUuid = (value: unknown): value is string => typeof value === 'string' && uuidId(value) !== null

export interface JoseTokenSignerOptions {
  /** The HMAC key: at least `minimumSecretBytes` bytes. */
  readonly secret: string
  /**
   * 32 unless set, the length of HS256's hash, below which RFC 7518 §3.2 calls a key too weak. An
   * application that must take the secret an operator chose (and warns about a short one) lowers
   * it; at least 1.
   */
  readonly minimumSecretBytes?: number
  /**
   * How many verified tokens to remember (10,000 unless set; 0 remembers none). A client sends
   * the same access token with every request for up to an hour, and checking its signature again
   * each time was a fifth of what an authenticated read cost.
   */
  readonly verifiedCacheSize?: number
}

/**
 * HS256 access tokens with jose: `sub` user, `cid` company, `sid` login, `iat`, `exp`, and a random
 * `jti`, so that every token signed is new, even for the same claims in the same second (a refresh
 * right after a login). The key is imported once; verification pins the algorithm, so `alg: none`
 * or any other is refused. Throws a `ConfigError` on a missing, short or non-string secret.
 */
export function createJoseTokenSigner(options: JoseTokenSignerOptions): TokenSigner {
  const minimumBytes = options.minimumSecretBytes ?? MIN_JWT_SECRET_BYTES
  if (!Number.isSafeInteger(minimumBytes) || minimumBytes < 1) {
    throw new ConfigError(`minimumSecretBytes must be a whole number, 1 or more, got ${minimumBytes}`)
  }
  const { secret } = options as { secret: unknown }
  if (typeof secret !== 'string' || Buffer.byteLength(secret) < minimumBytes) {
    // Only the length of a string given: the secret itself must not reach a log.
    const given =
      typeof secret === 'string'
        ? `one of ${Buffer.byteLength(secret)} bytes`
        : secret === undefined || secret === null
          ? String(secret)
          : `a ${typeof secret}`
    throw new ConfigError(
      `the JWT secret must be a string of at least ${minimumBytes} bytes, got ${given}: generate one (\`openssl rand -base64 32\`) and keep it, e.g. in an environment variable such as JWT_SECRET`,
    )
  }
  const cacheSize = options.verifiedCacheSize ?? DEFAULT_VERIFIED_CACHE_SIZE
  if (!Number.isSafeInteger(cacheSize) || cacheSize < 0) {
    throw new ConfigError(`verifiedCacheSize must be a whole number, 0 or more, got ${cacheSize}`)
  }
  // A WebCrypto key, the only kind jose uses: given a KeyObject or bytes, it imports a new
  // CryptoKey on every call.
  const key: Promise<webcrypto.CryptoKey> = webcrypto.subtle.importKey(
    'raw',
    Buffer.from(secret),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign', 'verify'],
  )
  // Keyed by the whole token, so a token differing in any byte is verified in full. Only tokens
  // that passed are kept; the oldest entry leaves first once the cache is full.
  const verified = new Map<string, AccessTokenClaims>()

  return {
    sign: async (claims) =>
      new SignJWT({ cid: claims.companyId, ...(claims.loginId === null ? {} : { sid: claims.loginId }) })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(claims.userId)
        .setIssuedAt(claims.issuedAt)
        .setExpirationTime(claims.expiresAt)
        .setJti(randomUUID())
        .sign(await key),

    async verify(token, { now }): Promise<AccessTokenClaims | null> {
      const cached = verified.get(token)
      if (cached !== undefined) {
        // The same rule as jose's: expired once `exp` is at or before now, in whole seconds.
        if (cached.expiresAt > Math.floor(now.getTime() / 1000)) return cached
        verified.delete(token)
        return null
      }
      try {
        const { payload } = await jwtVerify(token, await key, {
          algorithms: ['HS256'],
          currentDate: now,
          requiredClaims: ['sub', 'exp', 'iat'],
        })
        const { sub, cid, sid, iat, exp } = payload
        // Ids of the shapes CONTRACT §2 gives them (user and login UUIDs, company an integer in
        // range): claims naming no possible account are a malformed bearer (401), not a query that
        // storage refuses (500).
        if (!isUuid(sub) || !isCompanyId(cid)) return null
        // `sid` is ours: a token with only the claims CONTRACT §3 names is valid without it.
        if (sid !== undefined && !isUuid(sid)) return null
        if (typeof iat !== 'number' || typeof exp !== 'number') return null
        // Lower-case, as every UUID this API reads: a token minted elsewhere may spell them in
        // capitals, and the login is matched as text.
        const claims: AccessTokenClaims = {
          userId: sub.toLowerCase(),
          companyId: cid,
          loginId: sid === undefined ? null : sid.toLowerCase(),
          issuedAt: iat,
          expiresAt: exp,
        }
        if (cacheSize > 0) {
          if (verified.size >= cacheSize) verified.delete(verified.keys().next().value as string)
          verified.set(token, Object.freeze(claims))
        }
        return claims
      } catch {
        return null
      }
    },
  }
}
