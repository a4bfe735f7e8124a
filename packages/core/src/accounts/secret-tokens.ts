import { createHash, randomBytes } from 'node:crypto'

/** Marks company API tokens, so `authenticate` tells them from JWTs without trying both. */
export const API_TOKEN_PREFIX = 'sb_'

const SECRET_BYTES = 32

/** 32 random bytes, base64url: a refresh token. */
export function newRefreshToken(): string {
  return randomBytes(SECRET_BYTES).toString('base64url')
}

/** `sb_` and 32 random bytes, base64url. */
export function newApiToken(): string {
  return API_TOKEN_PREFIX + randomBytes(SECRET_BYTES).toString('base64url')
}

/**
 * What is stored instead of a secret. A fast hash is enough: the secrets are 256 random bits, so
 * there is nothing to guess, unlike a password.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex')
}
