import { hash, verify } from '@node-rs/argon2'
import type { PasswordHasher } from '@switchboard/core'

// The package's `Algorithm` is a const enum, which isolated modules cannot read; 2 is Argon2id.
const ARGON2ID = 2

/** argon2id at the OWASP minimum: 19 MiB of memory, 2 passes, 1 lane (≈ 15 ms a hash here). */
export const ARGON2_OWASP = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const

export function createArgon2PasswordHasher(
  parameters: { memoryCost: number; timeCost: number; parallelism: number } = ARGON2_OWASP,
): PasswordHasher {
  return {
    hash: (password) => hash(password, { algorithm: ARGON2ID, ...parameters }),
    async verify({ hash: encoded, password }) {
      try {
        return await verify(encoded, password)
      } catch {
        // A malformed stored hash is a failed login, not a server error.
        return false
      }
    },
  }
}
