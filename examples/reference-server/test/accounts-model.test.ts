import { randomBytes } from 'node:crypto'
import { createFakePasswordHasher } from '@switchboard/core/testing'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'
import { type IsolatedStorage, isolatedStorage, onPostgres } from './support/isolated-storage.js'

/*
 * Random sequences of registrations, logins, refreshes, logouts, API token changes and agent
 * reads and writes, each with any credential the run has seen (current, rotated away, revoked,
 * another company's, garbage), checked against a model of what CONTRACT §2 and §3 say must follow.
 *
 * The server runs with REFRESH_REUSE_INTERVAL_S=0, so that presenting a used refresh token is
 * always theft (CONTRACT §3: the whole login's chain is revoked) and the model needs no clock.
 * The login limit's window (15 minutes) never passes within a run, so it is modelled exactly.
 *
 * ACCOUNTS_MODEL_RUNS (default 12) sets the number of runs, ACCOUNTS_MODEL_COMMANDS (default 40)
 * the longest sequence, ACCOUNTS_MODEL_SEED replays a run (fast-check prints the seed and path of
 * a failure). With DATABASE_URL the server runs on PostgreSQL in a schema of its own, else on
 * PGlite in a temporary folder.
 */

const RUNS = Number(process.env.ACCOUNTS_MODEL_RUNS ?? 12)
const COMMANDS = Number(process.env.ACCOUNTS_MODEL_COMMANDS ?? 40)
const SEED =
  process.env.ACCOUNTS_MODEL_SEED === undefined ? undefined : Number(process.env.ACCOUNTS_MODEL_SEED)

const USERS = 3
const PASSWORD = 'correct horse battery'
const MAX_FAILED_LOGINS = 10
const GARBAGE = ['garbage', 'sb_not-a-real-token', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl']

interface ModelUser {
  readonly email: string
  registered: boolean
  id: string | undefined
  companyId: number | undefined
  /** Failed logins in the window; a success takes back only its own attempt (CONTRACT §3). */
  failures: number
}

interface ModelLogin {
  readonly user: number
  revoked: boolean
}

interface ModelRefreshToken {
  readonly token: string
  readonly login: number
  used: boolean
}

type Credential =
  | { readonly kind: 'jwt'; readonly token: string; readonly user: number; readonly login: number }
  | { readonly kind: 'api'; readonly token: string; readonly id: string; readonly user: number }
  | { readonly kind: 'garbage'; readonly token: string }

interface ModelApiToken {
  readonly id: string
  readonly name: string
  readonly company: number
  deleted: boolean
}

interface ModelAgent {
  readonly id: number
  name: string
  readonly company: number
  deleted: boolean
}

interface Model {
  readonly users: ModelUser[]
  readonly logins: ModelLogin[]
  readonly refreshTokens: ModelRefreshToken[]
  readonly credentials: Credential[]
  readonly apiTokens: ModelApiToken[]
  readonly agents: ModelAgent[]
  counter: number
}

interface Real {
  readonly url: string
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: Record<string, unknown>
}

async function request(
  real: Real,
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
): Promise<Answer> {
  const response = await fetch(`${real.url}${path}`, {
    method,
    headers: {
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  })
  const text = await response.text()
  const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>
  const what = `${method} ${path}`
  // A 500 is an answer only register may give, and only as USER_CREATION_FAILED.
  if (response.status >= 500 && !(path === '/api/auth/register' && response.status === 500)) {
    throw new Error(`${what} answered ${response.status}: ${text}`)
  }
  if (response.status >= 400) {
    const error = body.error as Record<string, unknown> | undefined
    expect(body, `${what} error shape`).toEqual({
      error: {
        code: expect.any(String),
        message: expect.any(String),
        ...(error !== undefined && 'details' in error ? { details: expect.any(Array) } : {}),
      },
    })
  }
  return { status: response.status, headers: response.headers, body }
}

function expectError(answer: Answer, status: number, code: string, what: string): void {
  expect(
    { status: answer.status, code: (answer.body.error as { code?: string } | undefined)?.code },
    `${what}: ${JSON.stringify(answer.body)}`,
  ).toEqual({ status, code })
}

/** Whether the credential authenticates now, and as whom. */
function ownerOf(model: Model, credential: Credential): { user: number; company: number } | null {
  if (credential.kind === 'garbage') return null
  if (credential.kind === 'api') {
    const token = model.apiTokens.find((each) => each.id === credential.id)!
    if (token.deleted) return null
  }
  // Access tokens are not revocable: a logout or a stolen chain leaves them working until `exp`.
  return { user: credential.user, company: model.users[credential.user]!.companyId! }
}

const pickFrom = <T>(items: readonly T[], pick: number): T | undefined =>
  items.length === 0 ? undefined : items[pick % items.length]

const credentialOf = (model: Model, pick: number): Credential => pickFrom(model.credentials, pick)!

const describeCredential = (credential: Credential) =>
  credential.kind === 'garbage' ? `garbage(${credential.token.slice(0, 12)})` : `${credential.kind}`

type Command = fc.AsyncCommand<Model, Real>

/** Uses an email in some spelling: emails are compared case-insensitively (CONTRACT §3). */
const spell = (email: string, upper: boolean) => (upper ? email.toUpperCase() : email)

class Register implements Command {
  constructor(
    readonly user: number,
    readonly upper: boolean,
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const user = model.users[this.user]!
    const answer = await request(real, 'POST', '/api/auth/register', {
      body: { email: spell(user.email, this.upper), password: PASSWORD, companyName: `Company ${this.user}` },
    })
    if (user.registered) {
      expectError(answer, 500, 'USER_CREATION_FAILED', 'register of a taken email')
      return
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(201)
    const body = answer.body as {
      user: { id: string; email: string }
      company: { id: number; companyId: string; companyName: string }
    }
    expect(body).toEqual({
      user: { id: expect.any(String), email: expect.any(String) },
      company: { id: expect.any(Number), companyId: expect.any(String), companyName: `Company ${this.user}` },
    })
    expect(model.users.map((each) => each.companyId)).not.toContain(body.company.id)
    user.registered = true
    user.id = body.user.id
    user.companyId = body.company.id
  }
  toString = () => `Register(u${this.user}${this.upper ? ', upper case' : ''})`
}

class Login implements Command {
  constructor(
    readonly user: number,
    readonly rightPassword: boolean,
    readonly upper: boolean,
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const user = model.users[this.user]!
    const answer = await request(real, 'POST', '/api/auth/login', {
      body: {
        email: spell(user.email, this.upper),
        password: this.rightPassword ? PASSWORD : 'wrong password!',
      },
    })
    if (user.failures >= MAX_FAILED_LOGINS) {
      expectError(answer, 429, 'RATE_LIMITED', 'login after too many failures')
      expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0)
      return
    }
    if (!user.registered || !this.rightPassword) {
      user.failures += 1
      expectError(answer, 401, 'INVALID_CREDENTIALS', 'login with a wrong password or unknown email')
      expect((answer.body.error as { message: string }).message).toBe('invalid email or password')
      return
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const body = answer.body as {
      session: { access_token: string; refresh_token: string; expires_at: number }
      user: unknown
    }
    expect(body).toEqual({
      session: {
        access_token: expect.any(String),
        refresh_token: expect.any(String),
        expires_at: expect.any(Number),
      },
      user: { id: user.id, email: expect.any(String), companyId: user.companyId },
    })
    // Unix seconds, in the future.
    expect(body.session.expires_at).toBeGreaterThan(Date.now() / 1000)
    expect(body.session.expires_at).toBeLessThan(Date.now() / 1000 + 10 * 365 * 86_400)
    const login = model.logins.push({ user: this.user, revoked: false }) - 1
    model.refreshTokens.push({ token: body.session.refresh_token, login, used: false })
    model.credentials.push({ kind: 'jwt', token: body.session.access_token, user: this.user, login })
  }
  toString = () =>
    `Login(u${this.user}, ${this.rightPassword ? 'right' : 'wrong'}${this.upper ? ', upper case' : ''})`
}

/** Wrong passwords in a row, enough for two bursts to reach the login limit within a run. */
class GuessBurst implements Command {
  constructor(
    readonly user: number,
    readonly count: number,
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    for (let index = 0; index < this.count; index += 1) {
      await new Login(this.user, false, index % 2 === 1).run(model, real)
    }
  }
  toString = () => `GuessBurst(u${this.user}, ${this.count})`
}

class Refresh implements Command {
  constructor(
    readonly pick: number,
    readonly garbage: boolean,
    /** `unused`: the newest token of a chain, what an honest client holds; `used`: a replay. */
    readonly which: 'any' | 'unused' | 'used' = 'any',
  ) {}
  check = () => true
  async run(model: Model, real: Real) {
    const candidates =
      this.which === 'any'
        ? model.refreshTokens
        : model.refreshTokens.filter((token) => token.used === (this.which === 'used'))
    const picked = this.garbage ? undefined : pickFrom(candidates, this.pick)
    if (picked?.used) {
      // With REFRESH_REUSE_INTERVAL_S=0 a reuse is theft once any time has passed since first use.
      await new Promise((resolve) => setTimeout(resolve, 3))
    }
    const answer = await request(real, 'POST', '/api/auth/refresh', {
      body: { refresh_token: picked?.token ?? 'not-a-refresh-token' },
    })
    if (picked === undefined) {
      expectError(answer, 401, 'REFRESH_FAILED', 'refresh with garbage')
      return
    }
    const login = model.logins[picked.login]!
    if (picked.used || login.revoked) {
      expectError(answer, 401, 'REFRESH_FAILED', `refresh with a ${picked.used ? 'used' : 'revoked'} token`)
      if (picked.used) login.revoked = true
      return
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const body = answer.body as {
      session: { access_token: string; refresh_token: string; expires_at: number }
    }
    expect(body).toEqual({
      session: {
        access_token: expect.any(String),
        refresh_token: expect.any(String),
        expires_at: expect.any(Number),
      },
    })
    expect(body.session.refresh_token).not.toBe(picked.token)
    picked.used = true
    model.refreshTokens.push({ token: body.session.refresh_token, login: picked.login, used: false })
    model.credentials.push({
      kind: 'jwt',
      token: body.session.access_token,
      user: login.user,
      login: picked.login,
    })
  }
  toString = () =>
    this.garbage
      ? 'Refresh(garbage)'
      : `Refresh(#${this.pick}${this.which === 'any' ? '' : ` of the ${this.which}`})`
}

/**
 * Two refreshes with one current token at once: exactly one 200 (CONTRACT §3). Whether the loser
 * counted as a reuse (with an interval of 0, theft: the login is revoked) or lost the race to mark
 * it used depends on timing, so the winner's new token tells which: it works only if not revoked.
 */
class RefreshRace implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) =>
    model.refreshTokens.some((token) => !token.used && !model.logins[token.login]!.revoked)
  async run(model: Model, real: Real) {
    const live = model.refreshTokens.filter((token) => !token.used && !model.logins[token.login]!.revoked)
    const picked = pickFrom(live, this.pick)!
    const body = { refresh_token: picked.token }
    const answers = await Promise.all([
      request(real, 'POST', '/api/auth/refresh', { body }),
      request(real, 'POST', '/api/auth/refresh', { body }),
    ])
    const winners = answers.filter((answer) => answer.status === 200)
    expect(
      winners.length,
      `two refreshes at once: ${JSON.stringify(answers.map((answer) => answer.body))}`,
    ).toBe(1)
    const loser = answers.find((answer) => answer.status !== 200)!
    expectError(loser, 401, 'REFRESH_FAILED', 'the loser of a refresh race')
    picked.used = true
    const login = model.logins[picked.login]!
    const won = (winners[0]!.body as { session: { access_token: string; refresh_token: string } }).session
    model.credentials.push({ kind: 'jwt', token: won.access_token, user: login.user, login: picked.login })
    const probe = await request(real, 'POST', '/api/auth/refresh', {
      body: { refresh_token: won.refresh_token },
    })
    if (probe.status === 200) {
      model.refreshTokens.push({ token: won.refresh_token, login: picked.login, used: true })
      const next = (probe.body as { session: { refresh_token: string } }).session.refresh_token
      model.refreshTokens.push({ token: next, login: picked.login, used: false })
    } else {
      expectError(probe, 401, 'REFRESH_FAILED', 'the winner’s token after a race that counted as theft')
      login.revoked = true
      model.refreshTokens.push({ token: won.refresh_token, login: picked.login, used: false })
    }
  }
  toString = () => `RefreshRace(#${this.pick})`
}

class Me implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const answer = await request(real, 'GET', '/api/auth/me', { token: credential.token })
    const owner = ownerOf(model, credential)
    if (owner === null)
      return expectError(answer, 401, 'UNAUTHORIZED', `me with ${describeCredential(credential)}`)
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const user = model.users[owner.user]!
    expect(answer.body).toEqual({
      user: { id: user.id, email: expect.any(String), companyId: user.companyId, isSuperadmin: false },
      company: {
        id: user.companyId,
        companyId: expect.any(String),
        companyName: `Company ${owner.user}`,
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      },
    })
    expect((answer.body.user as { email: string }).email.toLowerCase()).toBe(user.email)
  }
  toString = () => `Me(#${this.pick})`
}

class Logout implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const answer = await request(real, 'POST', '/api/auth/logout', { token: credential.token })
    const owner = ownerOf(model, credential)
    if (owner === null) return expectError(answer, 401, 'UNAUTHORIZED', 'logout with a dead credential')
    if (credential.kind === 'api') return expectError(answer, 403, 'FORBIDDEN', 'logout with an API token')
    expect(answer.status, JSON.stringify(answer.body)).toBe(204)
    if (credential.kind === 'jwt') model.logins[credential.login]!.revoked = true
  }
  toString = () => `Logout(#${this.pick})`
}

class CreateApiToken implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    model.counter += 1
    const name = `token ${model.counter}`
    const answer = await request(real, 'POST', '/api/api-tokens', { token: credential.token, body: { name } })
    const owner = ownerOf(model, credential)
    if (owner === null)
      return expectError(answer, 401, 'UNAUTHORIZED', 'create API token with a dead credential')
    if (credential.kind === 'api')
      return expectError(answer, 403, 'FORBIDDEN', 'create API token with an API token')
    expect(answer.status, JSON.stringify(answer.body)).toBe(201)
    const body = answer.body as { id: string; token: string }
    expect(answer.body).toEqual({
      id: expect.any(String),
      name,
      token: expect.stringMatching(/^sb_/),
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    })
    model.apiTokens.push({ id: body.id, name, company: owner.company, deleted: false })
    model.credentials.push({ kind: 'api', token: body.token, id: body.id, user: owner.user })
  }
  toString = () => `CreateApiToken(#${this.pick})`
}

class ListApiTokens implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const answer = await request(real, 'GET', '/api/api-tokens?limit=100', { token: credential.token })
    const owner = ownerOf(model, credential)
    if (owner === null)
      return expectError(answer, 401, 'UNAUTHORIZED', 'list API tokens with a dead credential')
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const body = answer.body as {
      apiTokens: { id: string; name: string; createdAt: string }[]
      nextCursor: unknown
    }
    expect(body.nextCursor).toBeNull()
    const expected = model.apiTokens
      .filter((token) => token.company === owner.company && !token.deleted)
      .map((token) => ({ id: token.id, name: token.name, createdAt: expect.any(String) }))
    expect(
      [...body.apiTokens].sort((x, y) => x.id.localeCompare(y.id)),
      'the company’s live tokens, without their secret',
    ).toEqual(expected.sort((x, y) => x.id.localeCompare(y.id)))
  }
  toString = () => `ListApiTokens(#${this.pick})`
}

class DeleteApiToken implements Command {
  constructor(
    readonly pick: number,
    readonly target: number,
  ) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0 && model.apiTokens.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const target = pickFrom(model.apiTokens, this.target)!
    const answer = await request(real, 'DELETE', `/api/api-tokens/${target.id}`, { token: credential.token })
    const owner = ownerOf(model, credential)
    if (owner === null)
      return expectError(answer, 401, 'UNAUTHORIZED', 'delete API token with a dead credential')
    if (credential.kind === 'api')
      return expectError(answer, 403, 'FORBIDDEN', 'delete API token with an API token')
    if (target.company !== owner.company || target.deleted) {
      return expectError(answer, 404, 'NOT_FOUND', 'delete of a foreign or deleted API token')
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(204)
    target.deleted = true
  }
  toString = () => `DeleteApiToken(#${this.pick}, token #${this.target})`
}

class CreateAgent implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    model.counter += 1
    const name = `Agent ${model.counter}`
    // A `companyId` in the body is ignored: tenancy comes from the credential only (CONTRACT §2).
    const foreign = model.users.find((user) => user.companyId !== undefined)?.companyId
    const answer = await request(real, 'POST', '/api/agents', {
      token: credential.token,
      body: { name, companyId: foreign },
    })
    const owner = ownerOf(model, credential)
    if (owner === null) return expectError(answer, 401, 'UNAUTHORIZED', 'create agent with a dead credential')
    expect(answer.status, JSON.stringify(answer.body)).toBe(201)
    const body = answer.body as { id: number; name: string }
    expect({ id: typeof body.id, name: body.name }).toEqual({ id: 'number', name })
    model.agents.push({ id: body.id, name, company: owner.company, deleted: false })
  }
  toString = () => `CreateAgent(#${this.pick})`
}

class ListAgents implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const answer = await request(real, 'GET', '/api/agents?limit=100', { token: credential.token })
    const owner = ownerOf(model, credential)
    if (owner === null) return expectError(answer, 401, 'UNAUTHORIZED', 'list agents with a dead credential')
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    const body = answer.body as { agents: { id: number; name: string }[]; nextCursor: unknown }
    expect(body.nextCursor).toBeNull()
    const expected = model.agents
      .filter((agent) => agent.company === owner.company && !agent.deleted)
      .map((agent) => ({ id: agent.id, name: agent.name }))
      .sort((x, y) => x.id - y.id)
    expect(
      body.agents.map((agent) => ({ id: agent.id, name: agent.name })).sort((x, y) => x.id - y.id),
      'the company’s agents and no other',
    ).toEqual(expected)
  }
  toString = () => `ListAgents(#${this.pick})`
}

class TouchAgent implements Command {
  constructor(
    readonly pick: number,
    readonly target: number,
    readonly action: 'get' | 'patch' | 'delete',
  ) {}
  check = (model: Readonly<Model>) => model.credentials.length > 0 && model.agents.length > 0
  async run(model: Model, real: Real) {
    const credential = credentialOf(model, this.pick)
    const target = pickFrom(model.agents, this.target)!
    const path = `/api/agents/${target.id}`
    model.counter += 1
    const rename = `Agent ${model.counter}`
    const answer =
      this.action === 'get'
        ? await request(real, 'GET', path, { token: credential.token })
        : this.action === 'patch'
          ? await request(real, 'PATCH', path, { token: credential.token, body: { name: rename } })
          : await request(real, 'DELETE', path, { token: credential.token })
    const owner = ownerOf(model, credential)
    const what = `${this.action} agent`
    if (owner === null) return expectError(answer, 401, 'UNAUTHORIZED', `${what} with a dead credential`)
    // Another company's agent answers exactly as a missing one (CONTRACT §2).
    if (target.company !== owner.company || target.deleted) {
      return expectError(answer, 404, 'NOT_FOUND', `${what} of a foreign or deleted agent`)
    }
    if (this.action === 'delete') {
      expect(answer.status, JSON.stringify(answer.body)).toBe(204)
      target.deleted = true
      return
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    if (this.action === 'patch') target.name = rename
    expect({ id: answer.body.id, name: answer.body.name }).toEqual({ id: target.id, name: target.name })
  }
  toString = () => `TouchAgent(#${this.pick}, ${this.action} agent #${this.target})`
}

const user = fc.nat({ max: USERS - 1 })
const pick = fc.nat()
const commands = [
  fc.tuple(user, fc.boolean()).map(([u, upper]) => new Register(u, upper)),
  fc.tuple(user, fc.boolean(), fc.boolean()).map(([u, right, upper]) => new Login(u, right, upper)),
  fc.tuple(user, fc.boolean()).map(([u, upper]) => new Login(u, true, upper)),
  fc.tuple(pick, fc.boolean()).map(([p, garbage]) => new Refresh(p, garbage)),
  pick.map((p) => new Refresh(p, false, 'unused')),
  pick.map((p) => new Refresh(p, false, 'used')),
  pick.map((p) => new RefreshRace(p)),
  fc.tuple(user, fc.integer({ min: 1, max: 7 })).map(([u, count]) => new GuessBurst(u, count)),
  pick.map((p) => new Me(p)),
  pick.map((p) => new Logout(p)),
  pick.map((p) => new CreateApiToken(p)),
  pick.map((p) => new ListApiTokens(p)),
  fc.tuple(pick, pick).map(([p, t]) => new DeleteApiToken(p, t)),
  pick.map((p) => new CreateAgent(p)),
  pick.map((p) => new ListAgents(p)),
  fc
    .tuple(pick, pick, fc.constantFrom('get', 'patch', 'delete') as fc.Arbitrary<'get' | 'patch' | 'delete'>)
    .map(([p, t, action]) => new TouchAgent(p, t, action)),
]

describe('the reference server over HTTP, against a model of accounts, credentials and tenants', () => {
  let storage: IsolatedStorage | undefined
  let service: ReferenceServer
  let runs = 0

  beforeAll(async () => {
    storage = await isolatedStorage('accounts-model')
    const { environment } = storage
    service = await startReferenceServer(
      readConfig({ PORT: '0', LOG_LEVEL: 'silent', REFRESH_REUSE_INTERVAL_S: '0', ...environment }),
      { passwordHasher: createFakePasswordHasher() },
    )
  })

  afterAll(async () => {
    await service?.close()
    await storage?.remove()
  })

  it(`keeps every credential, rotation, revocation and tenant boundary the model expects (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: COMMANDS, size: 'max' }), async (sequence) => {
        runs += 1
        const model: Model = {
          users: Array.from({ length: USERS }, (_, index) => ({
            email: `u${index}-run${runs}-${randomBytes(3).toString('hex')}@accounts-model.test`,
            registered: false,
            id: undefined,
            companyId: undefined,
            failures: 0,
          })),
          logins: [],
          refreshTokens: [],
          credentials: GARBAGE.map((token) => ({ kind: 'garbage', token })),
          apiTokens: [],
          agents: [],
          counter: 0,
        }
        const real: Real = { url: service.url }
        // Two companies from the start, each logged in once, so that every run crosses tenants.
        const setup = [
          new Register(0, false),
          new Register(1, false),
          new Login(0, true, false),
          new Login(1, true, false),
        ]
        for (const command of setup) await command.run(model, real)
        await fc.asyncModelRun(() => ({ model, real }), sequence)
      }),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    )
  }, 600_000)
})
