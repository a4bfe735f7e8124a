import { createHmac, randomUUID } from 'node:crypto'
import type { Storage } from '@switchboard/core'
import { createManualClock } from '@switchboard/core/testing'
import { SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createArgon2PasswordHasher, createJoseTokenSigner } from '../src/index.js'
import {
  type HttpAnswer,
  startTestServer,
  TEST_PASSWORD,
  type TestCompany,
  type TestServer,
  type TestServerOptions,
} from './support/start-test-server.js'

const JWT_SECRET = 'the-signing-secret-of-the-account-route-tests'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const REFRESH_TOKEN = /^[A-Za-z0-9_-]{43}$/
const API_TOKEN = /^sb_[A-Za-z0-9_-]{43}$/

interface Registered {
  readonly user: { readonly id: string; readonly email: string }
  readonly company: { readonly id: number; readonly companyId: string; readonly companyName: string }
}

interface SessionTokens {
  readonly access_token: string
  readonly refresh_token: string
  readonly expires_at: number
}

/** The production signer, so these tests cover the JWTs the reference server hands out. */
const realSigner = (options: TestServerOptions = {}) =>
  startTestServer({ signer: createJoseTokenSigner({ secret: JWT_SECRET }), ...options })

let server: TestServer
let owner: TestCompany
let stranger: TestCompany
let emails = 0

beforeAll(async () => {
  server = await realSigner()
  owner = await server.registerCompany('Owner Ltd')
  stranger = await server.registerCompany('Stranger Ltd')
})
afterAll(async () => {
  await server.close()
})

const freshEmail = () => `person-${++emails}@example.com`

/** The contract's error body, exactly: no stack, no cause, no fields beyond these. */
function expectError(answer: HttpAnswer, status: number, code: string) {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.body).toEqual({ error: { code, message: expect.any(String) } })
  return (answer.body as { error: { code: string; message: string } }).error
}

/** A 400 VALIDATION_ERROR whose `details` name fields; answers the named fields. */
function expectValidationError(answer: HttpAnswer): string[] {
  expect(answer.status, answer.text).toBe(400)
  expect(answer.body).toEqual({
    error: {
      code: 'VALIDATION_ERROR',
      message: expect.any(String),
      details: expect.arrayContaining([{ path: expect.any(String), message: expect.any(String) }]),
    },
  })
  const details = (answer.body as { error: { details: { path: string }[] } }).error.details
  return [...new Set(details.map((detail) => detail.path))].sort()
}

function ok<Body>(answer: HttpAnswer, status = 200): Body {
  expect(answer.status, answer.text).toBe(status)
  return answer.body as Body
}

async function register(target: TestServer, email = freshEmail(), companyName = 'Acme'): Promise<Registered> {
  return ok<Registered>(
    await target.request('POST', '/api/auth/register', {
      body: { email, password: TEST_PASSWORD, companyName },
    }),
    201,
  )
}

async function login(target: TestServer, email: string, password = TEST_PASSWORD): Promise<SessionTokens> {
  const body = ok<{ session: SessionTokens }>(
    await target.request('POST', '/api/auth/login', { body: { email, password } }),
  )
  return body.session
}

const refresh = (target: TestServer, refreshToken: string) =>
  target.request('POST', '/api/auth/refresh', { body: { refresh_token: refreshToken } })

const listAgents = (target: TestServer, token: string) => target.request('GET', '/api/agents', { token })

function decodePart(part: string | undefined): Record<string, unknown> {
  return JSON.parse(Buffer.from(part ?? '', 'base64url').toString('utf8')) as Record<string, unknown>
}

const encodePart = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url')

/** A compact JWT with a header and payload chosen freely, HMAC-SHA256-signed with `secret`. */
function forgeHs256(header: unknown, payload: unknown, secret: string): string {
  const signingInput = `${encodePart(header)}.${encodePart(payload)}`
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`
}

describe('POST /api/auth/register', () => {
  it('answers 201 with exactly user {id, email} and company {id, companyId, companyName}', async () => {
    const email = freshEmail()
    const answer = await server.request('POST', '/api/auth/register', {
      body: { email, password: TEST_PASSWORD, companyName: 'Difference Engines' },
    })

    expect(answer.status).toBe(201)
    expect(answer.body).toEqual({
      user: { id: expect.stringMatching(UUID), email },
      company: {
        id: expect.any(Number),
        companyId: expect.stringMatching(UUID),
        companyName: 'Difference Engines',
      },
    })
    expect(Number.isInteger((answer.body as Registered).company.id)).toBe(true)
  })

  it('accepts the boundaries: a password of 8 and of 128 characters, a company name of 200', async () => {
    for (const [password, companyName] of [
      ['x'.repeat(8), 'A'],
      ['x'.repeat(128), 'n'.repeat(200)],
    ] as const) {
      const answer = await server.request('POST', '/api/auth/register', {
        body: { email: freshEmail(), password, companyName },
      })
      expect(answer.status, answer.text).toBe(201)
    }
  })

  it.each([
    ['an invalid email', { email: 'not-an-email', password: TEST_PASSWORD, companyName: 'A' }, ['email']],
    [
      'a password of 7 characters',
      { email: 'x@example.com', password: 'x'.repeat(7), companyName: 'A' },
      ['password'],
    ],
    [
      'a password of 129 characters',
      { email: 'x@example.com', password: 'x'.repeat(129), companyName: 'A' },
      ['password'],
    ],
    [
      'an empty company name',
      { email: 'x@example.com', password: TEST_PASSWORD, companyName: '' },
      ['companyName'],
    ],
    [
      'a blank company name',
      { email: 'x@example.com', password: TEST_PASSWORD, companyName: '   ' },
      ['companyName'],
    ],
    [
      'a company name of 201 characters',
      { email: 'x@example.com', password: TEST_PASSWORD, companyName: 'n'.repeat(201) },
      ['companyName'],
    ],
    ['no fields at all', {}, ['companyName', 'email', 'password']],
    ['no company name', { email: 'x@example.com', password: TEST_PASSWORD }, ['companyName']],
    [
      'a number for a password',
      { email: 'x@example.com', password: 12345678, companyName: 'A' },
      ['password'],
    ],
    [
      'an unknown field',
      { email: 'x@example.com', password: TEST_PASSWORD, companyName: 'A', plan: 'gold' },
      ['plan'],
    ],
    ['a JSON array', [], ['(root)']],
    ['a JSON string', 'register me', ['(root)']],
  ])('answers 400 VALIDATION_ERROR naming the fields for %s', async (_case, body, fields) => {
    const answer = await server.request('POST', '/api/auth/register', { body })

    expect(expectValidationError(answer)).toEqual(fields)
  })

  it.each([
    ['truncated JSON', '{"email": "x@example.com", '],
    ['a form body', 'email=x%40example.com&password=secret'],
  ])('answers 400 VALIDATION_ERROR to %s, which has no fields to name', async (_case, rawBody) => {
    const answer = await server.request('POST', '/api/auth/register', { rawBody })

    // CONTRACT §2 asks `details` of field violations only; an unreadable body has no fields.
    expectError(answer, 400, 'VALIDATION_ERROR')
  })

  // The spec: "If registration fails (for example, the email already exists) the answer is 500
  // USER_CREATION_FAILED": a failure of the storage is a failed registration too.
  it('answers 500 USER_CREATION_FAILED when the storage fails the registration, with nothing stored', async () => {
    const failing = await startTestServer()
    try {
      const storage = failing.storage as { transaction: Storage['transaction'] }
      const transaction = storage.transaction
      storage.transaction = () => Promise.reject(new Error('the database went away'))
      const email = freshEmail()
      const answer = await failing.request('POST', '/api/auth/register', {
        body: { email, password: TEST_PASSWORD, companyName: 'Unlucky' },
      })
      const error = expectError(answer, 500, 'USER_CREATION_FAILED')
      expect(error.message).not.toMatch(/database/)
      storage.transaction = transaction
      expect(await failing.storage.users.findByEmail({ email })).toBeNull()
    } finally {
      await failing.close()
    }
  })

  it('answers 500 USER_CREATION_FAILED to an existing email in any case, and keeps the first password', async () => {
    const email = freshEmail()
    await register(server, email)

    for (const again of [email, email.toUpperCase()]) {
      const answer = await server.request('POST', '/api/auth/register', {
        body: { email: again, password: 'another password', companyName: 'Copycat' },
      })
      expectError(answer, 500, 'USER_CREATION_FAILED')
    }
    expect(
      (await server.request('POST', '/api/auth/login', { body: { email, password: TEST_PASSWORD } })).status,
    ).toBe(200)
    expectError(
      await server.request('POST', '/api/auth/login', { body: { email, password: 'another password' } }),
      401,
      'INVALID_CREDENTIALS',
    )
  })
})

describe('U+0000 in a body', () => {
  it.each([
    [
      'a value',
      '/api/auth/register',
      '{"email":"nul@example.com","password":"long enough","companyName":"a\\u0000b"}',
      'companyName',
    ],
    ['a login', '/api/auth/login', '{"email":"x\\u0000@example.com","password":"whatever1"}', 'email'],
    [
      'a nested key',
      '/api/auth/register',
      '{"email":"nul@example.com","extra":{"a\\u0000":1}}',
      'extra.a\u0000',
    ],
  ])('answers 400 VALIDATION_ERROR naming where it is: %s', async (_case, path, rawBody, field) => {
    const answer = await server.request('POST', path, { rawBody })
    expect(expectValidationError(answer)).toEqual([field])
  })

  it('leaves a backslash followed by "u0000" alone: it is text like any other', async () => {
    const answer = await server.request('POST', '/api/auth/register', {
      body: { email: freshEmail(), password: TEST_PASSWORD, companyName: 'C:\\u0000' },
    })
    expect(answer.status).toBe(201)
  })
})

describe('a lone surrogate in a body', () => {
  // UTF-8 has no bytes for half of a UTF-16 pair: PostgreSQL stores U+FFFD in its place, so every
  // storage is handed U+FFFD and answers alike.
  it('is kept as U+FFFD, in the answer and in what is stored', async () => {
    const email = freshEmail()
    const answer = await server.request('POST', '/api/auth/register', {
      rawBody: `{"email":"${email}","password":"${TEST_PASSWORD}","companyName":"a\\ud800b\\udc00c\\ud83d\\ude00"}`,
    })
    expect(answer.status).toBe(201)
    expect((answer.body as Registered).company.companyName).toBe('a\uFFFDb\uFFFDc\uD83D\uDE00')
    const { session } = (
      await server.request('POST', '/api/auth/login', { body: { email, password: TEST_PASSWORD } })
    ).body as { session: SessionTokens }
    const me = await server.request('GET', '/api/auth/me', { token: session.access_token })
    expect((me.body as { company: { companyName: string } }).company.companyName).toBe(
      'a\uFFFDb\uFFFDc\uD83D\uDE00',
    )
  })
})

describe('POST /api/auth/login', () => {
  it('answers 200 with session {access_token, refresh_token, expires_at in Unix seconds} and user {id, email, companyId}', async () => {
    const email = freshEmail()
    const { user, company } = await register(server, email)
    const before = Math.floor(Date.now() / 1000)

    const answer = await server.request('POST', '/api/auth/login', {
      body: { email, password: TEST_PASSWORD },
    })

    const after = Math.ceil(Date.now() / 1000)
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      session: {
        access_token: expect.stringMatching(JWT),
        refresh_token: expect.stringMatching(REFRESH_TOKEN),
        expires_at: expect.any(Number),
      },
      user: { id: user.id, email, companyId: company.id },
    })
    const { session } = answer.body as { session: SessionTokens }
    expect(session.expires_at).toBeGreaterThanOrEqual(before + 3600)
    expect(session.expires_at).toBeLessThanOrEqual(after + 3600)
    const [header, payload] = session.access_token.split('.')
    expect(decodePart(header)).toEqual({ alg: 'HS256', typ: 'JWT' })
    expect(decodePart(payload)).toMatchObject({
      sub: user.id,
      cid: company.id,
      iat: session.expires_at - 3600,
      exp: session.expires_at,
    })
  })

  it('answers a wrong password and an unknown email with the same 401 INVALID_CREDENTIALS', async () => {
    const email = freshEmail()
    await register(server, email)

    const wrongPassword = await server.request('POST', '/api/auth/login', {
      body: { email, password: 'not the password' },
    })
    const unknownEmail = await server.request('POST', '/api/auth/login', {
      body: { email: freshEmail(), password: TEST_PASSWORD },
    })

    expect(expectError(wrongPassword, 401, 'INVALID_CREDENTIALS').message).toBe('invalid email or password')
    expect(unknownEmail.status).toBe(401)
    expect(unknownEmail.body).toEqual(wrongPassword.body)
  })

  it('answers 400 VALIDATION_ERROR to a login without a password', async () => {
    const answer = await server.request('POST', '/api/auth/login', { body: { email: freshEmail() } })

    expect(expectValidationError(answer)).toEqual(['password'])
  })

  it('answers the 11th failed login in the window 429 RATE_LIMITED with Retry-After, even with the right password', async () => {
    const email = freshEmail()
    const neighbour = freshEmail()
    await register(server, email)
    await register(server, neighbour)

    for (let attempt = 1; attempt <= 10; attempt += 1) {
      const answer = await server.request('POST', '/api/auth/login', {
        body: { email, password: `wrong password ${attempt}` },
      })
      expectError(answer, 401, 'INVALID_CREDENTIALS')
    }
    const limited = await server.request('POST', '/api/auth/login', {
      body: { email: email.toUpperCase(), password: TEST_PASSWORD },
    })

    expectError(limited, 429, 'RATE_LIMITED')
    const retryAfter = limited.headers.get('retry-after')
    expect(retryAfter).toMatch(/^\d+$/)
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(890)
    expect(Number(retryAfter)).toBeLessThanOrEqual(900)
    // The limit is per email: another account logs in as usual.
    await login(server, neighbour)
  })

  it('checks at most 10 passwords of 40 guesses sent at once; the rest answer 429 RATE_LIMITED', async () => {
    // argon2id takes milliseconds per verify, so every guess is in flight before the first fails.
    const target = await realSigner({ hasher: createArgon2PasswordHasher() })
    try {
      const email = freshEmail()
      await register(target, email)

      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, index) =>
          target.request('POST', '/api/auth/login', { body: { email, password: `guess ${index}` } }),
        ),
      )

      const checked = answers.filter((answer) => answer.status === 401)
      const limited = answers.filter((answer) => answer.status === 429)
      expect(checked.length).toBeLessThanOrEqual(10)
      expect(checked.length + limited.length).toBe(40)
      for (const answer of checked) expectError(answer, 401, 'INVALID_CREDENTIALS')
      for (const answer of limited) expectError(answer, 429, 'RATE_LIMITED')
      const afterwards = await target.request('POST', '/api/auth/login', {
        body: { email, password: TEST_PASSWORD },
      })
      expectError(afterwards, 429, 'RATE_LIMITED')
    } finally {
      await target.close()
    }
  })

  it('answers 200 to each of 15 logins sent at once with the right password (only failures count)', async () => {
    const target = await realSigner({ hasher: createArgon2PasswordHasher() })
    try {
      const email = freshEmail()
      await register(target, email)

      const answers = await Promise.all(
        Array.from({ length: 15 }, () =>
          target.request('POST', '/api/auth/login', { body: { email, password: TEST_PASSWORD } }),
        ),
      )

      expect(answers.map((answer) => answer.status)).toEqual(Array.from({ length: 15 }, () => 200))
      const tokens = new Set(
        answers.map((answer) => (answer.body as { session: SessionTokens }).session.refresh_token),
      )
      expect(tokens.size).toBe(15)
    } finally {
      await target.close()
    }
  })

  it('lets the email log in again once the window has passed', async () => {
    const clock = createManualClock(new Date())
    const target = await realSigner({ accountClock: clock })
    try {
      const email = freshEmail()
      await register(target, email)
      for (let attempt = 0; attempt < 10; attempt += 1) {
        await target.request('POST', '/api/auth/login', { body: { email, password: 'wrong password' } })
      }
      const limited = await target.request('POST', '/api/auth/login', {
        body: { email, password: TEST_PASSWORD },
      })
      expectError(limited, 429, 'RATE_LIMITED')
      expect(limited.headers.get('retry-after')).toBe('900')

      await clock.advance(900_000)

      await login(target, email)
    } finally {
      await target.close()
    }
  })
})

describe('GET /api/auth/me', () => {
  const meOf = (token: string) => server.request('GET', '/api/auth/me', { token })

  it('answers user {id, email, companyId, isSuperadmin} and company {id, companyId, companyName, createdAt} to a JWT', async () => {
    const email = freshEmail()
    const { user, company } = await register(server, email, 'Analytical Engines')
    const { access_token } = await login(server, email)

    const answer = await meOf(access_token)

    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      user: { id: user.id, email, companyId: company.id, isSuperadmin: false },
      company: {
        id: company.id,
        companyId: company.companyId,
        companyName: 'Analytical Engines',
        createdAt: expect.stringMatching(ISO_MS),
      },
    })
  })

  it('answers for the user who created it to an API token', async () => {
    const withJwt = await meOf(owner.jwt)
    const withApiToken = await meOf(owner.apiToken)

    expect(withApiToken.status).toBe(200)
    expect(withApiToken.body).toEqual(withJwt.body)
    expect((withApiToken.body as { company: { id: number } }).company.id).toBe(owner.id)
  })

  it('answers 401 UNAUTHORIZED without a bearer', async () => {
    expectError(await server.request('GET', '/api/auth/me'), 401, 'UNAUTHORIZED')
  })
})

describe('POST /api/auth/refresh', () => {
  it('rotates: a new session with another refresh token; the old one then answers 401 REFRESH_FAILED', async () => {
    const email = freshEmail()
    await register(server, email)
    const first = await login(server, email)

    const answer = await refresh(server, first.refresh_token)

    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      session: {
        access_token: expect.stringMatching(JWT),
        refresh_token: expect.stringMatching(REFRESH_TOKEN),
        expires_at: expect.any(Number),
      },
    })
    const second = (answer.body as { session: SessionTokens }).session
    expect(second.refresh_token).not.toBe(first.refresh_token)
    // Most often in the same second as the login: the same claims, and still another token.
    expect(second.access_token).not.toBe(first.access_token)
    expect((await listAgents(server, second.access_token)).status).toBe(200)

    expectError(await refresh(server, first.refresh_token), 401, 'REFRESH_FAILED')
    // Within the default reuse interval a repeat is a lost race, not a theft: the chain goes on.
    expect((await refresh(server, second.refresh_token)).status).toBe(200)
  })

  it.each([
    ['an unknown token', { refresh_token: 'a'.repeat(43) }],
    ['an access token', 'access token'],
    ['no token', {}],
    ['an empty token', { refresh_token: '' }],
    ['a number', { refresh_token: 123 }],
    ['a token of 10,000 characters', { refresh_token: 'a'.repeat(10_000) }],
    ['a token beside an unknown field', { refresh_token: 'a'.repeat(43), extra: 1 }],
    ['a JSON array', []],
    ['null', null],
  ])('answers 401 REFRESH_FAILED to %s: the spec gives refresh no 400 (CONTRACT §2)', async (_case, body) => {
    const answer = await server.request('POST', '/api/auth/refresh', {
      body: body === 'access token' ? { refresh_token: owner.jwt } : body,
    })
    expectError(answer, 401, 'REFRESH_FAILED')
  })

  it('answers 400 VALIDATION_ERROR to a refresh body that is not JSON', async () => {
    expectError(
      await server.request('POST', '/api/auth/refresh', { rawBody: '{"refresh_token": ' }),
      400,
      'VALIDATION_ERROR',
    )
  })

  it('revokes every refresh token of the login when a used one comes back after the reuse interval', async () => {
    const clock = createManualClock(new Date())
    const target = await realSigner({
      accountClock: clock,
      accountSettings: { refreshReuseIntervalSeconds: 0 },
    })
    try {
      const email = freshEmail()
      await register(target, email)
      const stolen = await login(target, email)
      const otherLogin = await login(target, email)
      const second = ok<{ session: SessionTokens }>(await refresh(target, stolen.refresh_token)).session
      const newest = ok<{ session: SessionTokens }>(await refresh(target, second.refresh_token)).session
      await clock.advance(1000)

      expectError(await refresh(target, stolen.refresh_token), 401, 'REFRESH_FAILED')

      expectError(await refresh(target, newest.refresh_token), 401, 'REFRESH_FAILED')
      // Only that login's family is revoked; the same user's other login goes on.
      expect((await refresh(target, otherLogin.refresh_token)).status).toBe(200)
    } finally {
      await target.close()
    }
  })

  it('revokes nothing when a used one comes back within the reuse interval', async () => {
    const clock = createManualClock(new Date())
    const target = await realSigner({
      accountClock: clock,
      accountSettings: { refreshReuseIntervalSeconds: 60 },
    })
    try {
      const email = freshEmail()
      await register(target, email)
      const first = await login(target, email)
      const successor = ok<{ session: SessionTokens }>(await refresh(target, first.refresh_token)).session
      await clock.advance(30_000)

      expectError(await refresh(target, first.refresh_token), 401, 'REFRESH_FAILED')

      expect((await refresh(target, successor.refresh_token)).status).toBe(200)
    } finally {
      await target.close()
    }
  })

  it('answers 20 parallel refreshes with one token with exactly one 200 and nineteen 401, leaving one chain', async () => {
    const email = freshEmail()
    await register(server, email)
    const { refresh_token } = await login(server, email)

    const answers = await Promise.all(Array.from({ length: 20 }, () => refresh(server, refresh_token)))

    const statuses = answers.map((answer) => answer.status)
    expect(statuses.filter((status) => status === 200)).toHaveLength(1)
    expect(statuses.filter((status) => status === 401)).toHaveLength(19)
    for (const answer of answers.filter((each) => each.status === 401)) {
      expectError(answer, 401, 'REFRESH_FAILED')
    }
    const winner = (answers.find((answer) => answer.status === 200)!.body as { session: SessionTokens })
      .session
    expectError(await refresh(server, refresh_token), 401, 'REFRESH_FAILED')
    const next = ok<{ session: SessionTokens }>(await refresh(server, winner.refresh_token)).session
    expect((await listAgents(server, next.access_token)).status).toBe(200)
  })
})

describe('bearer tokens on a protected endpoint (GET /api/agents)', () => {
  /** Claims a genuine token of `owner` carries, to forge tokens that differ in one way only. */
  const ownerClaims = () => decodePart(owner.jwt.split('.')[1])

  it('accepts a token forged with the right secret (a control for the forgeries below)', async () => {
    const token = forgeHs256({ alg: 'HS256', typ: 'JWT' }, ownerClaims(), JWT_SECRET)

    expect((await listAgents(server, token)).status).toBe(200)
  })

  it('answers 401 UNAUTHORIZED to alg none, with or without a signature', async () => {
    const header = encodePart({ alg: 'none', typ: 'JWT' })
    const payload = encodePart(ownerClaims())
    const signature = owner.jwt.split('.')[2]

    for (const token of [`${header}.${payload}.`, `${header}.${payload}.${signature}`]) {
      expectError(await listAgents(server, token), 401, 'UNAUTHORIZED')
    }
  })

  it('answers 401 UNAUTHORIZED to a token signed with another key or another HMAC algorithm', async () => {
    const wrongKey = await new SignJWT({ cid: owner.id, sid: ownerClaims().sid })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(String(ownerClaims().sub))
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(Buffer.from('a-different-secret-of-at-least-32-bytes'))
    const hs512 = `${encodePart({ alg: 'HS512', typ: 'JWT' })}.${encodePart(ownerClaims())}`

    expectError(await listAgents(server, wrongKey), 401, 'UNAUTHORIZED')
    expectError(
      await listAgents(
        server,
        `${hs512}.${createHmac('sha512', JWT_SECRET).update(hs512).digest('base64url')}`,
      ),
      401,
      'UNAUTHORIZED',
    )
  })

  it('answers 401 UNAUTHORIZED to an expired token', async () => {
    const now = Math.floor(Date.now() / 1000)
    const expired = forgeHs256(
      { alg: 'HS256', typ: 'JWT' },
      { ...ownerClaims(), iat: now - 7200, exp: now - 3600 },
      JWT_SECRET,
    )

    expectError(await listAgents(server, expired), 401, 'UNAUTHORIZED')
  })

  it('answers 401 UNAUTHORIZED to a genuine token once its hour is over', async () => {
    const clock = createManualClock(new Date())
    const target = await realSigner({ accountClock: clock })
    try {
      const email = freshEmail()
      await register(target, email)
      const { access_token } = await login(target, email)
      await clock.advance(3599_000)
      expect((await listAgents(target, access_token)).status).toBe(200)

      await clock.advance(1000)

      expectError(await listAgents(target, access_token), 401, 'UNAUTHORIZED')
    } finally {
      await target.close()
    }
  })

  it("answers 401 UNAUTHORIZED to a genuine token whose payload was changed to another company's", async () => {
    const [header, , signature] = owner.jwt.split('.')
    const tampered = `${header}.${encodePart({ ...ownerClaims(), cid: stranger.id })}.${signature}`

    expectError(await listAgents(server, tampered), 401, 'UNAUTHORIZED')
  })

  it.each([
    ['a company id out of range', { cid: 2 ** 40 }],
    ['a company id of 0', { cid: 0 }],
    ['a negative company id', { cid: -1 }],
    ['a user id that is no UUID', { sub: 'not-a-user-id' }],
    ['a login id that is no UUID', { sid: 'not-a-login-id' }],
  ])(
    'answers 401 UNAUTHORIZED, never 500, to a token signed with the right secret but %s',
    async (_case, change) => {
      const token = forgeHs256({ alg: 'HS256', typ: 'JWT' }, { ...ownerClaims(), ...change }, JWT_SECRET)

      expectError(await listAgents(server, token), 401, 'UNAUTHORIZED')
      expectError(await server.request('GET', '/api/billing', { token }), 401, 'UNAUTHORIZED')
    },
  )

  it.each([
    ['no Authorization header', undefined],
    ['the scheme alone', 'Bearer'],
    ['the scheme and blanks', 'Bearer  '],
    ['another scheme', 'Basic x'],
    ['garbage', 'garbage'],
    ['two tokens', 'Bearer a b'],
    ['an unknown API token', `Bearer sb_${'A'.repeat(43)}`],
    ['a JWT shape that is no JWT', 'Bearer a.b.c'],
  ])('answers 401 UNAUTHORIZED to %s', async (_case, authorization) => {
    const answer = await server.request('GET', '/api/agents', {
      ...(authorization === undefined ? {} : { headers: { authorization } }),
    })

    expectError(answer, 401, 'UNAUTHORIZED')
  })

  it('answers 401 UNAUTHORIZED to a genuine token without the scheme or under another one', async () => {
    for (const authorization of [owner.jwt, `Token ${owner.jwt}`, `Basic ${owner.apiToken}`]) {
      const answer = await server.request('GET', '/api/agents', { headers: { authorization } })
      expectError(answer, 401, 'UNAUTHORIZED')
    }
    // The scheme itself is case-insensitive (RFC 9110).
    const lowercase = await server.request('GET', '/api/agents', {
      headers: { authorization: `bearer ${owner.jwt}` },
    })
    expect(lowercase.status).toBe(200)
  })
})

describe('POST /api/auth/logout', () => {
  it("answers 204 to a JWT and revokes that login's refresh tokens, and only that login's", async () => {
    const email = freshEmail()
    await register(server, email)
    const leaving = await login(server, email)
    const staying = await login(server, email)

    const answer = await server.request('POST', '/api/auth/logout', { token: leaving.access_token })

    expect(answer.status).toBe(204)
    expect(answer.text).toBe('')
    expectError(await refresh(server, leaving.refresh_token), 401, 'REFRESH_FAILED')
    expect((await refresh(server, staying.refresh_token)).status).toBe(200)
    // Access tokens are not revocable (CONTRACT §3): the one in hand works until it expires.
    expect((await listAgents(server, leaving.access_token)).status).toBe(200)
  })

  it('answers 403 FORBIDDEN to an API token', async () => {
    const answer = await server.request('POST', '/api/auth/logout', { token: owner.apiToken })

    expectError(answer, 403, 'FORBIDDEN')
  })
})

describe('company API tokens', () => {
  const createToken = (token: string, body: unknown) =>
    server.request('POST', '/api/api-tokens', { token, body })

  it('creates one: 201 {id, name, token starting sb_, createdAt}', async () => {
    const answer = await createToken(owner.jwt, { name: 'CI pipeline' })

    expect(answer.status).toBe(201)
    expect(answer.body).toEqual({
      id: expect.stringMatching(UUID),
      name: 'CI pipeline',
      token: expect.stringMatching(API_TOKEN),
      createdAt: expect.stringMatching(ISO_MS),
    })
  })

  it('lists them as {apiTokens: [{id, name, createdAt}], nextCursor} without any secret', async () => {
    const email = freshEmail()
    await register(server, email)
    const { access_token } = await login(server, email)
    const created = [
      ok<{ id: string; token: string }>(await createToken(access_token, { name: 'first' }), 201),
      ok<{ id: string; token: string }>(await createToken(access_token, { name: 'second' }), 201),
    ]

    const answer = await server.request('GET', '/api/api-tokens', { token: access_token })

    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      apiTokens: expect.arrayContaining([
        { id: created[0]!.id, name: 'first', createdAt: expect.stringMatching(ISO_MS) },
        { id: created[1]!.id, name: 'second', createdAt: expect.stringMatching(ISO_MS) },
      ]),
      nextCursor: null,
    })
    expect((answer.body as { apiTokens: unknown[] }).apiTokens).toHaveLength(2)
    for (const { token } of created) expect(answer.text).not.toContain(token.slice(3))

    const firstPage = ok<{ apiTokens: { id: string }[]; nextCursor: string | null }>(
      await server.request('GET', '/api/api-tokens?limit=1', { token: access_token }),
    )
    expect(firstPage.apiTokens).toHaveLength(1)
    expect(firstPage.nextCursor).toEqual(expect.any(String))
    const secondPage = ok<{ apiTokens: { id: string }[]; nextCursor: string | null }>(
      await server.request(
        'GET',
        `/api/api-tokens?limit=1&cursor=${encodeURIComponent(firstPage.nextCursor!)}`,
        {
          token: access_token,
        },
      ),
    )
    expect(secondPage.nextCursor).toBeNull()
    expect([...firstPage.apiTokens, ...secondPage.apiTokens].map((token) => token.id).sort()).toEqual(
      created.map((token) => token.id).sort(),
    )
  })

  it('works as a bearer until deleted: DELETE answers 204 and the next call with it 401', async () => {
    const { id, token } = ok<{ id: string; token: string }>(
      await createToken(owner.jwt, { name: 'short-lived' }),
      201,
    )
    expect((await listAgents(server, token)).status).toBe(200)

    const deleted = await server.request('DELETE', `/api/api-tokens/${id}`, { token: owner.jwt })

    expect(deleted.status).toBe(204)
    expect(deleted.text).toBe('')
    expectError(await listAgents(server, token), 401, 'UNAUTHORIZED')
    const listed = ok<{ apiTokens: { id: string }[] }>(
      await server.request('GET', '/api/api-tokens', { token: owner.jwt }),
    )
    expect(listed.apiTokens.map((each) => each.id)).not.toContain(id)
  })

  it('deletes one named by its id in capitals: the same UUID, as on every storage', async () => {
    const { id, token } = ok<{ id: string; token: string }>(
      await createToken(owner.jwt, { name: 'shouted' }),
      201,
    )

    const deleted = await server.request('DELETE', `/api/api-tokens/${id.toUpperCase()}`, {
      token: owner.jwt,
    })

    expect(deleted.status, deleted.text).toBe(204)
    expectError(await listAgents(server, token), 401, 'UNAUTHORIZED')
  })

  it('refuses an API token the creation and the deletion of API tokens with 403 FORBIDDEN', async () => {
    const { id, token } = ok<{ id: string; token: string }>(
      await createToken(owner.jwt, { name: 'target' }),
      201,
    )

    expectError(await createToken(owner.apiToken, { name: 'minted by a token' }), 403, 'FORBIDDEN')
    expectError(
      await server.request('DELETE', `/api/api-tokens/${id}`, { token: owner.apiToken }),
      403,
      'FORBIDDEN',
    )

    expect((await listAgents(server, token)).status).toBe(200)
  })

  it('answers 401 UNAUTHORIZED to a creation by a session naming an unknown user or another company', async () => {
    const claims = decodePart(owner.jwt.split('.')[1])
    for (const change of [{ sub: randomUUID() }, { cid: stranger.id }, { cid: 999_999 }]) {
      const token = forgeHs256({ alg: 'HS256', typ: 'JWT' }, { ...claims, ...change }, JWT_SECRET)
      expectError(await createToken(token, { name: 'orphan' }), 401, 'UNAUTHORIZED')
    }
  })

  it("answers 404 NOT_FOUND to another company's token id, an unknown id and a malformed one", async () => {
    const { id, token } = ok<{ id: string; token: string }>(
      await createToken(stranger.jwt, { name: 'theirs' }),
      201,
    )

    for (const target of [id, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const answer = await server.request('DELETE', `/api/api-tokens/${target}`, { token: owner.jwt })
      expectError(answer, 404, 'NOT_FOUND')
    }
    expect((await listAgents(server, token)).status).toBe(200)
  })

  it('answers 400 VALIDATION_ERROR to a missing or blank name', async () => {
    expect(expectValidationError(await createToken(owner.jwt, {}))).toEqual(['name'])
    expect(expectValidationError(await createToken(owner.jwt, { name: '  ' }))).toEqual(['name'])
  })
})

describe('a companyId smuggled into a body', () => {
  it('is ignored by register, login, refresh and API token creation', async () => {
    const email = freshEmail()
    const registered = ok<Registered>(
      await server.request('POST', '/api/auth/register', {
        body: { email, password: TEST_PASSWORD, companyName: 'Honest Co', companyId: stranger.id },
      }),
      201,
    )
    expect(registered.company.id).not.toBe(stranger.id)

    const loggedIn = ok<{ session: SessionTokens; user: { companyId: number } }>(
      await server.request('POST', '/api/auth/login', {
        body: { email, password: TEST_PASSWORD, companyId: stranger.id },
      }),
    )
    expect(loggedIn.user.companyId).toBe(registered.company.id)
    expect(decodePart(loggedIn.session.access_token.split('.')[1]).cid).toBe(registered.company.id)

    const refreshed = ok<{ session: SessionTokens }>(
      await server.request('POST', '/api/auth/refresh', {
        body: { refresh_token: loggedIn.session.refresh_token, companyId: stranger.id },
      }),
    )
    expect(decodePart(refreshed.session.access_token.split('.')[1]).cid).toBe(registered.company.id)

    const created = ok<{ token: string }>(
      await server.request('POST', '/api/api-tokens', {
        token: refreshed.session.access_token,
        body: { name: 'mine', companyId: stranger.id },
      }),
      201,
    )
    const me = ok<{ company: { id: number } }>(
      await server.request('GET', '/api/auth/me', { token: created.token }),
    )
    expect(me.company.id).toBe(registered.company.id)
    const strangersTokens = ok<{ apiTokens: { name: string }[] }>(
      await server.request('GET', '/api/api-tokens', { token: stranger.jwt }),
    )
    expect(strangersTokens.apiTokens.map((each) => each.name)).not.toContain('mine')
  })
})

describe('argon2id password hashing', () => {
  it('round-trips through register and login and stores $argon2id$ with m=19456,t=2,p=1', async () => {
    const hasher = createArgon2PasswordHasher()
    const target = await realSigner({ hasher })
    try {
      const email = freshEmail()
      await register(target, email)

      await login(target, email)
      expectError(
        await target.request('POST', '/api/auth/login', { body: { email, password: 'not the password' } }),
        401,
        'INVALID_CREDENTIALS',
      )
      const stored = await target.storage.users.findByEmail({ email })
      expect(stored?.passwordHash).toMatch(
        /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/,
      )
      expect(stored?.passwordHash).not.toContain(TEST_PASSWORD)
    } finally {
      await target.close()
    }
    const hash = await hasher.hash('pässwörd with ünïcode')
    expect(await hasher.verify({ hash, password: 'pässwörd with ünïcode' })).toBe(true)
    expect(await hasher.verify({ hash, password: 'passwörd with ünïcode' })).toBe(false)
    expect(await hasher.verify({ hash: 'not a hash', password: 'x' })).toBe(false)
  })
})
