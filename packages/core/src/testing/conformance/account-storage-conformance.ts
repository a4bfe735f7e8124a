import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { WEBHOOK_DELIVERIES_KEPT_MS, WEBHOOK_LOGS_KEPT_PER_INTEGRATION } from '../../domain/webhook-log.js'
import {
  type Company,
  type NewUsageRecord,
  type NewWebhookLog,
  type Page,
  type RefreshToken,
  type Repositories,
  SessionClosedError,
  type Storage,
  type User,
} from '../../ports/storage.js'
import {
  at,
  type Channel,
  cleanUp,
  createAgent,
  createIntegration,
  createSession,
  expectedError,
  newMessageInput,
  type StorageConformanceOptions,
  tryToMutate,
} from './storage-fixtures.js'

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/** Random, so that runs against a shared database never meet an earlier run's users. */
function uniqueEmail(): string {
  return `user-${randomUUID()}@example.com`
}

/** A random 64-hex-digit string, shaped like the SHA-256 hashes the accounts service stores. */
function uniqueHash(): string {
  return (randomUUID() + randomUUID()).replaceAll('-', '')
}

function createCompany(repositories: Repositories): Promise<Company> {
  return repositories.companies.create({
    companyName: `Company ${randomUUID().slice(0, 8)}`,
    publicId: randomUUID(),
    at: at(),
  })
}

function createUser(
  repositories: Repositories,
  company: Company,
  overrides: { email?: string; id?: string } = {},
): Promise<User> {
  return repositories.users.create({
    id: overrides.id ?? randomUUID(),
    email: overrides.email ?? uniqueEmail(),
    companyId: company.id,
    passwordHash: `hash-${randomUUID()}`,
    at: at(),
  })
}

function createRefreshToken(
  repositories: Repositories,
  user: User,
  overrides: { loginId?: string; tokenHash?: string; expiresAt?: Date } = {},
): Promise<RefreshToken> {
  return repositories.refreshTokens.create({
    id: randomUUID(),
    tokenHash: overrides.tokenHash ?? uniqueHash(),
    userId: user.id,
    companyId: user.companyId,
    loginId: overrides.loginId ?? randomUUID(),
    expiresAt: overrides.expiresAt ?? at(30 * DAY),
    at: at(),
  })
}

function newUsage(companyId: number, overrides: Partial<NewUsageRecord> = {}): NewUsageRecord {
  return {
    id: randomUUID(),
    companyId,
    sessionId: randomUUID(),
    model: 'gpt-4o-mini',
    inputTokens: 1200,
    outputTokens: 80,
    costUsd: 0.25,
    at: at(),
    ...overrides,
  }
}

function newWebhookLog(channel: Channel, overrides: Partial<NewWebhookLog> = {}): NewWebhookLog {
  return {
    id: randomUUID(),
    companyId: channel.companyId,
    integrationId: channel.integration.id,
    receivedAt: at(),
    httpStatus: 200,
    outcome: 'queued',
    ...overrides,
  }
}

async function createCompanyChannel(repositories: Repositories, company: Company): Promise<Channel> {
  const agent = await createAgent(repositories, company.id)
  const integration = await createIntegration(repositories, company.id, agent.id)
  return { companyId: company.id, agent, integration }
}

function idsOf(items: readonly { id: string | number }[]): Array<string | number> {
  return items.map((item) => item.id)
}

/**
 * The storage contract of accounts, API tokens, credits, pipelines, login throttling, webhook logs
 * and webhook deliveries. Part of `runStorageConformance`. Every test makes its own companies and
 * random emails, so a shared database works.
 */
export function runAccountStorageConformance(
  name: string,
  createStorage: () => Promise<Storage> | Storage,
  options?: StorageConformanceOptions,
): void {
  describe(`${name}: account storage conformance`, () => {
    let storage: Storage
    let company: Company
    let otherCompany: Company

    beforeEach(async () => {
      storage = await createStorage()
      company = await createCompany(storage)
      otherCompany = await createCompany(storage)
    })

    afterEach(async () => {
      await cleanUp(storage, options)
    })

    describe('companies', () => {
      it('numbers companies with increasing integers and keeps the public id and name', async () => {
        const publicId = randomUUID()
        const created = await storage.companies.create({ companyName: 'Acme', publicId, at: at(HOUR) })

        expect(Number.isInteger(created.id)).toBe(true)
        expect(company.id).toBeGreaterThan(0)
        expect(otherCompany.id).toBeGreaterThan(company.id)
        expect(created.id).toBeGreaterThan(otherCompany.id)
        expect(created).toEqual({
          id: created.id,
          companyId: publicId,
          companyName: 'Acme',
          createdAt: at(HOUR).toISOString(),
        })
        expect(await storage.companies.get({ id: created.id })).toEqual(created)
      })

      it('answers null for an unknown company', async () => {
        expect(await storage.companies.get({ id: otherCompany.id + 1_000_000 })).toBeNull()
      })
    })

    describe('users', () => {
      it('creates a user, keeps the email as given and finds it in any case', async () => {
        const id = randomUUID()
        const email = `Mixed.Case-${randomUUID()}@Example.COM`
        const user = await storage.users.create({
          id,
          email,
          companyId: company.id,
          passwordHash: 'hash-1',
          at: at(HOUR),
        })

        expect(user).toEqual({
          id,
          email,
          companyId: company.id,
          passwordHash: 'hash-1',
          createdAt: at(HOUR).toISOString(),
        })
        expect(await storage.users.get({ id })).toEqual(user)
        expect(await storage.users.findByEmail({ email })).toEqual(user)
        expect(await storage.users.findByEmail({ email: email.toLowerCase() })).toEqual(user)
        expect(await storage.users.findByEmail({ email: email.toUpperCase() })).toEqual(user)
      })

      it('answers null for an unknown email or id', async () => {
        await createUser(storage, company)

        expect(await storage.users.findByEmail({ email: uniqueEmail() })).toBeNull()
        expect(await storage.users.get({ id: randomUUID() })).toBeNull()
      })

      it('refuses a second user with the same email in another case, even in another company', async () => {
        const email = uniqueEmail()
        const user = await createUser(storage, company, { email })
        const secondId = randomUUID()

        await expect(
          createUser(storage, otherCompany, { email: email.toUpperCase(), id: secondId }),
        ).rejects.toThrow()
        expect(await storage.users.get({ id: secondId })).toBeNull()
        expect(await storage.users.findByEmail({ email })).toEqual(user)
      })

      it('lets exactly one of 20 concurrent registrations of one email through', async () => {
        const email = uniqueEmail()
        const outcomes = await Promise.allSettled(
          Array.from({ length: 20 }, (_, index) =>
            createUser(storage, company, { email: index % 2 === 0 ? email : email.toUpperCase() }),
          ),
        )

        const created = outcomes.filter((outcome) => outcome.status === 'fulfilled')
        expect(created).toHaveLength(1)
        expect(await storage.users.findByEmail({ email })).toEqual(
          (created[0] as PromiseFulfilledResult<User>).value,
        )
      })
    })

    describe('refresh tokens', () => {
      let user: User

      beforeEach(async () => {
        user = await createUser(storage, company)
      })

      it('creates a token and finds it by its hash, neither used nor revoked', async () => {
        const tokenHash = uniqueHash()
        const loginId = randomUUID()
        const token = await createRefreshToken(storage, user, { tokenHash, loginId, expiresAt: at(DAY) })

        expect(token).toEqual({
          id: token.id,
          tokenHash,
          userId: user.id,
          companyId: company.id,
          loginId,
          expiresAt: at(DAY).toISOString(),
          createdAt: at().toISOString(),
        })
        expect(await storage.refreshTokens.findByHash({ tokenHash })).toEqual(token)
        expect(await storage.refreshTokens.findByHash({ tokenHash: uniqueHash() })).toBeNull()
      })

      // A long refresh lifetime ends past the year 9999, whose ISO text has six digits and a sign.
      it('keeps an expiry past the year 9999', async () => {
        const expiresAt = new Date('+012000-06-01T10:20:30.456Z')
        const token = await createRefreshToken(storage, user, { expiresAt })

        expect(token.expiresAt).toBe('+012000-06-01T10:20:30.456Z')
        expect(await storage.refreshTokens.findByHash({ tokenHash: token.tokenHash })).toEqual(token)
      })

      it('refuses a second token with the same hash', async () => {
        const tokenHash = uniqueHash()
        const token = await createRefreshToken(storage, user, { tokenHash })

        await expect(createRefreshToken(storage, user, { tokenHash })).rejects.toThrow()
        expect(await storage.refreshTokens.findByHash({ tokenHash })).toEqual(token)
      })

      it('marks a token used once: true the first time, false after', async () => {
        const token = await createRefreshToken(storage, user)

        expect(await storage.refreshTokens.markUsed({ id: token.id, at: at(MINUTE) })).toBe(true)
        expect(await storage.refreshTokens.markUsed({ id: token.id, at: at(2 * MINUTE) })).toBe(false)
        expect(await storage.refreshTokens.findByHash({ tokenHash: token.tokenHash })).toEqual({
          ...token,
          usedAt: at(MINUTE).toISOString(),
        })
        expect(await storage.refreshTokens.markUsed({ id: randomUUID(), at: at(MINUTE) })).toBe(false)
      })

      it('refuses to mark used a token of a login that has a revoked token', async () => {
        const loginId = randomUUID()
        await createRefreshToken(storage, user, { loginId })
        await storage.refreshTokens.revokeLogin({ loginId, at: at(MINUTE) })
        // A successor committed by a refresh that the revocation raced, and so did not see.
        const successor = await createRefreshToken(storage, user, { loginId })

        expect(await storage.refreshTokens.markUsed({ id: successor.id, at: at(2 * MINUTE) })).toBe(false)
        const other = await createRefreshToken(storage, user)
        expect(await storage.refreshTokens.markUsed({ id: other.id, at: at(2 * MINUTE) })).toBe(true)
      })

      it('gives exactly one of 20 concurrent markUsed calls true', async () => {
        const token = await createRefreshToken(storage, user)

        const outcomes = await Promise.all(
          Array.from({ length: 20 }, (_, index) =>
            storage.refreshTokens.markUsed({ id: token.id, at: at(index) }),
          ),
        )

        expect(outcomes.filter(Boolean)).toHaveLength(1)
        const stored = await storage.refreshTokens.findByHash({ tokenHash: token.tokenHash })
        expect(stored?.usedAt).toBe(at(outcomes.indexOf(true)).toISOString())
      })

      it('gives exactly one of 20 concurrent refresh transactions a successor token', async () => {
        const token = await createRefreshToken(storage, user)
        const successors = Array.from({ length: 20 }, () => uniqueHash())

        const outcomes = await Promise.all(
          successors.map((tokenHash) =>
            storage.transaction(async (tx) => {
              if (!(await tx.refreshTokens.markUsed({ id: token.id, at: at(MINUTE) }))) return false
              await createRefreshToken(tx, user, { loginId: token.loginId, tokenHash })
              return true
            }),
          ),
        )

        expect(outcomes.filter(Boolean)).toHaveLength(1)
        const stored = await Promise.all(
          successors.map((tokenHash) => storage.refreshTokens.findByHash({ tokenHash })),
        )
        expect(stored.filter((successor) => successor !== null)).toHaveLength(1)
        expect(stored[outcomes.indexOf(true)]).toMatchObject({ loginId: token.loginId })
      })

      it('revokes every token of a login and no other, keeping their use', async () => {
        const loginId = randomUUID()
        const used = await createRefreshToken(storage, user, { loginId })
        await storage.refreshTokens.markUsed({ id: used.id, at: at(MINUTE) })
        const current = await createRefreshToken(storage, user, { loginId })
        const otherLogin = await createRefreshToken(storage, user)

        await storage.refreshTokens.revokeLogin({ loginId, at: at(HOUR) })

        expect(await storage.refreshTokens.findByHash({ tokenHash: used.tokenHash })).toEqual({
          ...used,
          usedAt: at(MINUTE).toISOString(),
          revokedAt: at(HOUR).toISOString(),
        })
        expect(await storage.refreshTokens.findByHash({ tokenHash: current.tokenHash })).toEqual({
          ...current,
          revokedAt: at(HOUR).toISOString(),
        })
        expect(await storage.refreshTokens.findByHash({ tokenHash: otherLogin.tokenHash })).toEqual(
          otherLogin,
        )
        expect(await storage.refreshTokens.markUsed({ id: current.id, at: at(2 * HOUR) })).toBe(false)

        await storage.refreshTokens.revokeLogin({ loginId, at: at(2 * HOUR) })
        expect((await storage.refreshTokens.findByHash({ tokenHash: current.tokenHash }))?.revokedAt).toBe(
          at(HOUR).toISOString(),
        )
        await storage.refreshTokens.revokeLogin({ loginId: randomUUID(), at: at(HOUR) })
      })
    })

    it("revokes every token of a user, of all their logins, and no other user's", async () => {
      const user = await createUser(storage, company)
      const other = await createUser(storage, company)
      const first = await createRefreshToken(storage, user)
      const second = await createRefreshToken(storage, user)
      const earlier = await createRefreshToken(storage, user)
      await storage.refreshTokens.revokeLogin({ loginId: earlier.loginId, at: at(MINUTE) })
      const othersToken = await createRefreshToken(storage, other)

      await storage.refreshTokens.revokeUser({ userId: user.id, at: at(HOUR) })

      for (const token of [first, second]) {
        expect((await storage.refreshTokens.findByHash({ tokenHash: token.tokenHash }))?.revokedAt).toBe(
          at(HOUR).toISOString(),
        )
      }
      expect((await storage.refreshTokens.findByHash({ tokenHash: earlier.tokenHash }))?.revokedAt).toBe(
        at(MINUTE).toISOString(),
      )
      expect(await storage.refreshTokens.findByHash({ tokenHash: othersToken.tokenHash })).toEqual(
        othersToken,
      )
      await storage.refreshTokens.revokeUser({ userId: randomUUID(), at: at(HOUR) })
    })

    // PostgreSQL's uuid reads a UUID in any case; a user named in capitals (the `sub` of an access
    // token minted elsewhere) was unknown to the memory storage, and its logout revoked nothing.
    it('finds a user named by its id in capitals, and revokes the tokens of a user so named', async () => {
      const user = await createUser(storage, company)
      const token = await createRefreshToken(storage, user)

      expect(await storage.users.get({ id: user.id.toUpperCase() })).toEqual(user)
      await storage.refreshTokens.revokeUser({ userId: user.id.toUpperCase(), at: at(HOUR) })

      expect((await storage.refreshTokens.findByHash({ tokenHash: token.tokenHash }))?.revokedAt).toBe(
        at(HOUR).toISOString(),
      )
    })

    // Ids come from an IdGenerator, "a new random UUID": one in capitals is the same UUID, as a uuid
    // column holds it, so it is stored as its lower-case form and found, and refused again, in any case.
    it('keeps a user, a refresh token and an API token created with a UUID in capitals as that UUID', async () => {
      const userId = randomUUID()
      const user = await createUser(storage, company, { id: userId.toUpperCase() })
      expect(user.id).toBe(userId)
      expect(await storage.users.get({ id: userId })).toEqual(user)
      await expect(createUser(storage, company, { id: userId })).rejects.toThrow()

      const refreshId = randomUUID()
      const refreshToken = await storage.refreshTokens.create({
        id: refreshId.toUpperCase(),
        tokenHash: uniqueHash(),
        userId: userId.toUpperCase(),
        companyId: company.id,
        loginId: randomUUID(),
        expiresAt: at(DAY),
        at: at(),
      })
      expect(refreshToken).toMatchObject({ id: refreshId, userId })
      expect(await storage.refreshTokens.markUsed({ id: refreshId, at: at(MINUTE) })).toBe(true)

      const apiTokenId = randomUUID()
      const apiToken = await storage.apiTokens.create({
        id: apiTokenId.toUpperCase(),
        companyId: company.id,
        userId: userId.toUpperCase(),
        name: 'CI',
        tokenHash: uniqueHash(),
        at: at(),
      })
      expect(apiToken).toMatchObject({ id: apiTokenId, userId })
      await expect(
        storage.apiTokens.create({
          id: apiTokenId,
          companyId: company.id,
          userId,
          name: 'CI',
          tokenHash: uniqueHash(),
          at: at(),
        }),
      ).rejects.toThrow()
      expect(await storage.apiTokens.delete({ companyId: company.id, id: apiTokenId })).toBe(true)
    })

    describe('API tokens', () => {
      let user: User

      beforeEach(async () => {
        user = await createUser(storage, company)
      })

      const createApiToken = (
        repositories: Repositories,
        owner: User,
        overrides: { tokenHash?: string; name?: string; at?: Date } = {},
      ) =>
        repositories.apiTokens.create({
          id: randomUUID(),
          companyId: owner.companyId,
          userId: owner.id,
          name: overrides.name ?? 'CI',
          tokenHash: overrides.tokenHash ?? uniqueHash(),
          at: overrides.at ?? at(),
        })

      it('creates a token, never handing its hash back, and finds it by hash', async () => {
        const tokenHash = uniqueHash()
        const token = await createApiToken(storage, user, { tokenHash, name: 'Zapier' })

        expect(token).toEqual({
          id: token.id,
          companyId: company.id,
          userId: user.id,
          name: 'Zapier',
          createdAt: at().toISOString(),
        })
        expect(await storage.apiTokens.findByHash({ tokenHash })).toEqual(token)
        expect(await storage.apiTokens.findByHash({ tokenHash: uniqueHash() })).toBeNull()
      })

      it('refuses a second token with the same hash', async () => {
        const tokenHash = uniqueHash()
        await createApiToken(storage, user, { tokenHash })

        await expect(createApiToken(storage, user, { tokenHash })).rejects.toThrow()
        expect((await storage.apiTokens.list({ companyId: company.id, limit: 10 })).items).toHaveLength(1)
      })

      it("lists the company's tokens oldest first, page by page, without hashes", async () => {
        const created = []
        for (let index = 0; index < 5; index++) {
          created.push(
            await createApiToken(storage, user, { name: `token ${index}`, at: at(index * MINUTE) }),
          )
        }
        const foreignUser = await createUser(storage, otherCompany)
        await createApiToken(storage, foreignUser)

        const first = await storage.apiTokens.list({ companyId: company.id, limit: 2 })
        expect(first.items).toEqual(created.slice(0, 2))
        expect(first.nextCursor).toEqual(expect.any(String))
        const second = await storage.apiTokens.list({
          companyId: company.id,
          limit: 2,
          cursor: first.nextCursor!,
        })
        expect(second.items).toEqual(created.slice(2, 4))
        const third = await storage.apiTokens.list({
          companyId: company.id,
          limit: 2,
          cursor: second.nextCursor!,
        })
        expect(third.items).toEqual(created.slice(4))
        expect(third.nextCursor).toBeNull()
        expect((await storage.apiTokens.list({ companyId: company.id, limit: 5 })).nextCursor).toBeNull()
        for (const token of first.items)
          expect(Object.keys(token).sort()).toEqual(Object.keys(created[0]!).sort())
      })

      it('pages through tokens created at the same instant without losing or repeating one', async () => {
        const created = []
        for (let index = 0; index < 5; index++) created.push(await createApiToken(storage, user))

        const seen: Array<string | number> = []
        let cursor: string | undefined
        for (let pages = 0; pages < 5; pages++) {
          const page = await storage.apiTokens.list({ companyId: company.id, limit: 2, cursor })
          seen.push(...idsOf(page.items))
          if (page.nextCursor === null) break
          cursor = page.nextCursor
        }
        expect(seen).toHaveLength(5)
        expect(new Set(seen)).toEqual(new Set(idsOf(created)))
      })

      it('deletes a token of the company only; a deleted token is neither found nor listed', async () => {
        const tokenHash = uniqueHash()
        const token = await createApiToken(storage, user, { tokenHash })
        const kept = await createApiToken(storage, user)

        expect(await storage.apiTokens.delete({ companyId: otherCompany.id, id: token.id })).toBe(false)
        expect(await storage.apiTokens.findByHash({ tokenHash })).toEqual(token)
        expect(await storage.apiTokens.delete({ companyId: company.id, id: token.id })).toBe(true)
        expect(await storage.apiTokens.findByHash({ tokenHash })).toBeNull()
        expect((await storage.apiTokens.list({ companyId: company.id, limit: 10 })).items).toEqual([kept])
        expect(await storage.apiTokens.delete({ companyId: company.id, id: token.id })).toBe(false)
        expect(await storage.apiTokens.delete({ companyId: company.id, id: randomUUID() })).toBe(false)
        expect(await storage.apiTokens.delete({ companyId: company.id, id: 'not-a-uuid' })).toBe(false)
      })

      it('deletes a token named by its id in capitals: the same UUID', async () => {
        const tokenHash = uniqueHash()
        const token = await createApiToken(storage, user, { tokenHash })

        expect(await storage.apiTokens.delete({ companyId: company.id, id: token.id.toUpperCase() })).toBe(
          true,
        )
        expect(await storage.apiTokens.findByHash({ tokenHash })).toBeNull()
      })
    })

    describe('billing', () => {
      it('has a balance of 0 before any credit', async () => {
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(0)
      })

      it('credits and charges exactly to 9 decimal places, below 0 too', async () => {
        await storage.billing.adjust({ companyId: company.id, amountUsd: 5, at: at() })
        await storage.billing.adjust({ companyId: company.id, amountUsd: -0.1, at: at() })
        await storage.billing.adjust({ companyId: company.id, amountUsd: -0.2, at: at() })
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(4.7)

        await storage.billing.adjust({ companyId: company.id, amountUsd: -4.700000001, at: at() })
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(-0.000000001)
        expect(await storage.billing.getBalance({ companyId: otherCompany.id })).toBe(0)
      })

      it('records usage and charges its cost in the same call', async () => {
        await storage.billing.adjust({ companyId: company.id, amountUsd: 5, at: at() })
        const usage = newUsage(company.id, { costUsd: 0.000123456, at: at(MINUTE) })

        const record = await storage.billing.recordUsage(usage)

        expect(record).toEqual({
          id: usage.id,
          at: at(MINUTE).toISOString(),
          model: usage.model,
          inputTokens: usage.inputTokens,
          outputTokens: usage.outputTokens,
          costUsd: 0.000123456,
          sessionId: usage.sessionId,
        })
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(4.999876544)
        expect((await storage.billing.listUsage({ companyId: company.id, limit: 10 })).items).toEqual([
          record,
        ])
      })

      it('refuses a usage record with a repeated id and charges nothing for it', async () => {
        const usage = newUsage(company.id)
        await storage.billing.recordUsage(usage)

        await expect(storage.billing.recordUsage({ ...usage, costUsd: 1 })).rejects.toThrow()
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(-0.25)
      })

      it('lists usage newest first, page by page, within the company', async () => {
        const records = []
        for (let index = 0; index < 5; index++) {
          records.push(await storage.billing.recordUsage(newUsage(company.id, { at: at(index * MINUTE) })))
        }
        await storage.billing.recordUsage(newUsage(otherCompany.id))
        const newestFirst = [...records].reverse()

        const first = await storage.billing.listUsage({ companyId: company.id, limit: 2 })
        expect(first.items).toEqual(newestFirst.slice(0, 2))
        const second = await storage.billing.listUsage({
          companyId: company.id,
          limit: 2,
          cursor: first.nextCursor!,
        })
        expect(second.items).toEqual(newestFirst.slice(2, 4))
        const third = await storage.billing.listUsage({
          companyId: company.id,
          limit: 2,
          cursor: second.nextCursor!,
        })
        expect(third.items).toEqual(newestFirst.slice(4))
        expect(third.nextCursor).toBeNull()
      })

      it('lists usage of the same instant latest recorded first', async () => {
        const records = []
        for (let index = 0; index < 3; index++)
          records.push(await storage.billing.recordUsage(newUsage(company.id)))

        const page = await storage.billing.listUsage({ companyId: company.id, limit: 10 })
        expect(idsOf(page.items)).toEqual(idsOf([...records].reverse()))
      })

      it('loses no charge among 20 concurrent usage records', async () => {
        await storage.billing.adjust({ companyId: company.id, amountUsd: 5, at: at() })

        await Promise.all(
          Array.from({ length: 20 }, () =>
            storage.billing.recordUsage(newUsage(company.id, { costUsd: 0.01 })),
          ),
        )

        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(4.8)
        expect((await storage.billing.listUsage({ companyId: company.id, limit: 100 })).items).toHaveLength(
          20,
        )
      })
    })

    describe('pipelines', () => {
      it('creates a pipeline with its stages in order and lists it within the company', async () => {
        const pipeline = await storage.pipelines.create({
          companyId: company.id,
          name: 'Sales',
          isDefault: true,
          stages: ['New', 'Won', 'Lost'],
          at: at(),
        })

        expect(pipeline).toEqual({
          id: expect.any(String),
          name: 'Sales',
          isDefault: true,
          stages: [
            { id: expect.any(String), name: 'New', position: 0 },
            { id: expect.any(String), name: 'Won', position: 1 },
            { id: expect.any(String), name: 'Lost', position: 2 },
          ],
        })
        expect(new Set(pipeline.stages.map((stage) => stage.id)).size).toBe(3)
        expect(await storage.pipelines.list({ companyId: company.id })).toEqual([pipeline])
        expect(await storage.pipelines.list({ companyId: otherCompany.id })).toEqual([])
      })

      it('lists pipelines in creation order', async () => {
        const first = await storage.pipelines.create({
          companyId: company.id,
          name: 'Sales',
          isDefault: true,
          stages: ['New'],
          at: at(),
        })
        const second = await storage.pipelines.create({
          companyId: company.id,
          name: 'Hiring',
          isDefault: false,
          stages: [],
          at: at(MINUTE),
        })

        expect(await storage.pipelines.list({ companyId: company.id })).toEqual([first, second])
        expect(second.id).not.toBe(first.id)
      })
    })

    describe('login failures', () => {
      it('counts failures recorded strictly after a time, per key, until forgotten one by one', async () => {
        const key = uniqueHash()
        const otherKey = uniqueHash()
        await storage.loginFailures.record({ emailKey: key, at: at(MINUTE) })
        await storage.loginFailures.record({ emailKey: key, at: at(2 * MINUTE) })
        await storage.loginFailures.record({ emailKey: key, at: at(3 * MINUTE) })
        await storage.loginFailures.record({ emailKey: otherKey, at: at(2 * MINUTE) })

        expect(await storage.loginFailures.count({ emailKey: key, since: at() })).toBe(3)
        expect(await storage.loginFailures.count({ emailKey: key, since: at(MINUTE) })).toBe(2)
        expect(await storage.loginFailures.count({ emailKey: key, since: at(3 * MINUTE) })).toBe(0)
        expect(await storage.loginFailures.oldestSince({ emailKey: key, since: at() })).toBe(
          at(MINUTE).toISOString(),
        )
        expect(await storage.loginFailures.oldestSince({ emailKey: key, since: at(MINUTE) })).toBe(
          at(2 * MINUTE).toISOString(),
        )
        expect(await storage.loginFailures.oldestSince({ emailKey: key, since: at(3 * MINUTE) })).toBeNull()

        await storage.loginFailures.record({ emailKey: key, at: at(2 * MINUTE) })
        await storage.loginFailures.forget({ emailKey: key, at: at(2 * MINUTE) })
        expect(await storage.loginFailures.count({ emailKey: key, since: at() })).toBe(3)
        await storage.loginFailures.forget({ emailKey: key, at: at(2 * MINUTE) })
        expect(await storage.loginFailures.count({ emailKey: key, since: at() })).toBe(2)
        expect(await storage.loginFailures.oldestSince({ emailKey: key, since: at(MINUTE) })).toBe(
          at(3 * MINUTE).toISOString(),
        )
        await storage.loginFailures.forget({ emailKey: key, at: at(MINUTE) })
        await storage.loginFailures.forget({ emailKey: key, at: at(3 * MINUTE) })
        expect(await storage.loginFailures.count({ emailKey: key, since: at() })).toBe(0)
        expect(await storage.loginFailures.count({ emailKey: otherKey, since: at() })).toBe(1)
        await storage.loginFailures.forget({ emailKey: key, at: at(MINUTE) })
        await storage.loginFailures.forget({ emailKey: uniqueHash(), at: at() })
      })

      it('forgets the failures of every key recorded at or before a time, and no later ones', async () => {
        const key = uniqueHash()
        const otherKey = uniqueHash()
        await storage.loginFailures.record({ emailKey: key, at: at(MINUTE) })
        await storage.loginFailures.record({ emailKey: key, at: at(2 * MINUTE) })
        await storage.loginFailures.record({ emailKey: key, at: at(3 * MINUTE) })
        await storage.loginFailures.record({ emailKey: otherKey, at: at(MINUTE) })

        await storage.loginFailures.forgetBefore({ before: at(2 * MINUTE) })

        expect(await storage.loginFailures.count({ emailKey: key, since: at() })).toBe(1)
        expect(await storage.loginFailures.oldestSince({ emailKey: key, since: at() })).toBe(
          at(3 * MINUTE).toISOString(),
        )
        expect(await storage.loginFailures.count({ emailKey: otherKey, since: at() })).toBe(0)
      })

      it('counts every one of 20 concurrent failures', async () => {
        const key = uniqueHash()
        await Promise.all(
          Array.from({ length: 20 }, (_, index) =>
            storage.loginFailures.record({ emailKey: key, at: at(index) }),
          ),
        )
        expect(await storage.loginFailures.count({ emailKey: key, since: at(-1) })).toBe(20)
      })
    })

    describe('webhook logs', () => {
      let channel: Channel

      beforeEach(async () => {
        channel = await createCompanyChannel(storage, company)
      })

      it('keeps every field and leaves out the optional ones not given', async () => {
        const full = newWebhookLog(channel, {
          receivedAt: at(MINUTE),
          httpStatus: 200,
          outcome: 'stored_paused',
          reason: 'session paused',
          sessionId: randomUUID(),
          messageId: randomUUID(),
        })
        const bare = newWebhookLog(channel, {
          receivedAt: at(2 * MINUTE),
          httpStatus: 401,
          outcome: 'rejected',
        })
        await storage.webhookLogs.add(full)
        await storage.webhookLogs.add(bare)

        const page = await storage.webhookLogs.list({
          companyId: company.id,
          integrationId: channel.integration.id,
          limit: 10,
        })
        expect(page).toEqual({
          items: [
            { id: bare.id, receivedAt: at(2 * MINUTE).toISOString(), httpStatus: 401, outcome: 'rejected' },
            {
              id: full.id,
              receivedAt: at(MINUTE).toISOString(),
              httpStatus: 200,
              outcome: 'stored_paused',
              reason: 'session paused',
              sessionId: full.sessionId,
              messageId: full.messageId,
            },
          ],
          nextCursor: null,
        })
        expect(page.items[0]).not.toHaveProperty('reason')
        expect(page.items[0]).not.toHaveProperty('sessionId')
      })

      it('lists newest first, page by page, for the integration of the company only', async () => {
        const added: NewWebhookLog[] = []
        for (let index = 0; index < 5; index++) {
          const entry = newWebhookLog(channel, { receivedAt: at(index * MINUTE) })
          await storage.webhookLogs.add(entry)
          added.push(entry)
        }
        const otherChannel = await createCompanyChannel(storage, company)
        await storage.webhookLogs.add(newWebhookLog(otherChannel))
        const newestFirst = idsOf([...added].reverse())
        const target = { companyId: company.id, integrationId: channel.integration.id }

        const first = await storage.webhookLogs.list({ ...target, limit: 2 })
        expect(idsOf(first.items)).toEqual(newestFirst.slice(0, 2))
        const second = await storage.webhookLogs.list({ ...target, limit: 2, cursor: first.nextCursor! })
        expect(idsOf(second.items)).toEqual(newestFirst.slice(2, 4))
        const third = await storage.webhookLogs.list({ ...target, limit: 2, cursor: second.nextCursor! })
        expect(idsOf(third.items)).toEqual(newestFirst.slice(4))
        expect(third.nextCursor).toBeNull()

        expect(
          await storage.webhookLogs.list({
            companyId: otherCompany.id,
            integrationId: channel.integration.id,
            limit: 10,
          }),
        ).toEqual({ items: [], nextCursor: null })
      })

      it('lists logs of the same instant latest added first', async () => {
        const added = [newWebhookLog(channel), newWebhookLog(channel), newWebhookLog(channel)]
        for (const entry of added) await storage.webhookLogs.add(entry)

        const page = await storage.webhookLogs.list({
          companyId: company.id,
          integrationId: channel.integration.id,
          limit: 10,
        })
        expect(idsOf(page.items)).toEqual(idsOf([...added].reverse()))
      })

      it('adds several entries at once, all or none', async () => {
        const entries = [0, 1, 2].map((index) => newWebhookLog(channel, { receivedAt: at(index * 1000) }))
        await storage.webhookLogs.addMany(entries)
        await storage.webhookLogs.addMany([])
        const repeated = newWebhookLog(channel, { receivedAt: at(5000) })
        await expect(
          storage.webhookLogs.addMany([repeated, { ...entries[0]!, outcome: 'duplicate' }]),
        ).rejects.toThrow()

        const page = await storage.webhookLogs.list({
          companyId: company.id,
          integrationId: channel.integration.id,
          limit: 10,
        })
        expect(idsOf(page.items)).toEqual(idsOf([...entries].reverse()))
      })

      // A storage may commit the calls made before `noMoreCalls` without waiting for the function:
      // each of them must then fail inside the transaction, never after it committed.
      it('stores none of the last calls of a transaction when one of them fails', async () => {
        const closed = await createSession(storage, channel, { state: 'closed' })
        const entry = newWebhookLog(channel)

        const outcome = await storage
          .transaction(async (tx) => {
            const writes = Promise.all([
              tx.webhookLogs.addMany([entry]),
              tx.messages.insertMany([newMessageInput(closed)], { intoOpenSession: true }),
            ])
            tx.noMoreCalls?.()
            await writes
          })
          .catch((error: unknown) => error)

        expect(SessionClosedError.isInstance(outcome)).toBe(true)
        const page = await storage.webhookLogs.list({
          companyId: company.id,
          integrationId: channel.integration.id,
          limit: 10,
        })
        expect(page.items).toEqual([])
        expect(await storage.messages.list({ sessionId: closed.id, limit: 10 })).toEqual([])
      })

      it('adds entries, trim included, as the last calls of a transaction', async () => {
        // Enough for any storage that trims every so many entries to trim in this call.
        const entries = Array.from({ length: 200 }, (_, index) =>
          newWebhookLog(channel, { receivedAt: at(index * 1000) }),
        )
        await storage.transaction(async (tx) => {
          const adding = tx.webhookLogs.addMany(entries)
          tx.noMoreCalls?.()
          await adding
        })

        const page = await storage.webhookLogs.list({
          companyId: company.id,
          integrationId: channel.integration.id,
          limit: 100,
        })
        expect(idsOf(page.items)).toEqual(idsOf([...entries].reverse().slice(0, 100)))
      })

      it('refuses a repeated id', async () => {
        const entry = newWebhookLog(channel)
        await storage.webhookLogs.add(entry)

        await expect(storage.webhookLogs.add({ ...entry, outcome: 'duplicate' })).rejects.toThrow()
      })

      it(`keeps the newest ${WEBHOOK_LOGS_KEPT_PER_INTEGRATION} per integration, even when a transaction that adds one rolls back`, async () => {
        const kept = WEBHOOK_LOGS_KEPT_PER_INTEGRATION
        const ids: string[] = []
        for (let index = 0; index < kept + 5; index++) {
          const entry = newWebhookLog(channel, { receivedAt: at(index * 1000) })
          await storage.webhookLogs.add(entry)
          ids.push(entry.id)
        }
        const otherChannel = await createCompanyChannel(storage, company)
        const elsewhere = newWebhookLog(otherChannel)
        await storage.webhookLogs.add(elsewhere)
        const target = { companyId: company.id, integrationId: channel.integration.id, limit: 100 }
        const listAll = async () => {
          const seen: string[] = []
          let cursor: string | undefined
          for (;;) {
            const page = await storage.webhookLogs.list({ ...target, cursor })
            seen.push(...page.items.map((entry) => entry.id))
            if (page.nextCursor === null) return seen
            cursor = page.nextCursor
          }
        }

        const newestFirst = [...ids].reverse().slice(0, kept)
        expect(await listAll()).toEqual(newestFirst)

        const failure = expectedError()
        await expect(
          storage.transaction(async (tx) => {
            await tx.webhookLogs.add(newWebhookLog(channel, { receivedAt: at((kept + 10) * 1000) }))
            throw failure
          }),
        ).rejects.toBe(failure)
        expect(await listAll()).toEqual(newestFirst)

        const older = newWebhookLog(channel, { receivedAt: at(-1000) })
        await storage.webhookLogs.add(older)
        expect(await listAll()).toEqual(newestFirst)
        expect(
          idsOf(
            (
              await storage.webhookLogs.list({
                companyId: company.id,
                integrationId: otherChannel.integration.id,
                limit: 10,
              })
            ).items,
          ),
        ).toEqual([elsewhere.id])
      })
    })

    describe('webhook deliveries', () => {
      const KEPT = WEBHOOK_DELIVERIES_KEPT_MS
      let integrationId: string

      beforeEach(async () => {
        integrationId = (await createCompanyChannel(storage, company)).integration.id
      })

      it('records an id once per integration', async () => {
        const deliveries = storage.webhookDeliveries
        expect(await deliveries.record({ integrationId, deliveryId: 'd-1', at: at() })).toBe(true)
        expect(await deliveries.record({ integrationId, deliveryId: 'd-1', at: at(MINUTE) })).toBe(false)
        expect(await deliveries.record({ integrationId, deliveryId: 'D-1', at: at(MINUTE) })).toBe(true)

        const elsewhere = (await createCompanyChannel(storage, otherCompany)).integration.id
        expect(await deliveries.record({ integrationId: elsewhere, deliveryId: 'd-1', at: at() })).toBe(true)
        expect(await deliveries.record({ integrationId: elsewhere, deliveryId: 'd-1', at: at() })).toBe(false)
      })

      it('keeps ids apart that PostgreSQL text could not hold as they are', async () => {
        const deliveries = storage.webhookDeliveries
        for (const deliveryId of ['d\u0000', 'd\uFFFD', 'd\uD800', 'd\uDC00']) {
          expect(await deliveries.record({ integrationId, deliveryId, at: at() })).toBe(true)
          expect(await deliveries.record({ integrationId, deliveryId, at: at(MINUTE) })).toBe(false)
        }
        await deliveries.forget({ integrationId, deliveryId: 'd\u0000' })
        expect(await deliveries.record({ integrationId, deliveryId: 'd\uFFFD', at: at(MINUTE) })).toBe(false)
        expect(await deliveries.record({ integrationId, deliveryId: 'd\u0000', at: at(MINUTE) })).toBe(true)
      })

      it('gives exactly one of 20 concurrent records of one id true', async () => {
        const answers = await Promise.all(
          Array.from({ length: 20 }, () =>
            storage.webhookDeliveries.record({ integrationId, deliveryId: 'raced', at: at() }),
          ),
        )
        expect(answers.filter(Boolean)).toHaveLength(1)
      })

      it('records a forgotten id anew, and forgets an unknown one quietly', async () => {
        const deliveries = storage.webhookDeliveries
        await deliveries.record({ integrationId, deliveryId: 'failed', at: at() })
        await deliveries.record({ integrationId, deliveryId: 'kept', at: at() })
        await deliveries.forget({ integrationId, deliveryId: 'failed' })
        await deliveries.forget({ integrationId, deliveryId: 'never recorded' })

        expect(await deliveries.record({ integrationId, deliveryId: 'failed', at: at(MINUTE) })).toBe(true)
        expect(await deliveries.record({ integrationId, deliveryId: 'kept', at: at(MINUTE) })).toBe(false)
      })

      it(`remembers an id for ${KEPT / DAY} days from its record`, async () => {
        const deliveries = storage.webhookDeliveries
        const record = (offset: number) =>
          deliveries.record({ integrationId, deliveryId: 'aging', at: at(offset) })
        expect(await record(0)).toBe(true)
        expect(await record(KEPT - 1)).toBe(false)
        expect(await record(KEPT)).toBe(true)
        expect(await record(KEPT + DAY)).toBe(false)
        expect(await record(2 * KEPT)).toBe(true)
      })

      it('loses no id still remembered while many more are recorded', async () => {
        const deliveries = storage.webhookDeliveries
        await deliveries.record({ integrationId, deliveryId: 'expiring', at: at(-KEPT) })
        await deliveries.record({ integrationId, deliveryId: 'first', at: at() })
        const later = Array.from({ length: 130 }, (_, index) => `later-${index}`)
        for (const [index, deliveryId] of later.entries()) {
          await deliveries.record({ integrationId, deliveryId, at: at(MINUTE + index) })
        }

        const now = at(KEPT - 1)
        expect(await deliveries.record({ integrationId, deliveryId: 'first', at: now })).toBe(false)
        for (const deliveryId of later) {
          expect(await deliveries.record({ integrationId, deliveryId, at: now })).toBe(false)
        }
        expect(await deliveries.record({ integrationId, deliveryId: 'expiring', at: now })).toBe(true)
      })

      it('takes back the record and the forgetting of a transaction that fails', async () => {
        const deliveries = storage.webhookDeliveries
        await deliveries.record({ integrationId, deliveryId: 'committed', at: at() })
        const failure = expectedError()
        await expect(
          storage.transaction(async (tx) => {
            expect(
              await tx.webhookDeliveries.record({ integrationId, deliveryId: 'rolled back', at: at() }),
            ).toBe(true)
            await tx.webhookDeliveries.forget({ integrationId, deliveryId: 'committed' })
            throw failure
          }),
        ).rejects.toBe(failure)

        expect(await deliveries.record({ integrationId, deliveryId: 'rolled back', at: at() })).toBe(true)
        expect(await deliveries.record({ integrationId, deliveryId: 'committed', at: at() })).toBe(false)
      })
    })

    // Only the keys the Storage port names (a customer's ids, external and delivery ids) are kept
    // exact; the others are stored as PostgreSQL stores text, with U+FFFD in place of U+0000 and
    // lone surrogates. A look-up stores nothing, yet must find the row by the text it was given,
    // as a database's parameter does: either spelling names the one row.
    it('finds emails, token hashes, logins and failure keys holding text PostgreSQL cannot hold as it is', async () => {
      const unique = randomUUID()
      const user = await createUser(storage, company, { email: `a\u0000${unique}@example.com` })
      expect(await storage.users.findByEmail({ email: `a\uFFFD${unique}@example.com` })).toEqual(user)
      expect(await storage.users.findByEmail({ email: `A\uD800${unique}@EXAMPLE.com` })).toEqual(user)
      await expect(
        createUser(storage, otherCompany, { email: `a\uDC00${unique}@example.com` }),
      ).rejects.toThrow()

      const apiHash = uniqueHash()
      const apiToken = await storage.apiTokens.create({
        id: randomUUID(),
        companyId: company.id,
        userId: user.id,
        name: 'CI',
        tokenHash: `${apiHash}\u0000`,
        at: at(),
      })
      expect(await storage.apiTokens.findByHash({ tokenHash: `${apiHash}\u0000` })).toEqual(apiToken)
      expect(await storage.apiTokens.findByHash({ tokenHash: `${apiHash}\uFFFD` })).toEqual(apiToken)

      const refreshHash = uniqueHash()
      const loginId = `${randomUUID()}\u0000`
      const refreshToken = await storage.refreshTokens.create({
        id: randomUUID(),
        tokenHash: `${refreshHash}\uD800`,
        userId: user.id,
        companyId: company.id,
        loginId,
        expiresAt: at(DAY),
        at: at(),
      })
      expect(await storage.refreshTokens.findByHash({ tokenHash: `${refreshHash}\uD800` })).toEqual(
        refreshToken,
      )
      await expect(
        storage.refreshTokens.create({
          id: randomUUID(),
          tokenHash: `${refreshHash}\uDC00`,
          userId: user.id,
          companyId: company.id,
          loginId,
          expiresAt: at(DAY),
          at: at(),
        }),
      ).rejects.toThrow()
      await storage.refreshTokens.revokeLogin({ loginId, at: at(MINUTE) })
      expect(await storage.refreshTokens.findByHash({ tokenHash: `${refreshHash}\uFFFD` })).toEqual({
        ...refreshToken,
        revokedAt: at(MINUTE).toISOString(),
      })

      const failureKey = `${uniqueHash()}\u0000`
      await storage.loginFailures.record({ emailKey: failureKey, at: at(MINUTE) })
      await storage.loginFailures.record({ emailKey: failureKey, at: at(2 * MINUTE) })
      expect(await storage.loginFailures.count({ emailKey: failureKey, since: at() })).toBe(2)
      expect(
        await storage.loginFailures.count({ emailKey: failureKey.replace('\u0000', '\uFFFD'), since: at() }),
      ).toBe(2)
      expect(await storage.loginFailures.oldestSince({ emailKey: failureKey, since: at() })).toBe(
        at(MINUTE).toISOString(),
      )
      await storage.loginFailures.forget({ emailKey: failureKey, at: at(MINUTE) })
      expect(await storage.loginFailures.count({ emailKey: failureKey, since: at() })).toBe(1)
    })

    describe('transactions', () => {
      it('takes back every account write of a transaction that fails', async () => {
        const user = await createUser(storage, company)
        const loginId = randomUUID()
        const used = await createRefreshToken(storage, user, { loginId })
        const fresh = await createRefreshToken(storage, user, { loginId })
        const apiTokenHash = uniqueHash()
        const apiToken = await storage.apiTokens.create({
          id: randomUUID(),
          companyId: company.id,
          userId: user.id,
          name: 'kept',
          tokenHash: apiTokenHash,
          at: at(),
        })
        await storage.billing.adjust({ companyId: company.id, amountUsd: 5, at: at() })
        const failureKey = uniqueHash()
        await storage.loginFailures.record({ emailKey: failureKey, at: at() })
        const channel = await createCompanyChannel(storage, company)
        const pipelinesBefore = await storage.pipelines.list({ companyId: company.id })

        const email = uniqueEmail()
        const newTokenHash = uniqueHash()
        const newApiTokenHash = uniqueHash()
        const newKey = uniqueHash()
        const usageId = randomUUID()
        const failure = expectedError()
        let newCompany: Company | undefined
        let newUser: User | undefined

        await expect(
          storage.transaction(async (tx) => {
            newCompany = await createCompany(tx)
            newUser = await createUser(tx, newCompany, { email })
            await createRefreshToken(tx, newUser, { tokenHash: newTokenHash })
            expect(await tx.refreshTokens.markUsed({ id: used.id, at: at(MINUTE) })).toBe(true)
            await tx.refreshTokens.revokeLogin({ loginId, at: at(MINUTE) })
            await tx.apiTokens.create({
              id: randomUUID(),
              companyId: company.id,
              userId: user.id,
              name: 'doomed',
              tokenHash: newApiTokenHash,
              at: at(),
            })
            expect(await tx.apiTokens.delete({ companyId: company.id, id: apiToken.id })).toBe(true)
            await tx.billing.adjust({ companyId: company.id, amountUsd: 10, at: at() })
            await tx.billing.adjust({ companyId: newCompany.id, amountUsd: 5, at: at() })
            await tx.billing.recordUsage(newUsage(company.id, { id: usageId }))
            await tx.pipelines.create({
              companyId: company.id,
              name: 'Doomed',
              isDefault: false,
              stages: ['One'],
              at: at(),
            })
            await tx.loginFailures.forget({ emailKey: failureKey, at: at() })
            await tx.loginFailures.record({ emailKey: newKey, at: at() })
            await tx.webhookLogs.add(newWebhookLog(channel))
            throw failure
          }),
        ).rejects.toBe(failure)

        expect(await storage.companies.get({ id: newCompany!.id })).toBeNull()
        expect(await storage.users.get({ id: newUser!.id })).toBeNull()
        expect(await storage.users.findByEmail({ email })).toBeNull()
        expect(await storage.refreshTokens.findByHash({ tokenHash: newTokenHash })).toBeNull()
        expect(await storage.refreshTokens.findByHash({ tokenHash: used.tokenHash })).toEqual(used)
        expect(await storage.refreshTokens.findByHash({ tokenHash: fresh.tokenHash })).toEqual(fresh)
        expect(await storage.apiTokens.findByHash({ tokenHash: newApiTokenHash })).toBeNull()
        expect(await storage.apiTokens.findByHash({ tokenHash: apiTokenHash })).toEqual(apiToken)
        expect(await storage.billing.getBalance({ companyId: company.id })).toBe(5)
        expect(await storage.billing.getBalance({ companyId: newCompany!.id })).toBe(0)
        expect((await storage.billing.listUsage({ companyId: company.id, limit: 10 })).items).toEqual([])
        expect(await storage.pipelines.list({ companyId: company.id })).toEqual(pipelinesBefore)
        expect(await storage.loginFailures.count({ emailKey: failureKey, since: at(-1) })).toBe(1)
        expect(await storage.loginFailures.count({ emailKey: newKey, since: at(-1) })).toBe(0)
        expect(
          await storage.webhookLogs.list({
            companyId: company.id,
            integrationId: channel.integration.id,
            limit: 10,
          }),
        ).toEqual({ items: [], nextCursor: null })

        // The unique keys the rolled-back writes took are free again, and a use can still happen.
        await createUser(storage, company, { email })
        await createRefreshToken(storage, user, { tokenHash: newTokenHash })
        await storage.billing.recordUsage(newUsage(company.id, { id: usageId }))
        expect(await storage.refreshTokens.markUsed({ id: used.id, at: at(HOUR) })).toBe(true)
      })

      it('commits a registration-shaped transaction whole', async () => {
        const email = uniqueEmail()
        const { created, user } = await storage.transaction(async (tx) => {
          const created = await createCompany(tx)
          const user = await createUser(tx, created, { email })
          await tx.billing.adjust({ companyId: created.id, amountUsd: 5, at: at() })
          await tx.pipelines.create({
            companyId: created.id,
            name: 'Sales',
            isDefault: true,
            stages: ['New'],
            at: at(),
          })
          return { created, user }
        })

        expect(await storage.companies.get({ id: created.id })).toEqual(created)
        expect(await storage.users.findByEmail({ email })).toEqual(user)
        expect(await storage.billing.getBalance({ companyId: created.id })).toBe(5)
        expect(await storage.pipelines.list({ companyId: created.id })).toHaveLength(1)
      })
    })

    describe('cursors no storage wrote', () => {
      /** The JSON of a cursor as a client would forge it: base64url, like every written one. */
      const forged = (json: string) => Buffer.from(json).toString('base64url')
      const LAST_TIME = 8_640_000_000_000_000
      const MAX_SAFE = Number.MAX_SAFE_INTEGER
      // Numbers no storage writes: a fraction, a negative, a number JSON rounds, one past 2^53.
      const malformed = ['[1.5]', '[-1]', '[1e20]', '[9007199254740993]', '[1,1.5]', '[1,-1]', '[1,1e20]']

      type List = (cursor: string | undefined) => Promise<Page<{ id: string | number }>>

      /** One item of each list, and each list reading with a cursor. */
      async function everyList(): Promise<
        Record<string, { list: List; kind: 'ascending' | 'newest' | 'tokens' }>
      > {
        const channel = await createCompanyChannel(storage, company)
        const user = await createUser(storage, company)
        await storage.knowledgeDocuments.create({
          id: randomUUID(),
          companyId: company.id,
          agentId: channel.agent.id,
          title: 'doc',
          content: 'content',
          at: at(),
        })
        await createSession(storage, channel)
        await storage.billing.recordUsage(newUsage(company.id))
        await storage.webhookLogs.add(newWebhookLog(channel))
        await storage.apiTokens.create({
          id: randomUUID(),
          companyId: company.id,
          userId: user.id,
          name: 'CI',
          tokenHash: uniqueHash(),
          at: at(),
        })
        const companyId = company.id
        const limit = 10
        return {
          agents: { kind: 'ascending', list: (cursor) => storage.agents.list({ companyId, limit, cursor }) },
          integrations: {
            kind: 'ascending',
            list: (cursor) => storage.integrations.list({ companyId, limit, cursor }),
          },
          knowledge: {
            kind: 'ascending',
            list: (cursor) =>
              storage.knowledgeDocuments.list({ companyId, agentId: channel.agent.id, limit, cursor }),
          },
          sessions: { kind: 'newest', list: (cursor) => storage.sessions.list({ companyId, limit, cursor }) },
          usage: {
            kind: 'newest',
            list: (cursor) => storage.billing.listUsage({ companyId, limit, cursor }),
          },
          webhookLogs: {
            kind: 'newest',
            list: (cursor) =>
              storage.webhookLogs.list({ companyId, integrationId: channel.integration.id, limit, cursor }),
          },
          apiTokens: {
            kind: 'tokens',
            list: (cursor) => storage.apiTokens.list({ companyId, limit, cursor }),
          },
        }
      }

      it('answers an empty page, never an error, to a cursor holding numbers no storage writes', async () => {
        for (const [list, { list: read }] of Object.entries(await everyList())) {
          for (const json of [...malformed, '[]', '[1,2,3]', '{"a":1}', 'null', '["x"]', '[1,"x"]']) {
            expect(await read(forged(json)), `${list} after ${json}`).toEqual({ items: [], nextCursor: null })
          }
          expect(await read('not base64url JSON'), list).toEqual({ items: [], nextCursor: null })
        }
      })

      it('reads a forged position beyond any column range as the items after it, like memory', async () => {
        const lists = await everyList()
        for (const [list, { list: read, kind }] of Object.entries(lists)) {
          const all = await read(undefined)
          expect(all.items, list).toHaveLength(1)
          // [first position, last position] in each list's order, then positions past either end.
          const cases: Array<[string, boolean]> =
            kind === 'ascending'
              ? [
                  ['[0]', true],
                  ['[2147483647]', false],
                  ['[2147483648]', false],
                  [`[${MAX_SAFE}]`, false],
                ]
              : kind === 'newest'
                ? [
                    [`[${LAST_TIME},${MAX_SAFE}]`, true],
                    [`[${LAST_TIME + 1},0]`, false],
                    [`[${MAX_SAFE},${MAX_SAFE}]`, false],
                    ['[0,0]', false],
                  ]
                : [
                    ['[0,"00000000-0000-0000-0000-000000000000"]', true],
                    [`[${LAST_TIME},"ffffffff-ffff-ffff-ffff-ffffffffffff"]`, false],
                    [`[${LAST_TIME + 1},"00000000-0000-0000-0000-000000000000"]`, false],
                    ['[0,"not a uuid"]', false],
                  ]
          for (const [json, holdsAll] of cases) {
            const page = await read(forged(json))
            expect(page, `${list} after ${json}`).toEqual(holdsAll ? all : { items: [], nextCursor: null })
          }
        }
      })
    })

    it('stores snapshots: changing a returned record changes nothing stored', async () => {
      const user = await createUser(storage, company)
      const original = structuredClone(user)
      tryToMutate(user, 'email', 'thief@example.com')
      const pipeline = await storage.pipelines.create({
        companyId: company.id,
        name: 'Sales',
        isDefault: true,
        stages: ['New'],
        at: at(),
      })
      const originalPipeline = structuredClone(pipeline)
      tryToMutate(pipeline.stages[0]!, 'name', 'Changed')
      tryToMutate(pipeline.stages, '1', { id: 'x', name: 'Added', position: 1 })

      expect(await storage.users.get({ id: user.id })).toEqual(original)
      expect(await storage.pipelines.list({ companyId: company.id })).toEqual([originalPipeline])
    })
  })
}
