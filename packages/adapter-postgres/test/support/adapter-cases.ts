import { randomUUID } from 'node:crypto'
import {
  contentWords,
  createAgentService,
  createKnowledgeService,
  createMemoryKnowledgeIndex,
  createRandomIds,
  type EventBus,
  type Storage,
  WEBHOOK_DELIVERIES_KEPT_MS,
  WEBHOOK_LOGS_KEPT_PER_INTEGRATION,
} from '@switchboard/core'
import { createManualClock, seedChannel } from '@switchboard/core/testing'
import { expect, it } from 'vitest'
import {
  createPostgresEventBus,
  createPostgresKnowledgeIndex,
  type Db,
  type DbClient,
  MIGRATIONS,
  migrate,
} from '../../src/index.js'
import { countingRowsRead } from './rows-read.js'

export interface AdapterCaseContext {
  readonly db: () => Db
  readonly storage: () => Storage
}

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/**
 * The statements allowed to drop: each drops what no process still running reads or names, so an
 * older process keeps working. Migration 8: the knowledge tsvector, its GIN index and the agent
 * index of knowledge_passages, read by no search since the postings (and the tsvector by none
 * released).
 */
const UNREAD_DROPS: ReadonlySet<string> = new Set([
  'DROP INDEX knowledge_passages_search',
  'ALTER TABLE knowledge_passages DROP COLUMN search',
  'DROP INDEX knowledge_passages_agent',
])

/** What this adapter promises beyond core's conformance suites, on either driver. */
export function runAdapterCases(context: AdapterCaseContext): void {
  it('migrations only create and add: no statement drops (but what nothing reads), truncates, deletes or rewrites', () => {
    const destructive = /\b(DROP|TRUNCATE|DELETE|RENAME|ALTER\s+COLUMN|UPDATE)\b/i
    // A function's body runs later, on the rows written then, and a trigger's event (AFTER DELETE)
    // names what it follows: neither changes anything when the migration runs.
    const whatRunsNow = (statement: string) =>
      statement.replaceAll(/\$\$[\s\S]*?\$\$/g, '').replace(/^\s*CREATE TRIGGER\s+\w+\s+AFTER\s+\w+/i, '')
    for (const migration of MIGRATIONS) {
      for (const statement of migration.statements) {
        if (!UNREAD_DROPS.has(statement)) expect(whatRunsNow(statement)).not.toMatch(destructive)
      }
    }
    const versions = MIGRATIONS.map((migration) => migration.version)
    expect(new Set(versions).size).toBe(versions.length)
  })

  it('rejects a Db transaction one of whose statements failed, even when its function went on', async () => {
    const db = context.db()
    const table = `failed_statement_${randomUUID().replaceAll('-', '')}`
    await db.query(`CREATE TABLE ${table} (id integer PRIMARY KEY)`)
    try {
      await expect(
        db.transaction(async (client) => {
          await client.query(`INSERT INTO ${table} (id) VALUES (1)`)
          // Fails, aborting the transaction; COMMIT would answer ROLLBACK without an error.
          await client.query(`INSERT INTO ${table} (id) VALUES (1)`).catch(() => undefined)
          return 'went on'
        }),
      ).rejects.toThrow(/duplicate key/)
      expect(await db.query(`SELECT id FROM ${table}`)).toEqual([])
    } finally {
      await db.query(`DROP TABLE ${table}`)
    }
  })

  // A statement started and not waited for may fail after the function returned: its COMMIT then
  // answers ROLLBACK without an error, and the caller must not hear that all went well.
  it('rejects a Db transaction one of whose statements failed after its function returned', async () => {
    const db = context.db()
    const table = `late_failure_${randomUUID().replaceAll('-', '')}`
    await db.query(`CREATE TABLE ${table} (id integer PRIMARY KEY)`)
    try {
      await expect(
        db.transaction(async (client) => {
          await client.query(`INSERT INTO ${table} (id) VALUES (1)`)
          void client.query(`INSERT INTO ${table} (id) VALUES (1)`).catch(() => undefined)
          return 'returned'
        }),
      ).rejects.toThrow()
      expect(await db.query(`SELECT id FROM ${table}`)).toEqual([])
    } finally {
      await db.query(`DROP TABLE ${table}`)
    }
  })

  // The shape of a repository call of two statements (an insert, then a trim) left unawaited: the
  // second starts once the first settles, which is when the transaction saw nothing more under way.
  it('rejects a Db transaction whose statement, started by one it did not wait for, failed', async () => {
    const db = context.db()
    const table = `chained_failure_${randomUUID().replaceAll('-', '')}`
    await db.query(`CREATE TABLE ${table} (id integer PRIMARY KEY)`)
    try {
      await expect(
        db.transaction(async (client) => {
          await client.query(`INSERT INTO ${table} (id) VALUES (1)`)
          void client
            .query('SELECT 1')
            .then(() => client.query(`INSERT INTO ${table} (id) VALUES (1)`))
            .catch(() => undefined)
          return 'returned'
        }),
      ).rejects.toThrow(/duplicate key/)
      expect(await db.query(`SELECT id FROM ${table}`)).toEqual([])
    } finally {
      await db.query(`DROP TABLE ${table}`)
    }
  })

  it('applies nothing when migrated again, however often and however many at once', async () => {
    const results = await Promise.all([migrate({ db: context.db() }), migrate({ db: context.db() })])
    expect(results).toEqual([{ applied: [] }, { applied: [] }])
    const rows = await context
      .db()
      .query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')
    expect(rows.map((row) => Number(row.version))).toEqual(MIGRATIONS.map((migration) => migration.version))
  })

  it('stores text holding U+0000 with U+FFFD in its place, in text and jsonb columns alike, keys exactly', async () => {
    const storage = context.storage()
    const { companyId, agent, integration } = await seedChannel(storage, { agent: { name: 'Sup\u0000port' } })
    expect(agent.name).toBe('Sup\uFFFDport')
    const at = new Date()
    const session = await storage.sessions.create({
      id: randomUUID(),
      companyId,
      integrationId: integration.id,
      customer: { clientId: 'client\u00001' },
      state: 'ongoing',
      activeAgentId: agent.id,
      entryAgentId: agent.id,
      metadata: {
        agentPath: [],
        sharedContext: { facts: { 'first\u0000name': 'A\u0000nn' }, journey: [] },
        errors: [],
      },
      createdAt: at.toISOString(),
      updatedAt: at.toISOString(),
    })
    const message = (base: string, text: string, externalId?: string) => ({
      id: randomUUID(),
      companyId,
      sessionId: session.id,
      integrationId: integration.id,
      role: 'customer' as const,
      text,
      at,
      ...(externalId === undefined ? {} : { externalId: `${base}${externalId}` }),
    })

    const [nul, typed] = await storage.messages.insertMany([
      message('', 'hi\u0000there', 'ext\u00001'),
      // A backslash followed by "u0000", as a customer may type it, is text like any other.
      message('', 'C:\\u0000\\path'),
    ])

    expect(nul?.text).toBe('hi\uFFFDthere')
    expect(typed?.text).toBe('C:\\u0000\\path')
    expect(
      await storage.sessions.findOpen({ integrationId: integration.id, clientId: 'client\u00001' }),
    ).toMatchObject({
      id: session.id,
      // A key: stored exactly, so the reply reaches this customer and no other.
      customer: { clientId: 'client\u00001' },
      metadata: { sharedContext: { facts: { 'first\uFFFDname': 'A\uFFFDnn' } } },
    })
    const found = await storage.messages.findByExternalIds({
      integrationId: integration.id,
      externalIds: ['ext\u00001'],
    })
    expect(found.map((row) => row.id)).toEqual([nul?.id])
  })

  it("keeps no copy of a failed statement's parameters on its error: they may be secrets, and errors get logged", async () => {
    const secret = `secret-${randomUUID()}`
    const failure = await context
      .db()
      .query('SELECT $1::integer', [secret])
      .then(
        () => null,
        (error: unknown) => error,
      )

    expect(failure).toBeInstanceOf(Error)
    expect((failure as Error).message).toMatch(/invalid input syntax/)
    expect(JSON.stringify(failure)).not.toContain(secret)
    expect(Object.values(failure as object).flat()).not.toContain(secret)
  })

  it('reports the driver as the storage kind', () => {
    expect(context.storage().kind).toBe(context.db().kind)
  })

  it('deletes an agent once when ten requests delete it at once: the others find no agent', async () => {
    const storage = context.storage()
    const agents = createAgentService({ storage, clock: createManualClock(new Date()) })
    const { companyId } = await seedChannel(storage)
    const agent = (await agents.create(companyId, { name: 'Doomed' }))._unsafeUnwrap()

    const results = await Promise.all(Array.from({ length: 10 }, () => agents.delete(companyId, agent.id)))

    expect(results.filter((result) => result.isOk())).toHaveLength(1)
    const refused = results.filter((result) => result.isErr()).map((result) => result._unsafeUnwrapErr().code)
    expect(refused).toEqual(Array.from({ length: 9 }, () => 'NOT_FOUND'))
  })

  it('gives the knowledge passages written before the postings migration their postings and totals', async () => {
    const schema = `knowledge_backfill_${randomUUID().replaceAll('-', '')}`
    const db = context.db()
    await db.query(`CREATE SCHEMA ${schema}`)
    // Every statement in a transaction of its own on the new schema, on either driver.
    const inSchema: Db = {
      ...db,
      query: (sql, params) => inSchema.transaction((client) => client.query(sql, params)),
      transaction: (fn) =>
        db.transaction(async (client: DbClient) => {
          await client.query(`SET LOCAL search_path TO ${schema}`)
          return fn(client)
        }),
    }
    const documents = [
      {
        companyId: 1,
        agentId: 7,
        documentId: 'returns',
        content: 'Refunds take five days.\n\nShipping is free.',
      },
      {
        companyId: 1,
        agentId: 8,
        documentId: 'other',
        content: 'Refunds never expire.\n\nRefunds and refunds.',
      },
      { companyId: 2, agentId: 7, documentId: 'returns', content: 'Refunds by card.' },
      { companyId: 1, agentId: 7, documentId: 'cards', content: 'Card refunds take ten days.\n\nAnd the.' },
    ]
    try {
      await migrate({ db: inSchema, migrations: MIGRATIONS.filter((migration) => migration.version < 7) })
      // As the index wrote them before: passages and their content words, nothing else.
      for (const { companyId, agentId, documentId, content } of documents) {
        const passages = content.split('\n\n')
        for (const [position, text] of passages.entries()) {
          await inSchema.query(
            `INSERT INTO knowledge_passages (company_id, agent_id, document_id, position, text, words)
            VALUES ($1, $2, $3, $4, $5, ARRAY(SELECT jsonb_array_elements_text($6::jsonb)))`,
            [companyId, agentId, documentId, position, text, JSON.stringify(contentWords(text))],
          )
        }
      }
      const index = await createPostgresKnowledgeIndex({ db: inSchema })
      const memory = createMemoryKnowledgeIndex()
      for (const document of documents) await memory.add(document)
      const searchesAgree = async () => {
        for (const scope of [
          { companyId: 1, agentId: 7 },
          { companyId: 1, agentId: 8 },
          { companyId: 2, agentId: 7 },
        ]) {
          for (const query of ['refunds', 'card refunds days', 'shipping']) {
            const expected = await memory.search({ ...scope, query, limit: 10 })
            expect(await index.search({ ...scope, query, limit: 10 })).toEqual(expected)
          }
        }
      }

      await searchesAgree()
      expect((await index.search({ companyId: 1, agentId: 7, query: 'refunds', limit: 10 })).length).toBe(2)
      // And the triggers keep them from then on.
      await index.remove({ companyId: 1, documentId: 'returns' })
      await memory.remove({ companyId: 1, documentId: 'returns' })
      await index.add(documents[0]!)
      await memory.add(documents[0]!)
      await searchesAgree()
    } finally {
      await db.query(`DROP SCHEMA ${schema} CASCADE`)
    }
  })

  // A tenant with 533,000 passages made every search read them all: 2.6 s of the database a message.
  it("searches by reading the rows of the message's words, not the agent's other passages", async () => {
    const counted = countingRowsRead(context.db())
    const index = await createPostgresKnowledgeIndex({ db: counted.db })
    const scope = { companyId: 1_000_000 + Math.floor(Math.random() * 1_000_000_000), agentId: 7 }
    const stock = (document: number) =>
      Array.from({ length: 100 }, (_, passage) => `Warehouse shelf ${document * 100 + passage} holds stock.`)
    const addStock = async (from: number, to: number) => {
      for (let document = from; document < to; document++) {
        await index.add({ ...scope, documentId: `stock-${document}`, content: stock(document).join('\n\n') })
      }
    }
    const rowsReadBySearch = async () => {
      const before = counted.rowsRead()
      const found = await index.search({ ...scope, query: 'When do refunds arrive?', limit: 3 })
      expect(found.map((passage) => passage.text)).toEqual(['Refunds take five days.'])
      return counted.rowsRead() - before
    }
    // Enough rows first that no plan reads a whole table because it is small.
    await addStock(0, 10)
    await index.add({
      ...scope,
      documentId: 'returns',
      content: 'Refunds take five days.\n\nParcels ship daily.',
    })

    const beside1000 = await rowsReadBySearch()
    await addStock(10, 30)
    const beside3000 = await rowsReadBySearch()

    // The statement that counted the agent's passages and joined all their words read 3,007 rows,
    // then 9,007.
    expect(beside3000).toBe(beside1000)
    expect(beside1000).toBeLessThan(20)
  })

  it("deletes an agent's knowledge base with it, past the first page, also when deleted three times at once", async () => {
    const storage = context.storage()
    const clock = createManualClock(new Date())
    const index = await createPostgresKnowledgeIndex({ db: context.db() })
    const agents = createAgentService({ storage, clock, knowledge: index })
    const knowledge = createKnowledgeService({ storage, knowledge: index, clock, ids: createRandomIds() })
    const { companyId } = await seedChannel(storage)
    const agent = (await agents.create(companyId, { name: 'Leaving' }))._unsafeUnwrap()
    for (let document = 0; document < 101; document++) {
      await knowledge.add(
        { companyId, agentId: agent.id },
        { title: `Doc ${document}`, content: 'Refunds take 5 days.' },
      )
    }

    const results = await Promise.all(Array.from({ length: 3 }, () => agents.delete(companyId, agent.id)))

    expect(results.filter((result) => result.isOk())).toHaveLength(1)
    const documents = await storage.knowledgeDocuments.list({ companyId, agentId: agent.id, limit: 100 })
    expect(documents.items).toEqual([])
    expect(await index.search({ companyId, agentId: agent.id, query: 'refunds', limit: 5 })).toEqual([])
  })

  it('delivers an event payload too big for one NOTIFY, in order with the small ones', async () => {
    const publisher = await createPostgresEventBus({ db: context.db() })
    const subscriber = await createPostgresEventBus({ db: context.db() })
    const buses: EventBus[] = [publisher, subscriber]
    try {
      const topic = `big-${randomUUID()}`
      const received: unknown[] = []
      await subscriber.subscribe(topic, (payload) => received.push(payload))
      const big = { text: 'Привет 👋 '.repeat(2_000), n: 2 }

      await publisher.publish(topic, { n: 1 })
      await publisher.publish(topic, big)
      await publisher.publish(topic, { n: 3 })

      await waitFor(() => received.length === 3, 'three messages')
      expect(received).toEqual([{ n: 1 }, big, { n: 3 }])
    } finally {
      await Promise.all(buses.map((bus) => bus.close()))
    }
  })

  it('does not close the database when the storage or a bus closes', async () => {
    const bus = await createPostgresEventBus({ db: context.db() })
    await bus.close()
    const rows = await context.db().query<{ one: number }>('SELECT 1 AS one')
    expect(rows).toEqual([{ one: 1 }])
  })

  it('deletes webhook log entries beyond the kept ones in batches, and never lists them meanwhile', async () => {
    const storage = context.storage()
    const { companyId, integration } = await seedChannel(storage, { type: 'msgplatform' })
    const kept = WEBHOOK_LOGS_KEPT_PER_INTEGRATION
    const rowsOfIntegration = async () =>
      Number(
        (
          await context
            .db()
            .query<{ count: unknown }>(
              'SELECT count(*) AS count FROM webhook_logs WHERE integration_id = $1',
              [integration.id],
            )
        )[0]?.count,
      )
    const listed = async () => {
      let count = 0
      let cursor: string | undefined
      for (;;) {
        const page = await storage.webhookLogs.list({
          companyId,
          integrationId: integration.id,
          limit: 100,
          cursor,
        })
        count += page.items.length
        if (page.nextCursor === null) return count
        cursor = page.nextCursor
      }
    }
    const start = Date.parse('2026-01-01T00:00:00Z')
    let most = 0
    for (let index = 0; index < kept + 300; index++) {
      await storage.webhookLogs.add({
        id: randomUUID(),
        companyId,
        integrationId: integration.id,
        receivedAt: new Date(start + index),
        httpStatus: 200,
        outcome: 'queued',
      })
      if (index >= kept) most = Math.max(most, await rowsOfIntegration())
      if (index === kept + 150) expect(await listed()).toBe(kept)
    }

    // Trimmed at least once in 300 adds past the limit, and never far beyond it.
    expect(most).toBeGreaterThan(kept)
    expect(most).toBeLessThanOrEqual(kept + 64)
    expect(await rowsOfIntegration()).toBeLessThan(kept + 64)
    expect(await listed()).toBe(kept)
  })

  // 2,600 inserts one after the other: under 1 s on an idle machine, 12 s seen on a loaded one.
  it('trims the webhook log of every integration, also of two whose webhooks arrive in turn', async () => {
    const storage = context.storage()
    const first = await seedChannel(storage, { type: 'msgplatform' })
    const second = await seedChannel(storage, { type: 'msgplatform', companyId: first.companyId })
    const kept = WEBHOOK_LOGS_KEPT_PER_INTEGRATION
    const rowsOf = async (integrationId: string) =>
      Number(
        (
          await context
            .db()
            .query<{ count: unknown }>(
              'SELECT count(*) AS count FROM webhook_logs WHERE integration_id = $1',
              [integrationId],
            )
        )[0]?.count,
      )
    const start = Date.parse('2026-01-01T00:00:00Z')
    // One after the other, as a platform delivering to two integrations in turn sends them: each
    // integration's entries then draw every other number of the table's insertion counter.
    for (let index = 0; index < kept + 300; index++) {
      for (const { integration } of [first, second]) {
        await storage.webhookLogs.add({
          id: randomUUID(),
          companyId: first.companyId,
          integrationId: integration.id,
          receivedAt: new Date(start + index),
          httpStatus: 200,
          outcome: 'queued',
        })
      }
    }

    expect(await rowsOf(first.integration.id)).toBeLessThanOrEqual(kept + 64)
    expect(await rowsOf(second.integration.id)).toBeLessThanOrEqual(kept + 64)
  }, 60_000)

  it('deletes expired webhook delivery ids of every integration, also of two whose webhooks arrive in turn', async () => {
    const storage = context.storage()
    const first = await seedChannel(storage, { type: 'msgplatform' })
    const second = await seedChannel(storage, { type: 'msgplatform', companyId: first.companyId })
    const start = Date.parse('2026-01-01T00:00:00Z')
    const recordInTurn = async (at: Date, prefix: string) => {
      for (let index = 0; index < 200; index++) {
        for (const { integration } of [first, second]) {
          const deliveryId = `${prefix}-${index}`
          expect(
            await storage.webhookDeliveries.record({ integrationId: integration.id, deliveryId, at }),
          ).toBe(true)
        }
      }
    }
    await recordInTurn(new Date(start), 'old')
    await recordInTurn(new Date(start + WEBHOOK_DELIVERIES_KEPT_MS + 1), 'new')
    const expired = async (integrationId: string) =>
      Number(
        (
          await context
            .db()
            .query<{ count: unknown }>(
              'SELECT count(*) AS count FROM webhook_deliveries WHERE integration_id = $1 AND received_at = $2',
              [integrationId, new Date(start).toISOString()],
            )
        )[0]?.count,
      )

    expect(await expired(first.integration.id)).toBe(0)
    expect(await expired(second.integration.id)).toBe(0)
  })
}
