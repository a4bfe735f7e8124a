import { createHash, timingSafeEqual } from 'node:crypto'
import type { PasswordHasher } from '../ports/accounts.js'

const PREFIX = 'fake:'

/**
 * A password hasher for tests: `fake:` and the SHA-256 hex of the password. Fast and
 * deterministic, so tests do not spend argon2's deliberate slowness; never use it for real.
 */
export function createFakePasswordHasher(): PasswordHasher {
  const hashOf = (password: string) => PREFIX + createHash('sha256').update(password, 'utf8').digest('hex')
  return {
    hash: async (password) => hashOf(password),
    async verify({ hash, password }) {
      const expected = Buffer.from(hashOf(password), 'utf8')
      const given = Buffer.from(hash, 'utf8')
      return given.length === expected.length && timingSafeEqual(given, expected)
    },
  }
}
