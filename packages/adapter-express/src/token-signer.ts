import { createSecretKey, type KeyObject } from 'node:crypto'
import type { AccessTokenClaims, TokenSigner } from '@switchboard/core'
import { jwtVerify, SignJWT } from 'jose'

const MIN_SECRET_BYTES = 32

/**
 * HS256 access tokens with jose: `sub` user, `cid` company, `sid` login, `iat`, `exp`. The key is
 * imported once; verification pins the algorithm, so `alg: none` or any other is refused.
 */
export function createJoseTokenSigner(options: { secret: string }): TokenSigner {
  if (Buffer.byteLength(options.secret) < MIN_SECRET_BYTES) {
    throw new TypeError(`the JWT secret must be at least ${MIN_SECRET_BYTES} bytes`)
  }
  const key: KeyObject = createSecretKey(Buffer.from(options.secret))
  return {
    sign: (claims) =>
      new SignJWT({ cid: claims.companyId, sid: claims.loginId })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(claims.userId)
        .setIssuedAt(claims.issuedAt)
        .setExpirationTime(claims.expiresAt)
        .sign(key),
    async verify(token, { now }): Promise<AccessTokenClaims | null> {
      try {
        const { payload } = await jwtVerify(token, key, {
          algorithms: ['HS256'],
          currentDate: now,
          requiredClaims: ['sub', 'exp', 'iat'],
        })
        const { sub, cid, sid, iat, exp } = payload
        if (typeof sub !== 'string' || typeof cid !== 'number' || !Number.isSafeInteger(cid)) return null
        if (typeof sid !== 'string' || typeof iat !== 'number' || typeof exp !== 'number') return null
        return { userId: sub, companyId: cid, loginId: sid, issuedAt: iat, expiresAt: exp }
      } catch {
        return null
      }
    },
  }
}
