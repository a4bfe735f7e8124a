import { createHmac } from 'node:crypto'
import { type AccessTokenClaims, ConfigError, type TokenSigner } from '@switchboard/core'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createJoseTokenSigner } from './token-signer.js'

const SECRET = 'a-secret-of-the-jose-signer-tests-of-32-bytes-or-more'
const NOW = new Date('2026-03-01T10:00:00.000Z')
const NOW_SECONDS = NOW.getTime() / 1000

const claims: AccessTokenClaims = {
  userId: '6f1c2a7e-8a7b-4c1e-9d3f-0b2a4c6e8f10',
  companyId: 42,
  loginId: 'c3d4e5f6-0718-4293-a4b5-c6d7e8f90a1b',
  issuedAt: NOW_SECONDS,
  expiresAt: NOW_SECONDS + 3600,
}

const encodePart = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const decodePart = (part: string | undefined) => JSON.parse(Buffer.from(part ?? '', 'base64url').toString())

const claimsArbitrary = fc.record({
  userId: fc.uuid(),
  companyId: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  loginId: fc.uuid(),
  issuedAt: fc.integer({ min: 0, max: NOW_SECONDS }),
  expiresAt: fc.integer({ min: NOW_SECONDS + 1, max: NOW_SECONDS + 10 ** 8 }),
})

describe('createJoseTokenSigner', () => {
  it('signs HS256 JWTs with sub, cid, sid, iat and exp', async () => {
    const token = await createJoseTokenSigner({ secret: SECRET }).sign(claims)
    const [header, payload] = token.split('.')

    expect(decodePart(header)).toEqual({ alg: 'HS256', typ: 'JWT' })
    expect(decodePart(payload)).toEqual({
      sub: claims.userId,
      cid: claims.companyId,
      sid: claims.loginId,
      iat: claims.issuedAt,
      exp: claims.expiresAt,
      jti: expect.stringMatching(/^[0-9a-f-]{36}$/),
    })
  })

  it('signs a new token each time, even for the same claims in the same second (a refresh hands out a new access token)', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const tokens = await Promise.all(Array.from({ length: 20 }, () => signer.sign(claims)))

    expect(new Set(tokens).size).toBe(20)
    for (const token of tokens) expect(await signer.verify(token, { now: NOW })).toEqual(claims)
  })

  it('verifies what it signed, first and again from memory, for any claims not yet expired', async () => {
    for (const verifiedCacheSize of [0, 10]) {
      const signer = createJoseTokenSigner({ secret: SECRET, verifiedCacheSize })
      await fc.assert(
        fc.asyncProperty(claimsArbitrary, async (generated) => {
          const token = await signer.sign(generated)
          expect(await signer.verify(token, { now: NOW })).toEqual(generated)
          expect(await signer.verify(token, { now: NOW })).toEqual(generated)
        }),
        { numRuns: 50 },
      )
    }
  })

  it('refuses a token with any one character changed, after the genuine one was verified', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const token = await signer.sign(claims)
    expect(await signer.verify(token, { now: NOW })).not.toBeNull()

    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: token.length - 1 }),
        fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.'),
        async (index, replacement) => {
          fc.pre(token[index] !== replacement)
          const tampered = token.slice(0, index) + replacement + token.slice(index + 1)
          // The last character of a base64url signature carries spare bits: a change there can
          // decode to the same bytes and be a valid spelling of the same signature.
          const sameSignature =
            index === token.length - 1 &&
            Buffer.from(tampered.split('.')[2]!, 'base64url').equals(
              Buffer.from(token.split('.')[2]!, 'base64url'),
            )
          fc.pre(!sameSignature)
          expect(await signer.verify(tampered, { now: NOW })).toBeNull()
        },
      ),
      { numRuns: 300 },
    )
  })

  it('accepts a token minted elsewhere with only the claims of CONTRACT §3: sub, cid, iat, exp', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const mint = (payload: Record<string, unknown>) => {
      const signingInput = `${encodePart({ alg: 'HS256', typ: 'JWT' })}.${encodePart(payload)}`
      return `${signingInput}.${createHmac('sha256', SECRET).update(signingInput).digest('base64url')}`
    }
    const minted = { sub: claims.userId, cid: claims.companyId, iat: claims.issuedAt, exp: claims.expiresAt }

    expect(await signer.verify(mint(minted), { now: NOW })).toEqual({ ...claims, loginId: null })
    expect(await signer.verify(mint({ ...minted, sid: 7 }), { now: NOW })).toBeNull()
    const { cid: _cid, ...withoutCompany } = minted
    expect(await signer.verify(mint(withoutCompany), { now: NOW })).toBeNull()
    // And what it signs for such claims carries no sid either.
    const token = await signer.sign({ ...claims, loginId: null })
    expect(decodePart(token.split('.')[1])).toEqual({ ...minted, jti: expect.any(String) })
  })

  it('reads the user and login UUIDs of a minted token in any case, as lower-case ids', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const payload = {
      sub: claims.userId.toUpperCase(),
      cid: claims.companyId,
      sid: claims.loginId!.toUpperCase(),
      iat: claims.issuedAt,
      exp: claims.expiresAt,
    }
    const signingInput = `${encodePart({ alg: 'HS256', typ: 'JWT' })}.${encodePart(payload)}`
    const minted = `${signingInput}.${createHmac('sha256', SECRET).update(signingInput).digest('base64url')}`

    expect(await signer.verify(minted, { now: NOW })).toEqual(claims)
    // Remembered as read.
    expect(await signer.verify(minted, { now: NOW })).toEqual(claims)
  })

  it('refuses claims that name no possible user, company or login: ids of the wrong shape or out of range', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const mint = (payload: Record<string, unknown>) => {
      const signingInput = `${encodePart({ alg: 'HS256', typ: 'JWT' })}.${encodePart(payload)}`
      return `${signingInput}.${createHmac('sha256', SECRET).update(signingInput).digest('base64url')}`
    }
    const minted = {
      sub: claims.userId,
      cid: claims.companyId,
      sid: claims.loginId,
      iat: claims.issuedAt,
      exp: claims.expiresAt,
    }
    expect(await signer.verify(mint({ ...minted, cid: 2 ** 31 - 1 }), { now: NOW })).not.toBeNull()

    for (const change of [
      { cid: 2 ** 31 },
      { cid: 2 ** 40 },
      { cid: 0 },
      { cid: -1 },
      { cid: 1.5 },
      { sub: 'not-a-uuid' },
      { sub: '' },
      { sid: 'not-a-uuid' },
    ]) {
      expect(
        await signer.verify(mint({ ...minted, ...change }), { now: NOW }),
        JSON.stringify(change),
      ).toBeNull()
    }
  })

  it('refuses another key, alg none and any alg but HS256, even after the genuine token was verified', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const genuine = await signer.sign(claims)
    await signer.verify(genuine, { now: NOW })
    const other = createJoseTokenSigner({ secret: `${SECRET}-but-another-one` })
    const payload = genuine.split('.')[1]!
    const forged = (alg: string, hash: string) => {
      const signingInput = `${encodePart({ alg, typ: 'JWT' })}.${payload}`
      return `${signingInput}.${createHmac(hash, SECRET).update(signingInput).digest('base64url')}`
    }

    for (const token of [
      await other.sign(claims),
      `${encodePart({ alg: 'none', typ: 'JWT' })}.${payload}.`,
      `${encodePart({ alg: 'none', typ: 'JWT' })}.${payload}.${genuine.split('.')[2]}`,
      forged('HS512', 'sha512'),
      forged('HS384', 'sha384'),
    ]) {
      expect(await signer.verify(token, { now: NOW })).toBeNull()
    }
  })

  it('refuses a token at and after its exp, also once it is remembered', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    const token = await signer.sign(claims)
    const at = (seconds: number) => ({ now: new Date(seconds * 1000) })

    expect(await signer.verify(token, at(claims.expiresAt - 1))).not.toBeNull()
    expect(await signer.verify(token, at(claims.expiresAt - 0.001))).not.toBeNull()
    expect(await signer.verify(token, at(claims.expiresAt))).toBeNull()
    expect(await signer.verify(token, at(claims.expiresAt + 1))).toBeNull()
    expect(await createJoseTokenSigner({ secret: SECRET }).verify(token, at(claims.expiresAt))).toBeNull()
  })

  it('keeps verifying correctly once the memory is full', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET, verifiedCacheSize: 2 })
    const tokens = await Promise.all([1, 2, 3, 4].map((companyId) => signer.sign({ ...claims, companyId })))

    for (const round of [1, 2]) {
      for (const [index, token] of tokens.entries()) {
        expect((await signer.verify(token, { now: NOW }))?.companyId, `round ${round}`).toBe(index + 1)
      }
    }
  })

  it('answers null, never throws, for any string', async () => {
    const signer = createJoseTokenSigner({ secret: SECRET })
    await fc.assert(
      fc.asyncProperty(fc.string(), async (token) => {
        expect(await signer.verify(token, { now: NOW })).toBeNull()
      }),
    )
  })

  it('refuses a secret under 32 bytes and a negative memory size', () => {
    expect(() => createJoseTokenSigner({ secret: 'x'.repeat(31) })).toThrow(/32 bytes/)
    expect(() => createJoseTokenSigner({ secret: '', minimumSecretBytes: 0 })).toThrow(/minimumSecretBytes/)
    expect(() => createJoseTokenSigner({ secret: SECRET, verifiedCacheSize: -1 })).toThrow(
      /verifiedCacheSize/,
    )
  })

  it('says what the secret must be when it is missing or not a string, without showing a short one', () => {
    const create = (secret: unknown) => () =>
      createJoseTokenSigner({ secret } as Parameters<typeof createJoseTokenSigner>[0]) as TokenSigner
    expect(create(undefined)).toThrow(ConfigError)
    expect(create(undefined)).toThrow('the JWT secret must be a string of at least 32 bytes, got undefined')
    // What to do about it, since an unset environment variable is the usual cause.
    expect(create(undefined)).toThrow(': generate one (`openssl rand -base64 32`) and keep it')
    expect(create(null)).toThrow('the JWT secret must be a string of at least 32 bytes, got null')
    expect(create(42)).toThrow('the JWT secret must be a string of at least 32 bytes, got a number')
    expect(create('a-short-secret')).toThrow(
      'the JWT secret must be a string of at least 32 bytes, got one of 14 bytes',
    )
    expect(() => createJoseTokenSigner({ secret: SECRET, verifiedCacheSize: -1 })).toThrow(ConfigError)
  })

  it('signs with a shorter secret when its caller lowered the minimum, with the secret itself as the key', async () => {
    const short = createJoseTokenSigner({ secret: 'short', minimumSecretBytes: 1 })
    expect(() => createJoseTokenSigner({ secret: 'shor', minimumSecretBytes: 5 })).toThrow(/5 bytes/)

    const payload = { sub: claims.userId, cid: claims.companyId, iat: claims.issuedAt, exp: claims.expiresAt }
    const signingInput = `${encodePart({ alg: 'HS256', typ: 'JWT' })}.${encodePart(payload)}`
    const minted = `${signingInput}.${createHmac('sha256', 'short').update(signingInput).digest('base64url')}`
    expect(await short.verify(minted, { now: NOW })).toEqual({ ...claims, loginId: null })
    expect(await short.verify(await short.sign(claims), { now: NOW })).toEqual(claims)
  })
})
