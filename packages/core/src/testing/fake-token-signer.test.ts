import { createHmac } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { AccessTokenClaims } from '../ports/accounts.js'
import { createFakeTokenSigner } from './fake-token-signer.js'

const NOW = new Date('2026-03-01T10:00:00.000Z')
const NOW_SECONDS = NOW.getTime() / 1000
const signer = createFakeTokenSigner({ secret: 'test-secret' })

const claims: AccessTokenClaims = {
  userId: '6f1c2a7e-8a7b-4c1e-9d3f-0b2a4c6e8f10',
  companyId: 42,
  loginId: 'c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b',
  issuedAt: NOW_SECONDS,
  expiresAt: NOW_SECONDS + 3600,
}

function base64urlJson(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url')
}

/** A token whose header and payload are chosen freely but correctly signed with `secret`. */
function forge(header: unknown, payload: unknown, secret = 'test-secret'): string {
  const signingInput = `${base64urlJson(header)}.${base64urlJson(payload)}`
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`
}

const claimsArbitrary = fc.record({
  userId: fc.uuid(),
  companyId: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  loginId: fc.uuid(),
  issuedAt: fc.integer({ min: 0, max: NOW_SECONDS }),
  expiresAt: fc.integer({ min: NOW_SECONDS + 1, max: NOW_SECONDS + 10 ** 8 }),
})

describe('createFakeTokenSigner', () => {
  it('signs compact HS256 JWTs with the production claim names', async () => {
    const token = await signer.sign(claims)
    const [header, payload] = token.split('.')

    expect(token.split('.')).toHaveLength(3)
    expect(JSON.parse(Buffer.from(header!, 'base64url').toString())).toEqual({ alg: 'HS256', typ: 'JWT' })
    expect(JSON.parse(Buffer.from(payload!, 'base64url').toString())).toEqual({
      sub: claims.userId,
      cid: claims.companyId,
      sid: claims.loginId,
      iat: claims.issuedAt,
      exp: claims.expiresAt,
      jti: expect.stringMatching(/^[0-9a-f-]{36}$/),
    })
  })

  it('signs a new token each time, even for the same claims', async () => {
    const first = await signer.sign(claims)
    const second = await signer.sign(claims)

    expect(second).not.toBe(first)
    expect(await signer.verify(second, { now: new Date(claims.issuedAt * 1000) })).toEqual(claims)
  })

  it('verifies what it signed, for any claims not yet expired', async () => {
    await fc.assert(
      fc.asyncProperty(claimsArbitrary, async (generated) => {
        expect(await signer.verify(await signer.sign(generated), { now: NOW })).toEqual(generated)
      }),
    )
  })

  it('refuses a token with any one character changed', async () => {
    const token = await signer.sign(claims)
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: token.length - 1 }),
        fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.'),
        async (index, replacement) => {
          fc.pre(token[index] !== replacement)
          const tampered = token.slice(0, index) + replacement + token.slice(index + 1)
          expect(await signer.verify(tampered, { now: NOW })).toBeNull()
        },
      ),
      { numRuns: 500 },
    )
  })

  it('refuses a token signed with another secret', async () => {
    const other = createFakeTokenSigner({ secret: 'other-secret' })
    expect(await signer.verify(await other.sign(claims), { now: NOW })).toBeNull()
  })

  it('refuses an alg other than HS256, even correctly signed', async () => {
    const payload = {
      sub: claims.userId,
      cid: 42,
      sid: claims.loginId,
      iat: NOW_SECONDS,
      exp: NOW_SECONDS + 60,
    }
    expect(await signer.verify(forge({ alg: 'HS256', typ: 'JWT' }, payload), { now: NOW })).not.toBeNull()
    for (const alg of ['none', 'HS512', 'RS256', 'hs256']) {
      expect(await signer.verify(forge({ alg, typ: 'JWT' }, payload), { now: NOW })).toBeNull()
    }
    const [header, body] = forge({ alg: 'none' }, payload).split('.')
    expect(await signer.verify(`${header}.${body}.`, { now: NOW })).toBeNull()
  })

  it('refuses a token at and after its exp', async () => {
    const token = await signer.sign(claims)

    expect(await signer.verify(token, { now: new Date((claims.expiresAt - 1) * 1000) })).not.toBeNull()
    expect(await signer.verify(token, { now: new Date((claims.expiresAt - 0.001) * 1000) })).not.toBeNull()
    expect(await signer.verify(token, { now: new Date(claims.expiresAt * 1000) })).toBeNull()
    expect(await signer.verify(token, { now: new Date((claims.expiresAt + 1) * 1000) })).toBeNull()
  })

  it('refuses signed payloads whose claims have the wrong types', async () => {
    const good = { sub: claims.userId, cid: 42, sid: claims.loginId, iat: NOW_SECONDS, exp: NOW_SECONDS + 60 }
    for (const payload of [
      { ...good, sub: 7 },
      { ...good, cid: '42' },
      { ...good, cid: 1.5 },
      { ...good, sid: 7 },
      { ...good, exp: '9999999999' },
      [good],
      'claims',
      null,
    ]) {
      expect(await signer.verify(forge({ alg: 'HS256' }, payload), { now: NOW })).toBeNull()
    }
  })

  it('accepts a token without sid, as CONTRACT §3 lists only sub, cid, iat and exp', async () => {
    const { sid: _sid, ...minted } = {
      sub: claims.userId,
      cid: 42,
      sid: 'x',
      iat: NOW_SECONDS,
      exp: NOW_SECONDS + 60,
    }
    expect(await signer.verify(forge({ alg: 'HS256' }, minted), { now: NOW })).toEqual({
      userId: claims.userId,
      companyId: 42,
      loginId: null,
      issuedAt: NOW_SECONDS,
      expiresAt: NOW_SECONDS + 60,
    })
  })

  it('answers null, never throws, for any string', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), async (token) => {
        expect(await signer.verify(token, { now: NOW })).toBeNull()
      }),
    )
    for (const token of ['', '..', 'a.b.c', 'e30.e30.', '!!.!!.!!']) {
      expect(await signer.verify(token, { now: NOW })).toBeNull()
    }
  })

  it('refuses an empty secret', () => {
    expect(() => createFakeTokenSigner({ secret: '' })).toThrow(/secret/)
  })
})
