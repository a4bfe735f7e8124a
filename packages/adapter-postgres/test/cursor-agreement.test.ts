import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { agentInputSchema, createMemoryStorage, type Storage } from '@switchboard/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgliteDb, createPostgresStorage, type Db } from '../src/index.js'

// A fresh database and a fresh memory storage given the same rows in the same order hand out the
// same ids and positions, so a forged cursor means the same to both.
let dataDir: string
let db: Db
let sql: Storage
let memory: Storage
let read: Array<{ list: string; read: (storage: Storage, cursor: string) => Promise<unknown[]> }>

const BASE = Date.parse('2030-01-01T00:00:00.000Z')
const MINUTE = 60_000

async function seed(
  storage: Storage,
  ids: readonly string[],
): Promise<{ companyId: number; agentId: number; integrationId: string }> {
  const next = (() => {
    let index = 0
    return () => ids[index++]!
  })()
  const at = (minutes: number) => new Date(BASE + minutes * MINUTE)
  const company = await storage.companies.create({ companyName: 'Acme', publicId: next(), at: at(0) })
  const companyId = company.id
  const user = await storage.users.create({
    id: next(),
    email: 'owner@acme.test',
    companyId,
    passwordHash: 'hash',
    at: at(0),
  })
  const agentIds: number[] = []
  for (const name of ['Reception', 'Sales', 'Support']) {
    const agent = await storage.agents.create({
      ...agentInputSchema.parse({ name, systemPrompt: 'You help customers.' }),
      companyId,
      at: at(0),
    })
    agentIds.push(agent.id)
  }
  const agentId = agentIds[0]!
  const integrationIds: string[] = []
  for (const name of ['Website', 'Shop']) {
    const integration = await storage.integrations.create({
      companyId,
      type: 'webchat',
      name,
      active: true,
      entryAgentId: agentId,
      config: {},
      webhookSecret: null,
      at: at(0),
    })
    integrationIds.push(integration.id)
  }
  const integrationId = integrationIds[0]!
  // Two of each at one instant, so positions differ only by insertion order there.
  const minutes = [0, 1, 1, 2]
  for (const [index, minute] of minutes.entries()) {
    await storage.knowledgeDocuments.create({
      id: next(),
      companyId,
      agentId,
      title: `doc ${index}`,
      content: 'content',
      at: at(minute),
    })
    const createdAt = at(minute).toISOString()
    await storage.sessions.create({
      id: next(),
      companyId,
      integrationId,
      customer: { clientId: `customer ${index}`, transport: 'websocket' },
      state: 'ongoing',
      activeAgentId: agentId,
      entryAgentId: agentId,
      metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
      createdAt,
      updatedAt: createdAt,
    })
    await storage.billing.recordUsage({
      id: next(),
      companyId,
      sessionId: next(),
      model: 'gpt-4o-mini',
      inputTokens: 10,
      outputTokens: 5,
      costUsd: 0.01,
      at: at(minute),
    })
    await storage.webhookLogs.add({
      id: next(),
      companyId,
      integrationId,
      receivedAt: at(minute),
      httpStatus: 200,
      outcome: 'queued',
    })
    await storage.apiTokens.create({
      id: next(),
      companyId,
      userId: user.id,
      name: `token ${index}`,
      tokenHash: next(),
      at: at(minute),
    })
  }
  return { companyId, agentId, integrationId }
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'switchboard-cursors-'))
  db = await createPgliteDb({ dataDir })
  sql = await createPostgresStorage({ db })
  memory = createMemoryStorage()
  const ids = Array.from({ length: 64 }, () => randomUUID())
  const inSql = await seed(sql, ids)
  const inMemory = await seed(memory, ids)
  expect(inSql).toEqual(inMemory)
  const { companyId, agentId, integrationId } = inSql
  const limit = 3
  const ofIds = (items: ReadonlyArray<{ id: string | number }>) => items.map((item) => item.id)
  read = [
    {
      list: 'agents',
      read: async (storage, cursor) => ofIds((await storage.agents.list({ companyId, limit, cursor })).items),
    },
    {
      list: 'integrations',
      read: async (storage, cursor) =>
        ofIds((await storage.integrations.list({ companyId, limit, cursor })).items),
    },
    {
      list: 'knowledge',
      read: async (storage, cursor) =>
        ofIds((await storage.knowledgeDocuments.list({ companyId, agentId, limit, cursor })).items),
    },
    {
      list: 'sessions',
      read: async (storage, cursor) =>
        ofIds((await storage.sessions.list({ companyId, limit, cursor })).items),
    },
    {
      list: 'usage',
      read: async (storage, cursor) =>
        ofIds((await storage.billing.listUsage({ companyId, limit, cursor })).items),
    },
    {
      list: 'webhook logs',
      read: async (storage, cursor) =>
        ofIds((await storage.webhookLogs.list({ companyId, integrationId, limit, cursor })).items),
    },
    {
      list: 'API tokens',
      read: async (storage, cursor) =>
        ofIds((await storage.apiTokens.list({ companyId, limit, cursor })).items),
    },
  ]
})

afterAll(async () => {
  await memory?.close()
  await sql?.close()
  await db?.close()
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
})

/** A JSON number as text, so numbers JSON.stringify cannot write (`1e400`, 2^53 + 1) come too. */
const numberText = fc.oneof(
  fc.integer({ min: -3, max: 12 }).map(String),
  fc.constantFrom(BASE, BASE + MINUTE, BASE + 2 * MINUTE).map(String),
  fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 53 - 1, 8.64e15, 8.64e15 + 1).map(String),
  fc.constantFrom('9007199254740993', '99999999999999999999', '1e400', '-0', '1.5', '-1e20'),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
  fc.bigInt().map(String),
)
const entryText = fc.oneof(
  numberText,
  fc.uuid().map((uuid) => JSON.stringify(uuid)),
  fc.uuid().map((uuid) => JSON.stringify(uuid.toUpperCase())),
  fc.string().map((text) => JSON.stringify(text)),
  fc.constantFrom('null', 'true', '{}', '[]'),
)
const cursorText = fc.oneof(
  fc
    .array(entryText, { maxLength: 3 })
    .map((entries) => Buffer.from(`[${entries.join(',')}]`).toString('base64url')),
  fc.string({ minLength: 1 }),
)

describe('cursors forged by a client', () => {
  it('never fail a list and read the same on memory and PGlite', async () => {
    await fc.assert(
      fc.asyncProperty(cursorText, async (cursor) => {
        for (const { list, read: readList } of read) {
          const [inMemory, inSql] = await Promise.all([readList(memory, cursor), readList(sql, cursor)])
          const json = Buffer.from(cursor, 'base64url').toString()
          expect(inSql, `${list} after ${json}`).toEqual(inMemory)
        }
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 200) },
    )
  })
})
