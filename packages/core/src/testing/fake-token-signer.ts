import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'
import type { AccessTokenClaims, TokenSigner } from '../ports/accounts.js'

const HEADER = encodeJson({ alg: 'HS256', typ: 'JWT' })

function encodeJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url')
}

function decodeJson(part: string): unknown {
  return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'))
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** base64url without padding, as a JWT writes it; `Buffer` would also accept other spellings. */
const BASE64URL = /^[A-Za-z0-9_-]+$/

function claimsOf(payload: unknown): AccessTokenClaims | null {
  if (!isRecord(payload)) return null
  const { sub, cid, sid, iat, exp } = payload
  if (typeof sub !== 'string' || (sid !== undefined && typeof sid !== 'string')) return null
  if (!Number.isSafeInteger(cid) || !Number.isSafeInteger(iat) || !Number.isSafeInteger(exp)) return null
  return {
    userId: sub,
    companyId: cid as number,
    loginId: sid ?? null,
    issuedAt: iat as number,
    expiresAt: exp as number,
  }
}

/**
 * A token signer for tests: compact HS256 JWTs with the production claims (`sub` user id, `cid`
 * company id, `sid` login id when there is one, `iat`, `exp`, and a random `jti`, so no two tokens
 * are alike), written with node:crypto alone. `verify` answers null for another secret, a changed
 * byte, an `alg` other than HS256 and an `exp` at or before `now`.
 */
export function createFakeTokenSigner(options: { secret: string }): TokenSigner {
  const { secret } = options
  if (secret.length === 0) throw new Error('The fake token signer needs a non-empty secret')
  const signatureOf = (signingInput: string) =>
    createHmac('sha256', secret).update(signingInput).digest('base64url')

  return {
    async sign(claims) {
      const payload = encodeJson({
        sub: claims.userId,
        cid: claims.companyId,
        ...(claims.loginId === null ? {} : { sid: claims.loginId }),
        iat: claims.issuedAt,
        exp: claims.expiresAt,
        jti: randomUUID(),
      })
      const signingInput = `${HEADER}.${payload}`
      return `${signingInput}.${signatureOf(signingInput)}`
    },

    async verify(token, { now }) {
      try {
        if (typeof token !== 'string') return null
        const parts = token.split('.')
        if (parts.length !== 3 || !parts.every((part) => BASE64URL.test(part))) return null
        const [header, payload, signature] = parts as [string, string, string]
        // Compared as text: the last base64url character has spare bits, so two spellings decode
        // to the same bytes and a byte comparison would accept a changed token.
        const expected = Buffer.from(signatureOf(`${header}.${payload}`), 'utf8')
        const given = Buffer.from(signature, 'utf8')
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
        // The header is signed too, but a signer that honours only HS256 checks it anyway.
        const decodedHeader = decodeJson(header)
        if (!isRecord(decodedHeader) || decodedHeader.alg !== 'HS256') return null
        const claims = claimsOf(decodeJson(payload))
        if (claims === null || claims.expiresAt <= Math.floor(now.getTime() / 1000)) return null
        return claims
      } catch {
        return null
      }
    },
  }
}
