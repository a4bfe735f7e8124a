import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createFakePasswordHasher } from './fake-password-hasher.js'

const hasher = createFakePasswordHasher()

describe('createFakePasswordHasher', () => {
  it('hashes deterministically to fake: and a SHA-256 hex digest', async () => {
    expect(await hasher.hash('secret')).toBe(
      'fake:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b',
    )
    expect(await hasher.hash('secret')).toBe(await createFakePasswordHasher().hash('secret'))
  })

  it('verifies the password it hashed and no other', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.string(), async (password, other) => {
        const hash = await hasher.hash(password)
        expect(await hasher.verify({ hash, password })).toBe(true)
        expect(await hasher.verify({ hash, password: other })).toBe(password === other)
      }),
    )
  })

  it('answers false for a hash of another shape', async () => {
    for (const hash of ['', 'fake:', 'secret', `${await hasher.hash('secret')}0`]) {
      expect(await hasher.verify({ hash, password: 'secret' })).toBe(false)
    }
  })
})
