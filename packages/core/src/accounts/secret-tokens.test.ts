import { describe, expect, it } from 'vitest'
import { API_TOKEN_PREFIX, hashSecret, newApiToken, newRefreshToken } from './secret-tokens.js'

describe('secret tokens', () => {
  it('makes refresh tokens of 32 random bytes in base64url', () => {
    const tokens = Array.from({ length: 50 }, newRefreshToken)

    for (const token of tokens) {
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(Buffer.from(token, 'base64url')).toHaveLength(32)
    }
    expect(new Set(tokens).size).toBe(50)
  })

  it('makes API tokens of sb_ and 32 random bytes in base64url', () => {
    const tokens = Array.from({ length: 50 }, newApiToken)

    for (const token of tokens) {
      expect(token.startsWith(API_TOKEN_PREFIX)).toBe(true)
      expect(token).toMatch(/^sb_[A-Za-z0-9_-]{43}$/)
    }
    expect(new Set(tokens).size).toBe(50)
  })

  it('hashes a secret to its SHA-256 in hex', () => {
    expect(hashSecret('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })
})
