import { createHash, randomUUID } from 'node:crypto'
import type { Result } from 'neverthrow'
import { describe, expect, it, vi } from 'vitest'
import { createBilling } from '../billing/create-billing.js'
import { ConfigError, type SwitchboardError } from '../domain/errors.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import type { PasswordHasher } from '../ports/accounts.js'
import type { Storage } from '../ports/storage.js'
import { createFakePasswordHasher } from '../testing/fake-password-hasher.js'
import { createFakeTokenSigner } from '../testing/fake-token-signer.js'
import { createManualClock } from '../testing/manual-clock.js'
import type { AccountSettings } from './account-settings.js'
import { type Accounts, createAccounts } from './create-accounts.js'
import type { Principal } from './principal.js'

const START = '2026-03-01T10:00:00.000Z'
const START_SECONDS = Date.parse(START) / 1000
const PASSWORD = 'correct horse battery'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const BASE64URL_32_BYTES = /^[A-Za-z0-9_-]{43}$/

function setup(options: { settings?: Partial<AccountSettings>; storage?: Storage } = {}) {
  const storage = options.storage ?? createMemoryStorage()
  const clock = createManualClock(START)
  const hasher = createFakePasswordHasher()
  const signer = createFakeTokenSigner({ secret: 'test-secret' })
  const accounts = createAccounts({
    storage,
    hasher,
    signer,
    clock,
    ...(options.settings === undefined ? {} : { settings: options.settings }),
  })
  const register = async (email = 'ada@example.com', companyName = 'Analytical Engines') =>
    unwrap(await accounts.register({ email, password: PASSWORD, companyName }))
  const login = async (email = 'ada@example.com', password = PASSWORD) =>
    unwrap(await accounts.login({ email, password }))
  const sessionPrincipal = async (email = 'ada@example.com'): Promise<Principal> => {
    const { session } = await login(email)
    return unwrap(await accounts.authenticate(`Bearer ${session.access_token}`))
  }
  return { storage, clock, hasher, signer, accounts, register, login, sessionPrincipal }
}

function unwrap<T>(result: Result<T, SwitchboardError>): T {
  if (result.isErr()) throw new Error(`expected ok, got ${JSON.stringify(result.error)}`)
  return result.value
}

function errorOf<T>(result: Result<T, SwitchboardError>): SwitchboardError {
  if (result.isOk()) throw new Error(`expected an error, got ${JSON.stringify(result.value)}`)
  return result.error
}

function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

async function refreshWith(accounts: Accounts, refreshToken: string) {
  return accounts.refresh({ refreshToken })
}

describe('register', () => {
  it('creates a user and a company and answers exactly the fields the spec lists', async () => {
    const { accounts } = setup()

    const result = unwrap(
      await accounts.register({ email: 'Ada@Example.com', password: PASSWORD, companyName: 'Engines' }),
    )

    expect(result).toEqual({
      user: { id: expect.stringMatching(UUID), email: 'Ada@Example.com' },
      company: { id: 1, companyId: expect.stringMatching(UUID), companyName: 'Engines' },
    })
  })

  it('gives the new company 5 USD and the default Sales pipeline', async () => {
    const { storage, register } = setup()
    const { user, company } = await register()
    const billing = createBilling({ storage })
    const principal: Principal = { kind: 'session', userId: user.id, companyId: company.id, loginId: 'login' }

    expect(await billing.balance(principal)).toEqual({ balanceUsd: 5, currency: 'USD' })
    const { pipelines } = await billing.pipelines(principal)
    expect(pipelines).toHaveLength(1)
    expect(pipelines[0]).toMatchObject({ name: 'Sales', isDefault: true })
    expect(pipelines[0]!.stages.map((stage) => stage.name)).toEqual([
      'New',
      'Qualified',
      'Proposal',
      'Negotiation',
      'Won',
      'Lost',
    ])
  })

  it('stores the password only as a hash', async () => {
    const { storage, register } = setup()
    const { user } = await register()

    const stored = await storage.users.get({ id: user.id })
    expect(stored?.passwordHash).not.toContain(PASSWORD)
    expect(stored?.passwordHash).toBe(await createFakePasswordHasher().hash(PASSWORD))
  })

  it('refuses an existing email in any case with USER_CREATION_FAILED and creates nothing', async () => {
    const { storage, accounts, register } = setup()
    const { company } = await register('ada@example.com')

    const error = errorOf(
      await accounts.register({ email: 'ADA@example.COM', password: PASSWORD, companyName: 'Copycat' }),
    )

    expect(error.code).toBe('USER_CREATION_FAILED')
    expect(await storage.companies.get({ id: company.id + 1 })).toBeNull()
  })

  it('lets one of several concurrent registrations of one email through', async () => {
    const { accounts } = setup()

    const results = await Promise.all(
      ['ada@example.com', 'ADA@example.com', 'Ada@Example.com', 'ada@EXAMPLE.com'].map((email) =>
        accounts.register({ email, password: PASSWORD, companyName: 'Engines' }),
      ),
    )

    expect(results.filter((result) => result.isOk())).toHaveLength(1)
    for (const result of results.filter((result) => result.isErr())) {
      expect(errorOf(result).code).toBe('USER_CREATION_FAILED')
    }
  })

  it('creates nothing at all when one step of the registration fails', async () => {
    const storage = createMemoryStorage()
    const failure = new Error('disk full')
    const failing: Storage = {
      ...storage,
      transaction: (fn) =>
        storage.transaction((tx) =>
          fn({
            ...tx,
            pipelines: {
              ...tx.pipelines,
              create: async () => {
                throw failure
              },
            },
          }),
        ),
    }
    const { accounts } = setup({ storage: failing })

    await expect(
      accounts.register({ email: 'ada@example.com', password: PASSWORD, companyName: 'Engines' }),
    ).rejects.toBe(failure)

    expect(await storage.users.findByEmail({ email: 'ada@example.com' })).toBeNull()
    expect(await storage.companies.get({ id: 1 })).toBeNull()
    expect(await storage.billing.getBalance({ companyId: 1 })).toBe(0)
  })
})

/** Password checks that take a few milliseconds, so attempts sent at once are all in flight together. */
function slowDown(hasher: PasswordHasher): void {
  const verify = hasher.verify.bind(hasher)
  hasher.verify = async (input) => {
    await new Promise((resolve) => setTimeout(resolve, 5))
    return verify(input)
  }
}

/** Password checks wait until released, as slow argon2id checks in flight would. */
function holdChecks(hasher: PasswordHasher) {
  const verify = hasher.verify.bind(hasher)
  let held: (() => void)[] = []
  let released = false
  hasher.verify = async (input) => {
    if (!released) await new Promise<void>((resolve) => held.push(resolve))
    return verify(input)
  }
  return {
    waiting: () => held.length,
    all: () => {
      released = true
      for (const resolve of held) resolve()
      held = []
    },
  }
}

describe('login', () => {
  it('answers a session whose access token expires in an hour, in Unix seconds', async () => {
    const { signer, register, login } = setup()
    const { user, company } = await register()

    const result = await login('ADA@example.com')

    expect(result.user).toEqual({ id: user.id, email: 'ada@example.com', companyId: company.id })
    expect(result.session.expires_at).toBe(START_SECONDS + 3600)
    expect(result.session.refresh_token).toMatch(BASE64URL_32_BYTES)
    expect(await signer.verify(result.session.access_token, { now: new Date(START) })).toEqual({
      userId: user.id,
      companyId: company.id,
      loginId: expect.stringMatching(UUID),
      issuedAt: START_SECONDS,
      expiresAt: START_SECONDS + 3600,
    })
  })

  it('keeps only the SHA-256 of the refresh token', async () => {
    const { storage, register, login } = setup()
    const { user } = await register()

    const { session } = await login()

    expect(
      await storage.refreshTokens.findByHash({ tokenHash: sha256Hex(session.refresh_token) }),
    ).toMatchObject({
      userId: user.id,
      expiresAt: new Date(Date.parse(START) + 2_592_000_000).toISOString(),
    })
    expect(await storage.refreshTokens.findByHash({ tokenHash: session.refresh_token })).toBeNull()
  })

  it('answers the same INVALID_CREDENTIALS for a wrong password and an unknown email', async () => {
    const { accounts, register } = setup()
    await register()

    const wrongPassword = errorOf(
      await accounts.login({ email: 'ada@example.com', password: 'wrong password' }),
    )
    const unknownEmail = errorOf(await accounts.login({ email: 'bob@example.com', password: PASSWORD }))

    expect(wrongPassword).toEqual({ code: 'INVALID_CREDENTIALS', message: 'invalid email or password' })
    expect(unknownEmail).toEqual(wrongPassword)
  })

  it('verifies a password for an unknown email too, against one dummy hash made on first need', async () => {
    const { accounts, hasher, register } = setup()
    await register()
    const hash = vi.spyOn(hasher, 'hash')
    const verify = vi.spyOn(hasher, 'verify')

    await accounts.login({ email: 'ada@example.com', password: 'wrong password' })
    expect(hash).not.toHaveBeenCalled()

    await accounts.login({ email: 'bob@example.com', password: PASSWORD })
    await accounts.login({ email: 'carol@example.com', password: PASSWORD })

    expect(hash).toHaveBeenCalledTimes(1)
    expect(verify).toHaveBeenCalledTimes(3)
    const dummy = await hash.mock.results[0]!.value
    expect(verify.mock.calls[1]![0]).toEqual({ hash: dummy, password: PASSWORD })
    expect(verify.mock.calls[2]![0]).toEqual({ hash: dummy, password: PASSWORD })
  })

  it('refuses the 11th attempt after 10 failures in 15 minutes, without checking the password', async () => {
    const { accounts, clock, hasher, register } = setup()
    await register()
    for (let attempt = 0; attempt < 10; attempt++) {
      const error = errorOf(await accounts.login({ email: 'ada@example.com', password: 'wrong password' }))
      expect(error.code).toBe('INVALID_CREDENTIALS')
      await clock.advance(1000)
    }
    const verify = vi.spyOn(hasher, 'verify')

    const error = errorOf(await accounts.login({ email: 'ada@example.com', password: PASSWORD }))

    // The first failure, at START, leaves the window 900 s after it; it is now START + 10 s.
    expect(error).toEqual({
      code: 'RATE_LIMITED',
      message: expect.any(String),
      details: { retryAfterSeconds: 890 },
    })
    expect(verify).not.toHaveBeenCalled()
  })

  it('checks at most 10 passwords of guesses sent at once, however slow the hash', async () => {
    const { accounts, hasher, register } = setup()
    await register()
    // As argon2id does, the check takes a while: every guess is in flight before one fails.
    slowDown(hasher)

    const results = await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        accounts.login({ email: 'ada@example.com', password: `guess ${index}` }),
      ),
    )

    const codes = results.map((result) => errorOf(result).code)
    expect(codes.filter((code) => code === 'INVALID_CREDENTIALS').length).toBeLessThanOrEqual(10)
    expect(
      codes.filter((code) => code !== 'INVALID_CREDENTIALS').every((code) => code === 'RATE_LIMITED'),
    ).toBe(true)
  })

  // Each attempt counts as a failure until its password checks out. One that finds 10 attempts in
  // flight beside it waits for one of them to end and tries again, so only failures turn logins
  // away (CONTRACT §3) while a burst of guesses still gets no more than 10 passwords checked.
  it('lets in every login sent at once with the right password, and the next one too', async () => {
    const { accounts, hasher, register } = setup()
    await register()
    slowDown(hasher)
    const verify = vi.spyOn(hasher, 'verify')

    const results = await Promise.all(
      Array.from({ length: 20 }, () => accounts.login({ email: 'ada@example.com', password: PASSWORD })),
    )

    expect(results.map((result) => (result.isOk() ? 'ok' : result.error.code))).toEqual(
      Array.from({ length: 20 }, () => 'ok'),
    )
    expect(verify).toHaveBeenCalledTimes(20)
    expect((await accounts.login({ email: 'ada@example.com', password: PASSWORD })).isOk()).toBe(true)
  })

  it('lets in the right passwords of a burst with fewer than 10 wrong ones beside them', async () => {
    const { accounts, hasher, register } = setup()
    await register()
    slowDown(hasher)

    const results = await Promise.all(
      Array.from({ length: 24 }, (_, index) =>
        accounts.login({ email: 'ada@example.com', password: index % 4 === 0 ? `guess ${index}` : PASSWORD }),
      ),
    )

    const codes = results.map((result) => (result.isOk() ? 'ok' : result.error.code))
    expect(codes.filter((code) => code === 'ok')).toHaveLength(18)
    expect(codes.filter((code) => code === 'INVALID_CREDENTIALS')).toHaveLength(6)
  })

  // Several server processes share one database (CONTRACT §1): each has its own accounts over the
  // same storage, and cannot see the other's password checks in flight.
  it('lets in a login to one process while 10 with the right password are checked in another', async () => {
    const { accounts, hasher, register, storage, clock } = setup()
    await register()
    const release = holdChecks(hasher)
    const other = createAccounts({
      storage,
      hasher,
      signer: createFakeTokenSigner({ secret: 'test-secret' }),
      clock,
    })

    const first = Array.from({ length: 10 }, () =>
      accounts.login({ email: 'ada@example.com', password: PASSWORD }),
    )
    await vi.waitFor(() => expect(release.waiting()).toBe(10))
    const second = other.login({ email: 'ada@example.com', password: PASSWORD })
    await new Promise((resolve) => setTimeout(resolve, 20))
    release.all()

    const results = await Promise.all([...first, second])
    expect(results.map((result) => (result.isOk() ? 'ok' : result.error.code))).toEqual(
      Array.from({ length: 11 }, () => 'ok'),
    )
  })

  it('checks no guess in one process while 10 are checked in another, and refuses it once they fail', async () => {
    const { accounts, hasher, register, storage, clock } = setup()
    await register()
    const release = holdChecks(hasher)
    const verify = vi.spyOn(hasher, 'verify')
    const other = createAccounts({
      storage,
      hasher,
      signer: createFakeTokenSigner({ secret: 'test-secret' }),
      clock,
    })

    const first = Array.from({ length: 10 }, (_, index) =>
      accounts.login({ email: 'ada@example.com', password: `guess ${index}` }),
    )
    await vi.waitFor(() => expect(release.waiting()).toBe(10))
    const second = Array.from({ length: 5 }, (_, index) =>
      other.login({ email: 'ada@example.com', password: index === 0 ? PASSWORD : `other guess ${index}` }),
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    release.all()

    const codes = (await Promise.all([...first, ...second])).map((result) => errorOf(result).code)
    expect(codes).toEqual([
      ...Array.from({ length: 10 }, () => 'INVALID_CREDENTIALS'),
      ...Array.from({ length: 5 }, () => 'RATE_LIMITED'),
    ])
    expect(verify).toHaveBeenCalledTimes(10)
  })

  // A check in flight is recorded for 30 s only, after which other processes take it for one whose
  // process died. The process running it knows better: its guesses still take up a failure each.
  it('checks no guess beside 10 still in flight in the same process after 30 seconds, and refuses it once they fail', async () => {
    const { accounts, clock, hasher, register } = setup()
    await register()
    const release = holdChecks(hasher)
    const verify = vi.spyOn(hasher, 'verify')

    const first = Array.from({ length: 10 }, (_, index) =>
      accounts.login({ email: 'ada@example.com', password: `guess ${index}` }),
    )
    await vi.waitFor(() => expect(release.waiting()).toBe(10))
    // An overloaded server: the argon2id checks queue up behind thousands of others.
    await clock.advance(31_000)
    const later = Array.from({ length: 5 }, (_, index) =>
      accounts.login({ email: 'ada@example.com', password: `later guess ${index}` }),
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    release.all()

    const codes = (await Promise.all([...first, ...later])).map((result) => errorOf(result).code)
    expect(codes).toEqual([
      ...Array.from({ length: 10 }, () => 'INVALID_CREDENTIALS'),
      ...Array.from({ length: 5 }, () => 'RATE_LIMITED'),
    ])
    expect(verify).toHaveBeenCalledTimes(10)
  })

  it('lets logins through again once the oldest failure leaves the window', async () => {
    const { accounts, clock, register } = setup()
    await register()
    for (let attempt = 0; attempt < 10; attempt++) {
      await accounts.login({ email: 'ada@example.com', password: 'wrong password' })
    }
    const limited = errorOf(await accounts.login({ email: 'ada@example.com', password: PASSWORD }))
    const { retryAfterSeconds } = limited.details as { retryAfterSeconds: number }
    expect(retryAfterSeconds).toBe(900)

    await clock.advance((retryAfterSeconds - 1) * 1000)
    expect(errorOf(await accounts.login({ email: 'ada@example.com', password: PASSWORD })).code).toBe(
      'RATE_LIMITED',
    )
    await clock.advance(1000)
    expect((await accounts.login({ email: 'ada@example.com', password: PASSWORD })).isOk()).toBe(true)
  })

  it('counts failures per email whatever its case, unknown emails included', async () => {
    const { accounts, register } = setup({ settings: { maxFailedLogins: 3 } })
    await register()

    await accounts.login({ email: 'nobody@example.com', password: 'x' })
    await accounts.login({ email: 'NOBODY@example.com', password: 'x' })
    await accounts.login({ email: 'Nobody@Example.com', password: 'x' })

    expect(errorOf(await accounts.login({ email: 'nobody@example.com', password: 'x' })).code).toBe(
      'RATE_LIMITED',
    )
    expect((await accounts.login({ email: 'ada@example.com', password: PASSWORD })).isOk()).toBe(true)
  })

  it('counts the failures of the window across a successful login, which is not one of them', async () => {
    const { accounts, register } = setup({ settings: { maxFailedLogins: 3 } })
    await register()
    const fail = () => accounts.login({ email: 'ada@example.com', password: 'wrong password' })
    const succeed = () => accounts.login({ email: 'ada@example.com', password: PASSWORD })

    for (let login = 0; login < 5; login++) expect((await succeed()).isOk()).toBe(true)
    await fail()
    await fail()
    expect((await succeed()).isOk()).toBe(true)
    expect(errorOf(await fail()).code).toBe('INVALID_CREDENTIALS')
    expect(errorOf(await fail()).code).toBe('RATE_LIMITED')
    expect(errorOf(await succeed()).code).toBe('RATE_LIMITED')
  })

  // Failures that left the window count for nothing; kept, every email ever guessed at would hold
  // its rows for good (a spray of wrong passwords over many emails grew the table without end).
  it('forgets the failures that left the window, of every email, once a window', async () => {
    const { accounts, clock, storage, register } = setup()
    await register()
    const forgetBefore = vi.spyOn(storage.loginFailures, 'forgetBefore')
    const everFailed = (email: string) =>
      storage.loginFailures.count({ emailKey: sha256Hex(email), since: new Date(0) })
    for (const email of ['ada@example.com', 'bob@example.com', 'eve@example.com']) {
      await accounts.login({ email, password: 'wrong password' })
    }
    expect(await everFailed('bob@example.com')).toBe(1)

    await clock.advance(900_000)
    await accounts.login({ email: 'carol@example.com', password: 'wrong password' })
    await accounts.login({ email: 'carol@example.com', password: 'wrong password' })

    await vi.waitFor(async () => expect(await everFailed('bob@example.com')).toBe(0))
    expect(await everFailed('ada@example.com')).toBe(0)
    expect(await everFailed('carol@example.com')).toBe(2)
    expect(forgetBefore).toHaveBeenCalledTimes(2)
  })

  it('honours a custom window', async () => {
    const { accounts, clock, register } = setup({
      settings: { maxFailedLogins: 1, failedLoginWindowSeconds: 60 },
    })
    await register()

    await accounts.login({ email: 'ada@example.com', password: 'wrong password' })
    expect(errorOf(await accounts.login({ email: 'ada@example.com', password: PASSWORD })).details).toEqual({
      retryAfterSeconds: 60,
    })
    await clock.advance(60_000)
    expect((await accounts.login({ email: 'ada@example.com', password: PASSWORD })).isOk()).toBe(true)
  })
})

describe('refresh', () => {
  it('answers a new session and a new refresh token for the same login', async () => {
    const { accounts, clock, signer, register, login } = setup()
    await register()
    const first = await login()
    const firstClaims = await signer.verify(first.session.access_token, { now: new Date(START) })
    await clock.advance(60_000)

    const { session } = unwrap(await refreshWith(accounts, first.session.refresh_token))

    expect(session.refresh_token).toMatch(BASE64URL_32_BYTES)
    expect(session.refresh_token).not.toBe(first.session.refresh_token)
    expect(session.expires_at).toBe(START_SECONDS + 60 + 3600)
    expect(await signer.verify(session.access_token, { now: clock.now() })).toEqual({
      ...firstClaims,
      issuedAt: START_SECONDS + 60,
      expiresAt: START_SECONDS + 60 + 3600,
    })
    expect(unwrap(await refreshWith(accounts, session.refresh_token)).session.refresh_token).toMatch(
      BASE64URL_32_BYTES,
    )
  })

  it('answers REFRESH_FAILED for an unknown, empty or access token', async () => {
    const { accounts, register, login } = setup()
    await register()
    const { session } = await login()

    for (const refreshToken of ['', 'not-a-token', session.access_token]) {
      expect(errorOf(await refreshWith(accounts, refreshToken))).toEqual({
        code: 'REFRESH_FAILED',
        message: expect.any(String),
      })
    }
  })

  it('answers REFRESH_FAILED for an expired refresh token', async () => {
    const { accounts, clock, register, login } = setup({ settings: { refreshTokenTtlSeconds: 120 } })
    await register()
    const early = await login()
    const late = await login()

    await clock.advance(119_000)
    expect((await refreshWith(accounts, early.session.refresh_token)).isOk()).toBe(true)
    await clock.advance(1000)
    expect(errorOf(await refreshWith(accounts, late.session.refresh_token)).code).toBe('REFRESH_FAILED')
  })

  it('refuses a used token within the reuse interval and revokes nothing', async () => {
    const { accounts, clock, register, login } = setup()
    await register()
    const { session } = await login()
    const next = unwrap(await refreshWith(accounts, session.refresh_token)).session

    await clock.advance(10_000)
    expect(errorOf(await refreshWith(accounts, session.refresh_token)).code).toBe('REFRESH_FAILED')
    expect((await refreshWith(accounts, next.refresh_token)).isOk()).toBe(true)
  })

  it('revokes the whole login when a used token comes back after the reuse interval', async () => {
    const { accounts, clock, register, login } = setup()
    await register()
    const { session } = await login()
    const other = await login()
    const next = unwrap(await refreshWith(accounts, session.refresh_token)).session

    await clock.advance(10_001)
    expect(errorOf(await refreshWith(accounts, session.refresh_token)).code).toBe('REFRESH_FAILED')

    expect(errorOf(await refreshWith(accounts, next.refresh_token)).code).toBe('REFRESH_FAILED')
    expect((await refreshWith(accounts, other.session.refresh_token)).isOk()).toBe(true)
    expect((await accounts.login({ email: 'ada@example.com', password: PASSWORD })).isOk()).toBe(true)
  })

  it('gives exactly one of 20 parallel refreshes with one token a session, and keeps it valid', async () => {
    const { accounts, register, login } = setup()
    await register()
    const { session } = await login()

    const results = await Promise.all(
      Array.from({ length: 20 }, () => refreshWith(accounts, session.refresh_token)),
    )

    const winners = results.filter((result) => result.isOk())
    expect(winners).toHaveLength(1)
    for (const result of results.filter((result) => result.isErr())) {
      expect(errorOf(result).code).toBe('REFRESH_FAILED')
    }
    const winner = unwrap(winners[0]!).session
    expect((await refreshWith(accounts, winner.refresh_token)).isOk()).toBe(true)
  })

  it('honours a custom reuse interval', async () => {
    const { accounts, clock, register, login } = setup({ settings: { refreshReuseIntervalSeconds: 0 } })
    await register()
    const { session } = await login()
    const next = unwrap(await refreshWith(accounts, session.refresh_token)).session

    await clock.advance(1)
    await refreshWith(accounts, session.refresh_token)
    expect(errorOf(await refreshWith(accounts, next.refresh_token)).code).toBe('REFRESH_FAILED')
  })
})

describe('authenticate', () => {
  it('turns a session access token into a session principal', async () => {
    const { accounts, register, login } = setup()
    const { user, company } = await register()
    const { session } = await login()

    for (const header of [`Bearer ${session.access_token}`, `bearer ${session.access_token}`]) {
      expect(unwrap(await accounts.authenticate(header))).toEqual({
        kind: 'session',
        userId: user.id,
        companyId: company.id,
        loginId: expect.stringMatching(UUID),
      })
    }
  })

  it('answers UNAUTHORIZED for a missing or malformed header', async () => {
    const { accounts, register, login } = setup()
    await register()
    const { session } = await login()

    for (const header of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      session.access_token,
      `Basic ${session.access_token}`,
      `Bearer ${session.access_token} extra`,
      'Bearer not.a.jwt',
      'Bearer sb_',
    ]) {
      expect(errorOf(await accounts.authenticate(header))).toEqual({
        code: 'UNAUTHORIZED',
        message: expect.any(String),
      })
    }
  })

  it('answers UNAUTHORIZED for an expired or foreign-signed access token', async () => {
    const { accounts, clock, register, login } = setup()
    const { user, company } = await register()
    const { session } = await login()
    const foreign = await createFakeTokenSigner({ secret: 'another-secret' }).sign({
      userId: user.id,
      companyId: company.id,
      loginId: 'login',
      issuedAt: START_SECONDS,
      expiresAt: START_SECONDS + 3600,
    })

    expect(errorOf(await accounts.authenticate(`Bearer ${foreign}`)).code).toBe('UNAUTHORIZED')
    await clock.advance(3_599_000)
    expect((await accounts.authenticate(`Bearer ${session.access_token}`)).isOk()).toBe(true)
    await clock.advance(1000)
    expect(errorOf(await accounts.authenticate(`Bearer ${session.access_token}`)).code).toBe('UNAUTHORIZED')
  })

  it('does not read storage for an access token', async () => {
    const { storage, accounts, register, login } = setup()
    await register()
    const { session } = await login()
    await storage.close()

    expect((await accounts.authenticate(`Bearer ${session.access_token}`)).isOk()).toBe(true)
  })

  it('keeps an access token working after logout: access tokens are not revocable', async () => {
    const { accounts, register, login } = setup()
    await register()
    const { session } = await login()
    const principal = unwrap(await accounts.authenticate(`Bearer ${session.access_token}`))

    unwrap(await accounts.logout(principal))

    expect((await accounts.authenticate(`Bearer ${session.access_token}`)).isOk()).toBe(true)
  })
})

describe('me', () => {
  it('answers the user and the company of a session', async () => {
    const { storage, accounts, register, sessionPrincipal } = setup()
    const { user, company } = await register()
    const stored = await storage.companies.get({ id: company.id })

    expect(unwrap(await accounts.me(await sessionPrincipal()))).toEqual({
      user: { id: user.id, email: 'ada@example.com', companyId: company.id, isSuperadmin: false },
      company: { ...company, createdAt: START },
    })
    expect(stored?.createdAt).toBe(START)
  })

  it('marks superadmins by email, whatever the case', async () => {
    const { accounts, register, sessionPrincipal } = setup({
      settings: { superadminEmails: ['root@example.com', ' ADA@Example.com '] },
    })
    await register('Ada@example.com')

    expect(unwrap(await accounts.me(await sessionPrincipal('ada@example.com'))).user.isSuperadmin).toBe(true)
  })

  it('answers for the user who created an API token', async () => {
    const { accounts, register, sessionPrincipal } = setup()
    const { user } = await register()
    const { token } = unwrap(await accounts.createApiToken(await sessionPrincipal(), { name: 'CI' }))
    const principal = unwrap(await accounts.authenticate(`Bearer ${token}`))

    expect(unwrap(await accounts.me(principal)).user).toMatchObject({ id: user.id, email: 'ada@example.com' })
  })

  it('answers UNAUTHORIZED for a principal whose user does not exist', async () => {
    const { accounts, register } = setup()
    const { company } = await register()

    const error = errorOf(
      await accounts.me({ kind: 'session', userId: randomUUID(), companyId: company.id, loginId: 'x' }),
    )
    expect(error.code).toBe('UNAUTHORIZED')
  })
})

describe('logout', () => {
  it("revokes the login's refresh tokens and no other login's", async () => {
    const { accounts, register, login } = setup()
    await register()
    const { session } = await login()
    const other = await login()
    const refreshed = unwrap(await refreshWith(accounts, session.refresh_token)).session
    const principal = unwrap(await accounts.authenticate(`Bearer ${refreshed.access_token}`))

    expect((await accounts.logout(principal)).isOk()).toBe(true)

    expect(errorOf(await refreshWith(accounts, refreshed.refresh_token)).code).toBe('REFRESH_FAILED')
    expect((await refreshWith(accounts, other.session.refresh_token)).isOk()).toBe(true)
  })

  it('is FORBIDDEN for an API token', async () => {
    const { accounts, register, sessionPrincipal } = setup()
    await register()
    const { token } = unwrap(await accounts.createApiToken(await sessionPrincipal(), { name: 'CI' }))
    const principal = unwrap(await accounts.authenticate(`Bearer ${token}`))

    expect(errorOf(await accounts.logout(principal)).code).toBe('FORBIDDEN')
  })
})

describe('API tokens', () => {
  it('creates an sb_ token shown once and kept only as its SHA-256', async () => {
    const { storage, accounts, register, sessionPrincipal } = setup()
    const { company } = await register()

    const created = unwrap(await accounts.createApiToken(await sessionPrincipal(), { name: 'CI' }))

    expect(created).toEqual({
      id: expect.stringMatching(UUID),
      name: 'CI',
      token: expect.stringMatching(/^sb_[A-Za-z0-9_-]{43}$/),
      createdAt: START,
    })
    expect(await storage.apiTokens.findByHash({ tokenHash: sha256Hex(created.token) })).toMatchObject({
      id: created.id,
      companyId: company.id,
    })
    expect(await storage.apiTokens.findByHash({ tokenHash: created.token })).toBeNull()
  })

  it('authenticates with an API token as the company and the user who created it', async () => {
    const { accounts, register, sessionPrincipal } = setup()
    const { user, company } = await register()
    const created = unwrap(await accounts.createApiToken(await sessionPrincipal(), { name: 'CI' }))

    expect(unwrap(await accounts.authenticate(`Bearer ${created.token}`))).toEqual({
      kind: 'api-token',
      userId: user.id,
      companyId: company.id,
      apiTokenId: created.id,
    })
    expect(errorOf(await accounts.authenticate(`Bearer ${created.token}x`)).code).toBe('UNAUTHORIZED')
  })

  it('lets only a session create or delete API tokens', async () => {
    const { accounts, register, sessionPrincipal } = setup()
    await register()
    const session = await sessionPrincipal()
    const created = unwrap(await accounts.createApiToken(session, { name: 'CI' }))
    const viaToken = unwrap(await accounts.authenticate(`Bearer ${created.token}`))

    expect(errorOf(await accounts.createApiToken(viaToken, { name: 'more' })).code).toBe('FORBIDDEN')
    expect(errorOf(await accounts.deleteApiToken(viaToken, { id: created.id })).code).toBe('FORBIDDEN')
    expect((await accounts.authenticate(`Bearer ${created.token}`)).isOk()).toBe(true)
  })

  it('refuses to create one for a session whose user is unknown or of another company (UNAUTHORIZED)', async () => {
    const { storage, accounts, register, sessionPrincipal } = setup()
    await register('ada@example.com')
    const { company: other } = await register('bob@example.com', 'Other company')
    const session = await sessionPrincipal('ada@example.com')

    for (const principal of [
      { ...session, userId: randomUUID() },
      { ...session, companyId: other.id },
      { ...session, companyId: 999_999 },
    ]) {
      expect(errorOf(await accounts.createApiToken(principal, { name: 'CI' }))).toEqual({
        code: 'UNAUTHORIZED',
        message: expect.any(String),
      })
    }
    expect((await storage.apiTokens.list({ companyId: other.id, limit: 10 })).items).toEqual([])
    expect((await accounts.listApiTokens(session, { limit: 10 })).items).toEqual([])
  })

  it("lists the company's tokens without their secrets, page by page, to any principal", async () => {
    const { accounts, clock, register, sessionPrincipal } = setup()
    await register('ada@example.com')
    await register('bob@example.com', 'Other company')
    const ada = await sessionPrincipal('ada@example.com')
    const created = []
    for (const name of ['one', 'two', 'three']) {
      created.push(unwrap(await accounts.createApiToken(ada, { name })))
      await clock.advance(1000)
    }
    unwrap(await accounts.createApiToken(await sessionPrincipal('bob@example.com'), { name: 'foreign' }))
    const viaToken = unwrap(await accounts.authenticate(`Bearer ${created[0]!.token}`))

    const first = await accounts.listApiTokens(viaToken, { limit: 2 })
    expect(first.items).toEqual(created.slice(0, 2).map(({ token: _secret, ...listed }) => listed))
    const second = await accounts.listApiTokens(ada, { limit: 2, cursor: first.nextCursor! })
    expect(second).toEqual({
      items: [{ id: created[2]!.id, name: 'three', createdAt: created[2]!.createdAt }],
      nextCursor: null,
    })
  })

  it('deletes a token, which stops working at once', async () => {
    const { accounts, register, sessionPrincipal } = setup()
    await register()
    const session = await sessionPrincipal()
    const created = unwrap(await accounts.createApiToken(session, { name: 'CI' }))

    expect((await accounts.deleteApiToken(session, { id: created.id })).isOk()).toBe(true)

    expect(errorOf(await accounts.authenticate(`Bearer ${created.token}`)).code).toBe('UNAUTHORIZED')
    expect((await accounts.listApiTokens(session, { limit: 10 })).items).toEqual([])
    expect(errorOf(await accounts.deleteApiToken(session, { id: created.id })).code).toBe('NOT_FOUND')
  })

  it("answers NOT_FOUND for an unknown, malformed or another company's token", async () => {
    const { accounts, register, sessionPrincipal } = setup()
    await register('ada@example.com')
    await register('bob@example.com', 'Other company')
    const ada = await sessionPrincipal('ada@example.com')
    const bob = await sessionPrincipal('bob@example.com')
    const created = unwrap(await accounts.createApiToken(ada, { name: 'CI' }))

    for (const id of [created.id, randomUUID(), 'not-a-uuid']) {
      expect(errorOf(await accounts.deleteApiToken(bob, { id }))).toEqual({
        code: 'NOT_FOUND',
        message: expect.any(String),
      })
    }
    expect((await accounts.authenticate(`Bearer ${created.token}`)).isOk()).toBe(true)
  })
})

describe('settings', () => {
  it('fails fast with a ConfigError on a setting out of range', () => {
    const storage = createMemoryStorage()
    const options = {
      storage,
      hasher: createFakePasswordHasher(),
      signer: createFakeTokenSigner({ secret: 's' }),
    }

    for (const settings of [
      { accessTokenTtlSeconds: 0 },
      { refreshTokenTtlSeconds: 1.5 },
      { maxFailedLogins: -1 },
      { failedLoginWindowSeconds: Number.NaN },
      { refreshReuseIntervalSeconds: -1 },
      { superadminEmails: [42] as unknown as string[] },
    ]) {
      expect(() => createAccounts({ ...options, settings })).toThrow(ConfigError)
    }
    expect(() => createAccounts({ ...options, settings: { accessTokenTtlSeconds: 0 } })).toThrow(
      /accessTokenTtlSeconds/,
    )
  })

  it('takes undefined as the default', async () => {
    const { login, register } = setup({
      settings: { accessTokenTtlSeconds: undefined } as Partial<AccountSettings>,
    })
    await register()

    expect((await login()).session.expires_at).toBe(START_SECONDS + 3600)
  })
})
