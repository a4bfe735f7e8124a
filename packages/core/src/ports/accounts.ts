/** Turns passwords into stored hashes and checks them; argon2id in production. */
export interface PasswordHasher {
  hash(password: string): Promise<string>
  verify(options: { hash: string; password: string }): Promise<boolean>
}

/** What a session access token says. Times are seconds since the epoch, as in a JWT. */
export interface AccessTokenClaims {
  readonly userId: string
  /** The integer company `id`. */
  readonly companyId: number
  /**
   * The login the token descends from; logging out revokes that login's refresh tokens. Null for
   * a token that names none: the HTTP API's tokens need only `sub`, `cid`, `iat` and `exp`, so a
   * token minted elsewhere with the shared secret is valid without it; logging out with one
   * revokes every refresh token of its user.
   */
  readonly loginId: string | null
  readonly issuedAt: number
  readonly expiresAt: number
}

/** Signs and checks session access tokens (HS256 JWTs in production). */
export interface TokenSigner {
  sign(claims: AccessTokenClaims): Promise<string>
  /** null for any invalid, tampered, wrong-alg or expired token */
  verify(token: string, options: { now: Date }): Promise<AccessTokenClaims | null>
}
