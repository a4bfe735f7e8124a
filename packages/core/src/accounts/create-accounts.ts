import { createHash, randomBytes } from 'node:crypto'
import { err, ok, type Result } from 'neverthrow'
import {
  DEFAULT_PIPELINE_NAME,
  DEFAULT_PIPELINE_STAGES,
  FREE_CREDITS_USD,
} from '../billing/new-company-defaults.js'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { PasswordHasher, TokenSigner } from '../ports/accounts.js'
import type { Clock, IdGenerator } from '../ports/clock.js'
import type { Page, PageRequest, Repositories, Storage } from '../ports/storage.js'
import { createRandomIds, createSystemClock } from '../runtime/system-clock.js'
import { type AccountSettings, resolveAccountSettings } from './account-settings.js'
import type { Principal } from './principal.js'
import { API_TOKEN_PREFIX, hashSecret, newApiToken, newRefreshToken } from './secret-tokens.js'

export interface CreateAccountsOptions {
  storage: Storage
  hasher: PasswordHasher
  signer: TokenSigner
  clock?: Clock
  ids?: IdGenerator
  settings?: Partial<AccountSettings>
}

/** The `session` object of login and refresh, with the HTTP API's snake_case field names. */
export interface SessionTokens {
  access_token: string
  refresh_token: string
  /** When the access token expires, in Unix seconds. */
  expires_at: number
}

const nothing = (): void => undefined

export interface LoginResult {
  session: SessionTokens
  user: { id: string; email: string; companyId: number }
}

/**
 * Registration, login, sessions and company API tokens. Inputs arrive validated by the edge;
 * errors are codes, and the edge picks the HTTP status.
 */
export interface Accounts {
  register(input: { email: string; password: string; companyName: string }): Promise<
    Result<
      {
        user: { id: string; email: string }
        company: { id: number; companyId: string; companyName: string }
      },
      SwitchboardError
    >
  >
  login(input: { email: string; password: string }): Promise<Result<LoginResult, SwitchboardError>>
  refresh(input: { refreshToken: string }): Promise<Result<{ session: SessionTokens }, SwitchboardError>>
  /** From the raw Authorization header value; UNAUTHORIZED for missing/malformed/expired/revoked. */
  authenticate(authorization: string | undefined): Promise<Result<Principal, SwitchboardError>>
  me(principal: Principal): Promise<
    Result<
      {
        user: { id: string; email: string; companyId: number; isSuperadmin: boolean }
        company: { id: number; companyId: string; companyName: string; createdAt: string }
      },
      SwitchboardError
    >
  >
  /** Revokes the login's refresh tokens; FORBIDDEN for an API token. */
  logout(principal: Principal): Promise<Result<void, SwitchboardError>>
  /** The secret `token` is in this answer only; FORBIDDEN for an API token. */
  createApiToken(
    principal: Principal,
    input: { name: string },
  ): Promise<Result<{ id: string; name: string; token: string; createdAt: string }, SwitchboardError>>
  listApiTokens(
    principal: Principal,
    page: PageRequest,
  ): Promise<Page<{ id: string; name: string; createdAt: string }>>
  /** FORBIDDEN for an API token; NOT_FOUND for an unknown or another company's token. */
  deleteApiToken(principal: Principal, input: { id: string }): Promise<Result<void, SwitchboardError>>
}

const INVALID_CREDENTIALS_MESSAGE = 'invalid email or password'

/** `Bearer <token>`; the scheme is case-insensitive (RFC 9110). */
const BEARER = /^\s*bearer\s+(\S+)\s*$/i

interface TokenOwner {
  readonly userId: string
  readonly companyId: number
  readonly loginId: string
}

function unauthorized(message: string): SwitchboardError {
  return switchboardError('UNAUTHORIZED', message)
}

/**
 * Failed logins are counted per email under a hash of its lower-cased form: the same for every
 * spelling, and no list of addresses that strangers tried is kept in clear.
 */
function loginFailureKey(email: string): string {
  return createHash('sha256').update(email.toLowerCase(), 'utf8').digest('hex')
}

/**
 * Where the logins of an email whose password is being checked are kept, apart from its failures:
 * processes sharing the storage see each other's checks in flight, and only failures turn logins
 * away (CONTRACT §3).
 */
function inFlightKey(emailKey: string): string {
  return `${emailKey}:in-flight`
}

/**
 * How long a password check may be in flight. A login recorded as in flight longer ago is taken
 * by other processes for one whose process died mid-check: it holds up nothing any more. The
 * process running it knows it is alive and still counts it, however long it takes.
 */
const IN_FLIGHT_MS = 30_000

/**
 * A short random wait for checks in flight in another process to end. Real time, not the clock:
 * it only spaces out the looks, and a process cannot be told when another's check ends.
 */
function pauseForOtherProcesses(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20))
}

export function createAccounts(options: CreateAccountsOptions): Accounts {
  const { storage, hasher, signer } = options
  const clock = options.clock ?? createSystemClock()
  const ids = options.ids ?? createRandomIds()
  const settings = resolveAccountSettings(options.settings)
  const superadmins = new Set(settings.superadminEmails.map((email) => email.trim().toLowerCase()))

  let dummyHash: Promise<string> | undefined
  /**
   * A hash of a password nobody knows, verified for an unknown email so that it takes as long
   * as a wrong password for a known one. Made on first need: hashing is slow on purpose.
   */
  const dummyPasswordHash = (): Promise<string> => {
    dummyHash ??= hasher.hash(randomBytes(32).toString('base64url')).catch((error: unknown) => {
      dummyHash = undefined
      throw error
    })
    return dummyHash
  }

  const storeRefreshToken = async (repositories: Repositories, owner: TokenOwner, at: Date) => {
    const refreshToken = newRefreshToken()
    await repositories.refreshTokens.create({
      id: ids.uuid(),
      tokenHash: hashSecret(refreshToken),
      userId: owner.userId,
      companyId: owner.companyId,
      loginId: owner.loginId,
      expiresAt: new Date(at.getTime() + settings.refreshTokenTtlSeconds * 1000),
      at,
    })
    return refreshToken
  }

  const sessionTokens = async (owner: TokenOwner, refreshToken: string, at: Date): Promise<SessionTokens> => {
    const issuedAt = Math.floor(at.getTime() / 1000)
    const expiresAt = issuedAt + settings.accessTokenTtlSeconds
    const accessToken = await signer.sign({ ...owner, issuedAt, expiresAt })
    return { access_token: accessToken, refresh_token: refreshToken, expires_at: expiresAt }
  }

  /** A RATE_LIMITED error once the email has the allowed failures in the window, else null. */
  const throttle = async (emailKey: string, now: Date): Promise<SwitchboardError | null> => {
    const windowMs = settings.failedLoginWindowSeconds * 1000
    const since = new Date(now.getTime() - windowMs)
    const failures = await storage.loginFailures.count({ emailKey, since })
    if (failures < settings.maxFailedLogins) return null
    // Once the oldest failure in the window leaves it, an attempt is allowed again.
    const oldest = await storage.loginFailures.oldestSince({ emailKey, since })
    const freeAtMs = oldest === null ? now.getTime() : Date.parse(oldest) + windowMs
    const retryAfterSeconds = Math.max(1, Math.ceil((freeAtMs - now.getTime()) / 1000))
    return switchboardError('RATE_LIMITED', 'too many failed logins; try again later', { retryAfterSeconds })
  }

  /**
   * Failed logins in the window plus logins whose password is being checked, in any process. The
   * checks are read first: a check that fails in between is then counted twice, never missed.
   * This process's checks recorded too long ago for the storage to count are added: on an
   * overloaded server a check can wait that long for the hash, and each is still a guess.
   */
  const failuresAndChecks = async (
    emailKey: string,
    now: Date,
    checks: ReadonlyMap<Promise<unknown>, number>,
  ): Promise<number> => {
    const inFlightSince = now.getTime() - IN_FLIGHT_MS
    const recorded = await storage.loginFailures.count({
      emailKey: inFlightKey(emailKey),
      since: new Date(inFlightSince),
    })
    let overdue = 0
    for (const admittedAt of checks.values()) if (admittedAt <= inFlightSince) overdue += 1
    const windowStart = new Date(now.getTime() - settings.failedLoginWindowSeconds * 1000)
    return recorded + overdue + (await storage.loginFailures.count({ emailKey, since: windowStart }))
  }

  /**
   * The logins of each email under way in this process: they are admitted one at a time, in
   * arrival order, and `checks` holds the password checks of the admitted ones, settled whatever
   * their outcome, each with the clock time it was admitted and recorded in flight at.
   */
  const loginsUnderWay = new Map<
    string,
    { admitting: Promise<unknown>; readonly checks: Map<Promise<unknown>, number>; logins: number }
  >()

  /**
   * Admits the attempt to a password check, recorded as in flight, or turns it away once the
   * email has the allowed failures. Checks in flight take up the failures still allowed, as each
   * may turn out to be one: an attempt that finds them all taken, by checks in this process or in
   * another sharing the storage, waits for one to end and looks again. So only failures turn a
   * login away (CONTRACT §3), and a burst of guesses sent at once to several processes still gets
   * no more passwords checked than failures are allowed. The count is read again after recording:
   * processes recording at once would otherwise all pass.
   */
  const admit = async (
    emailKey: string,
    checks: ReadonlyMap<Promise<unknown>, number>,
  ): Promise<Result<Date, SwitchboardError>> => {
    const allowed = settings.maxFailedLogins
    for (;;) {
      const now = clock.now()
      const limited = await throttle(emailKey, now)
      if (limited !== null) return err(limited)
      if ((await failuresAndChecks(emailKey, now, checks)) < allowed) {
        await storage.loginFailures.record({ emailKey: inFlightKey(emailKey), at: now })
        if ((await failuresAndChecks(emailKey, now, checks)) <= allowed) return ok(now)
        // Overtaken by attempts recorded at the same time in other processes: step back and wait.
        await storage.loginFailures.forget({ emailKey: inFlightKey(emailKey), at: now })
      }
      if (checks.size > 0) await Promise.race(checks.keys())
      else await pauseForOtherProcesses()
    }
  }

  /** When this process last had the failures that left the window deleted, in clock milliseconds. */
  let lastForgotten = Number.NEGATIVE_INFINITY

  /**
   * At most once a window, has the failures of every email that left it deleted: they count for
   * nothing, and kept, every email ever guessed at would hold its rows for good. Housekeeping off
   * the login's path: a failure here is tried again a window later.
   */
  const forgetExpiredFailures = (now: Date): void => {
    const windowMs = settings.failedLoginWindowSeconds * 1000
    if (now.getTime() - lastForgotten < windowMs) return
    lastForgotten = now.getTime()
    storage.loginFailures.forgetBefore({ before: new Date(now.getTime() - windowMs) }).catch(nothing)
  }

  /**
   * The second half of a login, once admitted: its check is taken off the ones in flight, and a
   * failure recorded in its place.
   */
  const checkPassword = async (
    email: string,
    password: string,
    emailKey: string,
    now: Date,
  ): Promise<Result<LoginResult, SwitchboardError>> => {
    let matches: boolean
    let user: Awaited<ReturnType<typeof storage.users.findByEmail>>
    try {
      user = await storage.users.findByEmail({ email })
      matches =
        user === null
          ? await hasher.verify({ hash: await dummyPasswordHash(), password }).then(() => false)
          : await hasher.verify({ hash: user.passwordHash, password })
    } catch (error) {
      // Neither a failure nor a success: the check is no longer in flight, and counts for nothing.
      await storage.loginFailures.forget({ emailKey: inFlightKey(emailKey), at: now }).catch(nothing)
      throw error
    }
    if (user === null || !matches) {
      // Together, so that no process sees the failure neither in flight nor recorded, and admits
      // one guess too many.
      await storage.transaction(async (tx) => {
        await tx.loginFailures.record({ emailKey, at: now })
        await tx.loginFailures.forget({ emailKey: inFlightKey(emailKey), at: now })
      })
      return err(switchboardError('INVALID_CREDENTIALS', INVALID_CREDENTIALS_MESSAGE))
    }
    // The failures before it still count until they leave the window (CONTRACT §3).
    await storage.loginFailures.forget({ emailKey: inFlightKey(emailKey), at: now })

    const owner: TokenOwner = { userId: user.id, companyId: user.companyId, loginId: ids.uuid() }
    const refreshToken = await storeRefreshToken(storage, owner, now)
    return ok({
      session: await sessionTokens(owner, refreshToken, now),
      user: { id: user.id, email: user.email, companyId: user.companyId },
    })
  }

  return {
    async register({ email, password, companyName }) {
      const failed = () => err(switchboardError('USER_CREATION_FAILED', 'could not create the user'))
      if ((await storage.users.findByEmail({ email })) !== null) return failed()
      const passwordHash = await hasher.hash(password)
      const at = clock.now()
      try {
        const { user, company } = await storage.transaction(async (tx) => {
          const company = await tx.companies.create({ companyName, publicId: ids.uuid(), at })
          const user = await tx.users.create({
            id: ids.uuid(),
            email,
            companyId: company.id,
            passwordHash,
            at,
          })
          await tx.billing.adjust({ companyId: company.id, amountUsd: FREE_CREDITS_USD, at })
          await tx.pipelines.create({
            companyId: company.id,
            name: DEFAULT_PIPELINE_NAME,
            isDefault: true,
            stages: DEFAULT_PIPELINE_STAGES,
            at,
          })
          return { user, company }
        })
        return ok({
          user: { id: user.id, email: user.email },
          company: { id: company.id, companyId: company.companyId, companyName: company.companyName },
        })
      } catch (error) {
        // A registration of the same email committed in between, and the unique index refused ours.
        if ((await storage.users.findByEmail({ email })) !== null) return failed()
        throw error
      }
    },

    async login({ email, password }) {
      forgetExpiredFailures(clock.now())
      const emailKey = loginFailureKey(email)
      let underWay = loginsUnderWay.get(emailKey)
      if (underWay === undefined) {
        underWay = { admitting: Promise.resolve(), checks: new Map(), logins: 0 }
        loginsUnderWay.set(emailKey, underWay)
      }
      const { checks } = underWay
      underWay.logins += 1
      try {
        const admission = underWay.admitting.then(() => admit(emailKey, checks))
        underWay.admitting = admission.then(nothing, nothing)
        const admitted = await admission
        if (admitted.isErr()) return err(admitted.error)
        const check = checkPassword(email, password, emailKey, admitted.value)
        const settled = check.then(nothing, nothing)
        checks.set(settled, admitted.value.getTime())
        try {
          return await check
        } finally {
          checks.delete(settled)
        }
      } finally {
        underWay.logins -= 1
        if (underWay.logins === 0) loginsUnderWay.delete(emailKey)
      }
    },

    async refresh({ refreshToken }) {
      const failed = () => err(switchboardError('REFRESH_FAILED', 'refresh token invalid or expired'))
      if (typeof refreshToken !== 'string' || refreshToken === '') return failed()
      const now = clock.now()
      const stored = await storage.refreshTokens.findByHash({ tokenHash: hashSecret(refreshToken) })
      if (stored === null || stored.revokedAt !== undefined) return failed()
      if (stored.usedAt !== undefined) {
        // Soon after its first use it is the same client racing itself; later, a copy was stolen.
        const sinceFirstUseMs = now.getTime() - Date.parse(stored.usedAt)
        if (sinceFirstUseMs > settings.refreshReuseIntervalSeconds * 1000) {
          await storage.refreshTokens.revokeLogin({ loginId: stored.loginId, at: now })
        }
        return failed()
      }
      if (Date.parse(stored.expiresAt) <= now.getTime()) return failed()

      const owner: TokenOwner = {
        userId: stored.userId,
        companyId: stored.companyId,
        loginId: stored.loginId,
      }
      // Using the old token and storing its successor commit together: a failure in between must
      // not leave the client with neither.
      const next = await storage.transaction(async (tx) => {
        if (!(await tx.refreshTokens.markUsed({ id: stored.id, at: now }))) return null
        return storeRefreshToken(tx, owner, now)
      })
      if (next === null) return failed()
      return ok({ session: await sessionTokens(owner, next, now) })
    },

    async authenticate(authorization) {
      const token = typeof authorization === 'string' ? BEARER.exec(authorization)?.[1] : undefined
      if (token === undefined) return err(unauthorized('missing or malformed bearer token'))

      if (token.startsWith(API_TOKEN_PREFIX)) {
        const apiToken = await storage.apiTokens.findByHash({ tokenHash: hashSecret(token) })
        if (apiToken === null) return err(unauthorized('invalid or revoked API token'))
        return ok({
          kind: 'api-token',
          userId: apiToken.userId,
          companyId: apiToken.companyId,
          apiTokenId: apiToken.id,
        })
      }

      // Access tokens are not revocable, so a valid signature is all it takes: no storage read.
      const claims = await signer.verify(token, { now: clock.now() })
      if (claims === null) return err(unauthorized('invalid or expired access token'))
      return ok({
        kind: 'session',
        userId: claims.userId,
        companyId: claims.companyId,
        loginId: claims.loginId,
      })
    },

    async me(principal) {
      const user = await storage.users.get({ id: principal.userId })
      const company = await storage.companies.get({ id: principal.companyId })
      if (user === null || company === null || user.companyId !== company.id) {
        return err(unauthorized('the account of this credential no longer exists'))
      }
      return ok({
        user: {
          id: user.id,
          email: user.email,
          companyId: user.companyId,
          isSuperadmin: superadmins.has(user.email.toLowerCase()),
        },
        company: {
          id: company.id,
          companyId: company.companyId,
          companyName: company.companyName,
          createdAt: company.createdAt,
        },
      })
    },

    async logout(principal) {
      if (principal.kind !== 'session')
        return err(switchboardError('FORBIDDEN', 'an API token cannot log out'))
      if (principal.loginId === null) {
        await storage.refreshTokens.revokeUser({ userId: principal.userId, at: clock.now() })
      } else {
        await storage.refreshTokens.revokeLogin({ loginId: principal.loginId, at: clock.now() })
      }
      return ok(undefined)
    },

    async createApiToken(principal, { name }) {
      if (principal.kind !== 'session') {
        return err(switchboardError('FORBIDDEN', 'only a session may create API tokens'))
      }
      // The session's claims are trusted as signed, but a token outlives nothing it names: it is
      // made only for a user who exists in the company the session names.
      const user = await storage.users.get({ id: principal.userId })
      if (user === null || user.companyId !== principal.companyId) {
        return err(unauthorized('the account of this credential no longer exists'))
      }
      const token = newApiToken()
      const created = await storage.apiTokens.create({
        id: ids.uuid(),
        companyId: principal.companyId,
        userId: principal.userId,
        name,
        tokenHash: hashSecret(token),
        at: clock.now(),
      })
      return ok({ id: created.id, name: created.name, token, createdAt: created.createdAt })
    },

    async listApiTokens(principal, page) {
      const listed = await storage.apiTokens.list({
        companyId: principal.companyId,
        limit: page.limit,
        cursor: page.cursor,
      })
      return {
        items: listed.items.map((token) => ({ id: token.id, name: token.name, createdAt: token.createdAt })),
        nextCursor: listed.nextCursor,
      }
    },

    async deleteApiToken(principal, { id }) {
      if (principal.kind !== 'session') {
        return err(switchboardError('FORBIDDEN', 'only a session may delete API tokens'))
      }
      const deleted = await storage.apiTokens.delete({ companyId: principal.companyId, id })
      return deleted ? ok(undefined) : err(switchboardError('NOT_FOUND', 'API token not found'))
    },
  }
}
