import { randomBytes, randomUUID } from 'node:crypto'
import { Socket } from 'node:net'
import {
  createAccounts,
  createAgentService,
  createIntegrationService,
  createMemoryKnowledgeIndex,
  createOfflineProvider,
  createSwitchboard,
  createSystemClock,
  type JobLease,
  type KnowledgeIndex,
  type Session,
  type Storage,
  TransactionConflictError,
} from '@switchboard/core'
import {
  createFakePasswordHasher,
  createFakeTokenSigner,
  createRecordingConnector,
  runEventBusConformance,
  runJobQueueConformance,
  runKnowledgeIndexConformance,
  runStorageConformance,
  seedChannel,
} from '@switchboard/core/testing'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { DbRow } from '../src/db.js'
import {
  createPgDb,
  createPostgresEventBus,
  createPostgresKnowledgeIndex,
  createPostgresStorage,
  type Db,
  type DbClient,
  MIGRATIONS,
  migrate,
} from '../src/index.js'
import { createJobQueue } from '../src/storage/job-queue.js'
import { createMessageRepository } from '../src/storage/message-repository.js'
import { createOutboxRepository } from '../src/storage/outbox-repository.js'
import { createSessionRepository } from '../src/storage/session-repository.js'
import { runAdapterCases } from './support/adapter-cases.js'
import { runDurabilityCases } from './support/durability-cases.js'

const connectionString = process.env.DATABASE_URL
/** PostgreSQL's type oid of numeric. */
const NUMERIC_OID = 1700

/**
 * Every run gets a schema of its own, so runs sharing the server see neither rows nor channels of
 * another. A test that cuts connections names its pool, to find that pool's server processes.
 */
function connectTo(schema: string, max = 10, applicationName?: string): Db {
  return createPgDb({
    connectionString,
    max,
    options: `-c search_path=${schema}`,
    application_name: applicationName,
  })
}

describe.runIf(connectionString !== undefined && connectionString !== '')('PostgreSQL', () => {
  const schema = `switchboard_test_${randomBytes(6).toString('hex')}`
  let admin: Db
  let db: Db
  let secondDb: Db
  let storage: Storage
  let knowledge: KnowledgeIndex

  beforeAll(async () => {
    admin = createPgDb({ connectionString, max: 2 })
    await admin.query(`CREATE SCHEMA ${schema}`)
    db = connectTo(schema)
    secondDb = connectTo(schema, 2)
    storage = await createPostgresStorage({ db })
    knowledge = await createPostgresKnowledgeIndex({ db })
  })

  afterAll(async () => {
    await storage?.close()
    await Promise.all([db?.close(), secondDb?.close()])
    await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin?.close()
  })

  const shared = { cleanup: async () => {} }

  runStorageConformance('PostgreSQL', () => storage, shared)
  runJobQueueConformance('PostgreSQL', () => storage, shared)
  runEventBusConformance('PostgreSQL', () => createPostgresEventBus({ db }), {
    // Another pool with its own LISTEN connection, as another process would have.
    createSecondBus: () => createPostgresEventBus({ db: secondDb }),
  })
  runKnowledgeIndexConformance('PostgreSQL', () => knowledge)

  describe('a transaction left idle', () => {
    // A process that stalls mid-transaction (a frozen event loop, a network cut the server does not
    // see) would hold its rows and session locks until TCP gave up, hours later: every other
    // process's work on those sessions would wait that long.
    it('is ended by the server after a minute by default, freeing what it held', async () => {
      const [row] = await db.query<{ timeout: string }>('SELECT current_setting($1) AS timeout', [
        'idle_in_transaction_session_timeout',
      ])
      expect(row?.timeout).toBe('1min')
    })

    it('is ended after the time the caller sets, and its locks are free for others', async () => {
      const stalling = createPgDb({
        connectionString,
        max: 1,
        options: `-c search_path=${schema}`,
        idle_in_transaction_session_timeout: 200,
      })
      try {
        const stalled = stalling.transaction(async (tx) => {
          await tx.query('SELECT pg_advisory_xact_lock(42, 4242)')
          await new Promise((resolve) => setTimeout(resolve, 800))
          await tx.query('SELECT 1')
        })
        await expect(stalled).rejects.toThrow()
        const taken = await db.transaction(async (tx) => {
          const [row] = await tx.query<{ locked: boolean }>(
            'SELECT pg_try_advisory_xact_lock(42, 4242) AS locked',
          )
          return row?.locked
        })
        expect(taken).toBe(true)
      } finally {
        await stalling.close()
      }
    })
  })

  describe('PostgreSQL adapter', () => {
    runAdapterCases({ db: () => db, storage: () => storage })
    runDurabilityCases({ db: () => db, storage: () => storage, otherDb: () => secondDb })

    it('runs statements with parameters past the number it prepares, each with its own text', async () => {
      const pool = connectTo(schema, 1)
      try {
        // One connection, so every statement lands where the earlier ones were prepared.
        const sums = await Promise.all(
          Array.from({ length: 1_050 }, (_, index) =>
            pool.query<{ sum: number }>(`SELECT $1::integer + ${index} AS sum`, [1]),
          ),
        )
        expect(sums.map(([row]) => row?.sum)).toEqual(Array.from({ length: 1_050 }, (_, index) => index + 1))
        const again = await pool.transaction((client) =>
          client.query<{ sum: number }>('SELECT $1::integer + 7 AS sum', [2]),
        )
        expect(again).toEqual([{ sum: 9 }])
      } finally {
        await pool.close()
      }
    })

    /** A pool of one connection whose numeric values `parse` parses, the other types as pg does. */
    const poolParsingNumeric = (parse: (value: string) => unknown): Db =>
      createPgDb({
        connectionString,
        max: 1,
        options: `-c search_path=${schema}`,
        types: {
          getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
            oid === NUMERIC_OID
              ? parse
              : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
        },
      })

    it("builds rows with the pool's own type parsers, nulls kept, columns in order, alone and in a transaction", async () => {
      const pool = poolParsingNumeric((value) => `numeric ${value}`)
      try {
        const sql =
          'SELECT $1::numeric AS amount, NULL::text AS note, $2::integer AS count, $3::jsonb AS facts'
        const expected = [{ amount: 'numeric 1.5', note: null, count: 7, facts: { plan: 'pro' } }]
        expect(await pool.query(sql, ['1.5', 7, '{"plan":"pro"}'])).toEqual(expected)
        expect(await pool.transaction((client) => client.query(sql, ['1.5', 7, '{"plan":"pro"}']))).toEqual(
          expected,
        )
        const rows = await pool.query<{ n: number; label: string }>(
          'SELECT n, $1 || n AS label FROM generate_series(1, 3) AS n ORDER BY n',
          ['row '],
        )
        expect(rows).toEqual([
          { n: 1, label: 'row 1' },
          { n: 2, label: 'row 2' },
          { n: 3, label: 'row 3' },
        ])
        expect(rows.map((row) => Object.keys(row))).toEqual([
          ['n', 'label'],
          ['n', 'label'],
          ['n', 'label'],
        ])
      } finally {
        await pool.close()
      }
    })

    it("fails a statement whose value a type parser cannot parse with the parser's error, and goes on serving", async () => {
      const pool = poolParsingNumeric((value) => {
        throw new Error(`cannot parse ${value}`)
      })
      try {
        await expect(pool.query('SELECT $1::numeric AS amount', ['2.5'])).rejects.toThrow('cannot parse 2.5')
        await expect(
          pool.transaction((client) => client.query('SELECT $1::numeric AS amount', ['3.5'])),
        ).rejects.toThrow('cannot parse 3.5')
        expect(await pool.query('SELECT $1::integer AS count', [4])).toEqual([{ count: 4 }])
      } finally {
        await pool.close()
      }
    })

    it('keeps a column named __proto__ as an own property of its row, as pg does, alone and in a transaction', async () => {
      const pool = connectTo(schema, 1)
      try {
        const sql = 'SELECT $1::integer AS id, $2::jsonb AS "__proto__", $3::text AS note'
        const params = [1, '{"isAdmin":true}', 'x']
        for (const rows of [
          await pool.query<DbRow>(sql, params),
          await pool.transaction((client) => client.query<DbRow>(sql, params)),
        ]) {
          const row = rows[0]!
          expect(Object.keys(row)).toEqual(['id', '__proto__', 'note'])
          expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toEqual({ isAdmin: true })
          expect(Object.getPrototypeOf(row)).toBe(Object.prototype)
          expect((row as { isAdmin?: unknown }).isAdmin).toBeUndefined()
        }
      } finally {
        await pool.close()
      }
    })

    /** Socket writes of `body`'s transactions on a pool of one connection, connected beforehand. */
    const socketWritesOf = async (body: (pool: Db) => Promise<void>): Promise<number> => {
      const pool = connectTo(schema, 1)
      const socket = Socket.prototype as unknown as Record<'_write' | '_writev', (...args: unknown[]) => void>
      const { _write: write, _writev: writev } = socket
      let writes = 0
      try {
        await pool.query('SELECT 1') // connected before counting
        socket._write = function (this: unknown, ...args: unknown[]) {
          writes += 1
          return write.apply(this, args)
        }
        socket._writev = function (this: unknown, ...args: unknown[]) {
          writes += 1
          return writev.apply(this, args)
        }
        await body(pool)
        return writes
      } finally {
        socket._write = write
        socket._writev = writev
        await pool.close()
      }
    }

    const sumsOf = (client: DbClient) =>
      Promise.all([
        client.query<{ sum: number }>('SELECT $1::integer + 1 AS sum', [1]),
        client.query<{ sum: number }>('SELECT $1::integer + 2 AS sum', [1]),
      ])

    it('sends BEGIN and the statements a transaction starts together in one socket write', async () => {
      const writes = await socketWritesOf(async (pool) => {
        expect(await pool.transaction(sumsOf)).toEqual([[{ sum: 2 }], [{ sum: 3 }]])
      })
      // BEGIN with both statements, then COMMIT.
      expect(writes).toBe(2)
    })

    it('sends COMMIT with the statements started before commitBehindStatements(), in one socket write with BEGIN', async () => {
      const late: unknown[] = []
      const writes = await socketWritesOf(async (pool) => {
        const sums = await pool.transaction(async (client) => {
          const both = sumsOf(client)
          client.commitBehindStatements?.()
          // Too late: COMMIT has gone out.
          await client.query('SELECT 1').catch((error: unknown) => late.push(error))
          return both
        })
        expect(sums).toEqual([[{ sum: 2 }], [{ sum: 3 }]])
      })
      expect(writes).toBe(1)
      expect(String(late[0])).toMatch(/already over/)
    })

    it('commits nothing of the statements started before commitBehindStatements() when one fails', async () => {
      const table = `behind_${randomBytes(4).toString('hex')}`
      await db.query(`CREATE TABLE ${table} (id integer PRIMARY KEY)`)
      try {
        const failed = await db
          .transaction(async (client) => {
            const both = Promise.all([
              client.query(`INSERT INTO ${table} (id) VALUES ($1)`, [1]),
              client.query(`INSERT INTO ${table} (id) VALUES ($1)`, [1]),
            ])
            client.commitBehindStatements?.()
            return both
          })
          .catch((error: unknown) => error)
        expect((failed as { code?: string }).code).toBe('23505')
        expect(await db.query(`SELECT id FROM ${table}`)).toEqual([])
        // The connection went back to the pool in a state fit for the next transaction.
        await db.transaction((client) => client.query(`INSERT INTO ${table} (id) VALUES ($1)`, [2]))
        expect(await db.query(`SELECT id FROM ${table}`)).toEqual([{ id: 2 }])
      } finally {
        await db.query(`DROP TABLE ${table}`)
      }
    })

    it('commits the calls made before noMoreCalls() without waiting for the function to return', async () => {
      const emailKey = `no-more-calls-${randomUUID()}`
      let release: () => void = () => {}
      const held = new Promise<void>((resolve) => {
        release = resolve
      })
      const done = storage.transaction(async (tx) => {
        const recording = tx.loginFailures.record({ emailKey, at: new Date() })
        tx.noMoreCalls?.()
        await recording
        await held
      })
      try {
        // Seen from another connection while the function still waits.
        await vi.waitFor(
          async () => expect(await storage.loginFailures.count({ emailKey, since: new Date(0) })).toBe(1),
          { timeout: 2000 },
        )
      } finally {
        release()
        await done
      }
    })

    /**
     * A storage in a schema of its own on one connection, so that the test sees the plans that
     * connection caches from the first statement on; the schema is dropped afterwards.
     */
    const withFreshStorage = async (
      prefix: string,
      body: (fresh: { schema: string; pool: Db; storage: Storage }) => Promise<void>,
    ): Promise<void> => {
      const schema = `${prefix}_${randomBytes(6).toString('hex')}`
      await admin.query(`CREATE SCHEMA ${schema}`)
      const pool = connectTo(schema, 1)
      const freshStorage = await createPostgresStorage({ db: pool })
      try {
        await body({ schema, pool, storage: freshStorage })
      } finally {
        await freshStorage.close()
        await pool.close()
        await admin.query(`DROP SCHEMA ${schema} CASCADE`)
      }
    }

    it('migrates an empty schema once when two processes start at the same moment', async () => {
      const fresh = `switchboard_migrate_${randomBytes(6).toString('hex')}`
      await admin.query(`CREATE SCHEMA ${fresh}`)
      const first = connectTo(fresh, 2)
      const second = connectTo(fresh, 2)
      try {
        const results = await Promise.all([migrate({ db: first }), migrate({ db: second })])
        expect(results.map((result) => result.applied).sort()).toEqual([
          [],
          MIGRATIONS.map((migration) => migration.version),
        ])
        expect(await migrate({ db: first })).toEqual({ applied: [] })
        const rows = await first.query<{ version: number }>('SELECT version FROM schema_migrations')
        expect(rows.map((row) => Number(row.version)).sort()).toEqual(
          MIGRATIONS.map((migration) => migration.version),
        )
      } finally {
        await Promise.all([first.close(), second.close()])
        await admin.query(`DROP SCHEMA ${fresh} CASCADE`)
      }
    })

    it('finds messages by external id and sessions by customer reading only their rows, whatever plan the connection cached while the tables were small', async () => {
      // A new database's first webhooks prepare these statements on nearly empty tables; PostgreSQL
      // may then keep a generic plan for the connection's life. One that read all of an integration's
      // rows made each webhook batch slower as the tables grew.
      await withFreshStorage('switchboard_plans', async ({ schema: fresh, pool, storage: freshStorage }) => {
        const { companyId, agent, integration } = await seedChannel(freshStorage)
        const integrationId = integration.id
        const lookUp = (client: DbClient) =>
          Promise.all([
            createMessageRepository(client).findByExternalIds({
              integrationId,
              externalIds: ['m-7', 'm-none'],
            }),
            createSessionRepository(client).findOpenMany({ integrationId, clientIds: ['c-7', 'c-none'] }),
          ])
        // Ingest's inserts read each of their sessions, to store messages only while they are open.
        let openSessions: Session[] = []
        const again = (session: Session) => ({
          id: randomUUID(),
          companyId,
          sessionId: session.id,
          integrationId,
          role: 'customer' as const,
          text: 'again',
          at,
        })
        const insertIntoOpen = async (client: DbClient) => {
          const messages = createMessageRepository(client)
          await messages.insertMany(openSessions.map(again), { intoOpenSession: true })
          await messages.insert(again(openSessions[0]!), { intoOpenSession: true })
        }
        const at = new Date()
        const store = async (from: number, to: number) => {
          const sessions: Session[] = []
          for (let index = from; index < to; index++) {
            sessions.push(
              await createSession(freshStorage, {
                companyId,
                integrationId,
                agentId: agent.id,
                at,
                clientId: `c-${index}`,
              }),
            )
          }
          await freshStorage.messages.insertMany(
            sessions.map((session, position) => ({
              id: randomUUID(),
              companyId,
              sessionId: session.id,
              integrationId,
              role: 'customer' as const,
              text: 'hello',
              at,
              externalId: `m-${from + position}`,
            })),
          )
        }
        // A few rows, then past the five custom plans after which PostgreSQL may settle on a
        // generic one for the connection, then many more rows.
        await store(0, 50)
        openSessions = (await freshStorage.sessions.list({ companyId, limit: 2 })).items
        for (let time = 0; time < 8; time++) await Promise.all([lookUp(pool), insertIntoOpen(pool)])
        await store(50, 300)
        openSessions = (await freshStorage.sessions.list({ companyId, limit: 2 })).items

        const { found, read } = await pool.transaction(async (client) => {
          const tuplesRead = async () => {
            const rows = await client.query<{ relname: string; tuples: string }>(
              `SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS tuples
              FROM pg_stat_xact_user_tables WHERE schemaname = $1`,
              [fresh],
            )
            return new Map(rows.map((row) => [row.relname, Number(row.tuples)]))
          }
          const before = await tuplesRead()
          const found = await lookUp(client)
          const afterLookUp = await tuplesRead()
          await insertIntoOpen(client)
          const afterInsert = await tuplesRead()
          const read = (table: string, from: Map<string, number>, to: Map<string, number>) =>
            (to.get(table) ?? 0) - (from.get(table) ?? 0)
          return {
            found,
            read: {
              messages: read('messages', before, afterLookUp),
              sessions: read('sessions', before, afterLookUp),
              // Each message's session once to lock it (once per session for the batch), and once for
              // the message's foreign key: 2 + 2 for the batch of two, 1 + 1 for the one after it.
              sessionsByInserts: read('sessions', afterLookUp, afterInsert),
            },
          }
        })
        expect(found[0].map((message) => message.externalId)).toEqual(['m-7'])
        expect(found[1].map((session) => session.customer.clientId)).toEqual(['c-7'])
        expect(read).toEqual({ messages: 1, sessions: 1, sessionsByInserts: 6 })
      })
    })

    it('leases a job under a backlog reading a handful of rows, whatever plan the connection cached while the queue was short', async () => {
      await withFreshStorage('switchboard_lease', async ({ schema: fresh, pool, storage: freshStorage }) => {
        const queue = (client: DbClient) =>
          createJobQueue({ client, channel: 'unused', listeners: { add: () => () => undefined } })
        const { companyId, agent, integration } = await seedChannel(freshStorage)
        const at = new Date('2026-03-01T10:00:00.000Z')
        const backlog = async (customers: number, messagesEach: number) => {
          const sessions: Session[] = []
          for (let index = 0; index < customers; index++) {
            sessions.push(
              await createSession(freshStorage, {
                companyId,
                integrationId: integration.id,
                agentId: agent.id,
                at,
              }),
            )
          }
          // Interleaved, as messages of many customers arrive.
          for (let round = 0; round < messagesEach; round++) {
            await freshStorage.transaction(async (tx) => {
              const messages = await tx.messages.insertMany(
                sessions.map((session) => ({
                  id: randomUUID(),
                  companyId,
                  sessionId: session.id,
                  integrationId: integration.id,
                  role: 'customer' as const,
                  text: 'hello',
                  at,
                })),
              )
              await tx.jobs.enqueueMany(
                messages.map((message) => ({
                  companyId,
                  sessionId: message.sessionId,
                  messageId: message.id,
                  availableAt: at,
                })),
              )
            })
          }
        }
        await backlog(3, 1)
        // Nothing is due this early: each lease finds nothing, and the connection settles on a plan.
        for (let time = 0; time < 8; time++) {
          expect(
            await queue(pool).lease({ now: new Date(0), leaseMs: 60_000, token: `early-${time}` }),
          ).toBeNull()
        }
        await backlog(60, 5)
        // The oldest heads are taken by other workers.
        for (let worker = 0; worker < 5; worker++) {
          expect(
            await queue(pool).lease({ now: at, leaseMs: 60_000, token: `busy-${worker}` }),
          ).not.toBeNull()
        }

        const { lease, read } = await pool.transaction(async (client) => {
          const tuplesRead = async () => {
            const [row] = await client.query<{ tuples: string }>(
              `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS tuples
              FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
              [fresh],
            )
            return Number(row?.tuples ?? 0)
          }
          const before = await tuplesRead()
          const lease = await queue(client).lease({ now: at, leaseMs: 60_000, token: 'measured' })
          return { lease, read: (await tuplesRead()) - before }
        })
        expect(lease).not.toBeNull()
        // 318 jobs are queued; the lease looks at the few oldest, not at all of them.
        expect(read).toBeLessThanOrEqual(30)
      })
    })

    it("claims due outbox heads reading each session's head once, not all of its waiting messages per candidate", async () => {
      // A session whose head waits for a retry while its later replies pile up behind it: every
      // later reply is a due candidate, and the head of its session was found by reading and sorting
      // all of the session's rows, once per candidate.
      await withFreshStorage('switchboard_outbox', async ({ schema: fresh, pool, storage: freshStorage }) => {
        const { companyId, agent, integration } = await seedChannel(freshStorage)
        const at = new Date('2026-03-01T10:00:00.000Z')
        const session = await createSession(freshStorage, {
          companyId,
          integrationId: integration.id,
          agentId: agent.id,
          at,
        })
        const waiting = 300
        for (let index = 0; index < waiting; index++) {
          await freshStorage.transaction(async (tx) => {
            const message = await tx.messages.insert({
              id: randomUUID(),
              companyId,
              sessionId: session.id,
              integrationId: integration.id,
              role: 'agent',
              text: `reply ${index}`,
              at,
              delivery: 'pending',
            })
            await tx.outbox.add({
              messageId: message.id,
              sessionId: session.id,
              companyId,
              integrationId: integration.id,
              availableAt: at,
            })
          })
        }
        const [head] = await freshStorage.outbox.claimDue({
          now: at,
          limit: 10,
          leaseMs: 30_000,
          leaseToken: 'first',
        })
        expect(
          await freshStorage.outbox.retryLater({
            messageId: head!.messageId,
            leaseToken: 'first',
            attempts: 1,
            availableAt: new Date(at.getTime() + 8_000),
          }),
        ).toBe(true)

        const { claimed, read } = await pool.transaction(async (client) => {
          const tuplesRead = async () => {
            const [row] = await client.query<{ tuples: string }>(
              `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS tuples
              FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname = 'outbox'`,
              [fresh],
            )
            return Number(row?.tuples ?? 0)
          }
          const before = await tuplesRead()
          const claimed = await createOutboxRepository(client).claimDue({
            now: new Date(at.getTime() + 1_000),
            limit: 10,
            leaseMs: 30_000,
            leaseToken: 'measured',
          })
          return { claimed, read: (await tuplesRead()) - before }
        })
        expect(claimed).toEqual([])
        // Each of the 299 due candidates looks its session's head up in one probe.
        expect(read).toBeLessThanOrEqual(4 * waiting)
      })
    })

    it('hears of jobs enqueued through another pool, as another process would enqueue them', async () => {
      const other = await createPostgresStorage({ db: secondDb })
      let woken = 0
      const stop = storage.jobs.onAvailable(() => {
        woken += 1
      })
      try {
        const company = await other.companies.create({
          companyName: 'Wake',
          publicId: randomUUID(),
          at: new Date(),
        })
        const session = await openSession(other, company.id)
        await receive(other, session)
        await expect.poll(() => woken, { timeout: 5_000 }).toBeGreaterThan(0)
        // Done with, so the next test's workers find only their own jobs due.
        const leased = await storage.jobs.lease({ now: new Date(), leaseMs: 30_000, token: 'wake' })
        expect(leased?.sessionId).toBe(session.id)
        expect(await storage.jobs.complete({ jobId: leased!.jobId, token: 'wake' })).toBe(true)
      } finally {
        stop()
        await other.close()
      }
    })

    it('listens again when its LISTEN connection is cut, as when the server restarts', async () => {
      const channel = `switchboard_jobs__${schema}`
      let woken = 0
      const stop = storage.jobs.onAvailable(() => {
        woken += 1
      })
      try {
        const terminated = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity
          WHERE query ~ $1 AND pg_terminate_backend(pid)`,
          [`^(UN)?LISTEN switchboard_[a-z]+__${schema}$`],
        )
        // This storage's connection, and the second pool's if an earlier test made it listen.
        expect(terminated.length).toBeGreaterThan(0)
        const deadline = Date.now() + 10_000
        while (woken === 0 && Date.now() < deadline) {
          await secondDb.notify(channel, '')
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        expect(woken).toBeGreaterThan(0)
      } finally {
        stop()
      }
    })

    it('tells event bus subscriptions they may have missed messages once their cut LISTEN connection is back', async () => {
      // What was published while the connection was down is not replayed: a subscriber that must
      // not miss anything (a webchat socket) catches up from storage when it is told.
      const applicationName = `switchboard_missed_${randomBytes(4).toString('hex')}`
      const cut = connectTo(schema, 2, applicationName)
      const bus = await createPostgresEventBus({ db: cut })
      const publisher = await createPostgresEventBus({ db: secondDb })
      try {
        const heard: unknown[] = []
        const missed: string[] = []
        const stopFirst = await bus.subscribe('first', (payload) => heard.push(payload), {
          onMissed: () => missed.push('first'),
        })
        await bus.subscribe('second', () => undefined, { onMissed: () => missed.push('second') })
        await stopFirst()
        await bus.subscribe('first', (payload) => heard.push(payload))
        const terminated = await admin.query(
          `SELECT pid FROM pg_stat_activity
          WHERE application_name = $1 AND query LIKE 'LISTEN %' AND pg_terminate_backend(pid)`,
          [applicationName],
        )
        expect(terminated).toHaveLength(1)
        // Only the subscriptions still live that asked to be told.
        await expect.poll(() => missed, { timeout: 10_000 }).toEqual(['second'])
        await publisher.publish('first', { after: 'the reconnect' })
        await expect.poll(() => heard, { timeout: 5_000 }).toEqual([{ after: 'the reconnect' }])
      } finally {
        await bus.close()
        await publisher.close()
        await cut.close()
      }
    })

    it('fails a transaction whose connection is cut, with nothing thrown where nobody can catch it', async () => {
      // An uncaught error event would crash a server whose database restarts mid-transaction;
      // vitest reports it as an unhandled error and fails the run.
      const applicationName = `switchboard_cut_${randomBytes(4).toString('hex')}`
      const cut = connectTo(schema, 2, applicationName)
      try {
        const running = cut.transaction(async (client) => {
          await client.query('SELECT 1')
          await client.query('SELECT pg_sleep(30)')
        })
        running.catch(() => {})
        await expect
          .poll(
            async () =>
              (
                await admin.query(
                  `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE '%pg_sleep%'`,
                  [applicationName],
                )
              ).length,
            { timeout: 5_000, interval: 20 },
          )
          .toBe(1)
        await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
          [applicationName],
        )
        await expect(running).rejects.toThrow(/terminat/)
        // Give the broken connection's events their turn before the test ends.
        await new Promise((resolve) => setTimeout(resolve, 100))
        expect(await cut.query('SELECT 1 AS one')).toEqual([{ one: 1 }])
      } finally {
        await cut.close()
      }
    })

    it('never lets two workers of two processes hold one session, under concurrent ingest and leasing', async () => {
      const processes = [storage, await createPostgresStorage({ db: secondDb })]
      const company = await storage.companies.create({
        companyName: 'Load',
        publicId: randomUUID(),
        at: new Date(),
      })
      const sessions: Session[] = []
      for (let index = 0; index < 30; index++) sessions.push(await openSession(storage, company.id))

      // Both processes receive messages of every session at once, so enqueues of one session race.
      const receiving = Promise.all(
        sessions.flatMap((session, index) =>
          Array.from({ length: 5 }, (_, turn) => receive(processes[(index + turn) % 2]!, session)),
        ),
      )

      const holders = new Map<string, string>()
      const processed = new Map<string, number[]>(sessions.map((session) => [session.id, []]))
      const violations: string[] = []
      const total = sessions.length * 5
      let done = 0
      let tokens = 0
      const worker = async (queue: Storage): Promise<void> => {
        const deadline = Date.now() + 30_000
        while (done < total && Date.now() < deadline) {
          tokens += 1
          const token = `token-${tokens}`
          const leased: JobLease | null = await queue.jobs.lease({ now: new Date(), leaseMs: 30_000, token })
          if (leased === null) {
            await new Promise((resolve) => setTimeout(resolve, 2))
            continue
          }
          const holder = holders.get(leased.sessionId)
          if (holder !== undefined)
            violations.push(`${leased.sessionId} leased to ${token} while ${holder} held it`)
          holders.set(leased.sessionId, token)
          const message = await queue.messages.get({ id: leased.messageId })
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 3))
          processed.get(leased.sessionId)!.push(message!.sequence)
          holders.delete(leased.sessionId)
          const completed = await queue.transaction((tx) => tx.jobs.complete({ jobId: leased.jobId, token }))
          if (!completed) violations.push(`${token} lost its lease`)
          done += 1
        }
      }
      await Promise.all([
        receiving,
        ...Array.from({ length: 12 }, (_, index) => worker(processes[index % 2]!)),
      ])
      await processes[1]!.close()

      expect(violations).toEqual([])
      expect(done).toBe(total)
      for (const session of sessions) {
        const sequences = processed.get(session.id)!
        expect(sequences).toHaveLength(5)
        // In arrival order: the order the messages committed in, which their sequence numbers follow.
        expect(sequences).toEqual([...sequences].sort((left, right) => left - right))
        expect(await storage.jobs.pending({ sessionId: session.id })).toBe(0)
      }
    })

    /** The agent and integration services on this storage, and a company of their own. */
    const servicesOfNewCompany = async (companyName: string) => {
      const clock = createSystemClock()
      const agents = createAgentService({ storage, clock })
      const integrations = createIntegrationService({
        storage,
        clock,
        connectors: () => undefined,
        publicUrl: 'https://chat.example.com',
      })
      const company = await storage.companies.create({ companyName, publicId: randomUUID(), at: new Date() })
      return { agents, integrations, company }
    }

    // An integration whose entry agent was deleted cannot open a session: every webhook to it failed.
    it('never lets an agent be deleted while an integration or another agent starts naming it', async () => {
      const { agents, integrations, company } = await servicesOfNewCompany('Races')
      const landed: string[] = []
      for (let round = 0; round < 15; round += 1) {
        const target = (await agents.create(company.id, { name: `target ${round}` }))._unsafeUnwrap()
        const naming = (await agents.create(company.id, { name: `naming ${round}` }))._unsafeUnwrap()
        const [deleted, integration, handoff] = await Promise.all([
          agents.delete(company.id, target.id),
          integrations.create(company.id, {
            type: 'webchat',
            name: `chat ${round}`,
            entryAgentId: target.id,
            config: {},
          }),
          agents.update(company.id, naming.id, { handoff: { enabled: true, allowedTargets: [target.id] } }),
        ])
        if (deleted.isOk() && (integration.isOk() || handoff.isOk())) landed.push(`round ${round}`)
      }

      expect(landed).toEqual([])
    })

    // A PATCH merges the handoff, routing settings or config it is given into what it read. Two at
    // once each merged into the same copy, and the second commit wrote the first one's change away,
    // though both answered 200 (the memory storage, one transaction at a time, kept both).
    it('keeps both of two PATCHes of one agent, or of one integration, sent at once', async () => {
      const { agents, integrations, company } = await servicesOfNewCompany('Edits at once')
      const agent = (await agents.create(company.id, { name: 'Edited' }))._unsafeUnwrap()
      const integration = (
        await integrations.create(company.id, {
          type: 'msgplatform',
          name: 'Platform',
          entryAgentId: agent.id,
          config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'token-0' },
        })
      )._unsafeUnwrap()
      const lost: string[] = []
      for (let round = 1; round <= 10; round += 1) {
        await Promise.all([
          agents.update(company.id, agent.id, { handoff: { enabled: round % 2 === 1 } }),
          agents.update(company.id, agent.id, { handoff: { messageHistoryDepth: 10 + round } }),
          agents.update(company.id, agent.id, { routingConfig: { enabled: round % 2 === 1 } }),
          agents.update(company.id, agent.id, { routingConfig: { confidenceThreshold: round / 20 } }),
          integrations.update(company.id, integration.id, { config: { apiToken: `token-${round}` } }),
          integrations.update(company.id, integration.id, {
            config: { apiBaseUrl: `https://platform.example.com/${round}` },
          }),
        ])
        const edited = (await storage.agents.get({ companyId: company.id, id: agent.id }))!
        if (edited.handoff.enabled !== (round % 2 === 1) || edited.handoff.messageHistoryDepth !== 10 + round)
          lost.push(`round ${round}: handoff ${JSON.stringify(edited.handoff)}`)
        if (
          edited.routingConfig?.enabled !== (round % 2 === 1) ||
          edited.routingConfig.confidenceThreshold !== round / 20
        )
          lost.push(`round ${round}: routing ${JSON.stringify(edited.routingConfig)}`)
        const { config } = (await storage.integrations.get({ id: integration.id }))!
        if (
          config.apiToken !== `token-${round}` ||
          config.apiBaseUrl !== `https://platform.example.com/${round}`
        )
          lost.push(`round ${round}: config ${JSON.stringify(config)}`)
      }

      expect(lost).toEqual([])
    })

    // Logout revoked the login's tokens that its statement saw; a refresh committing its successor
    // meanwhile left that one out of sight, and the stolen chain lived on after the logout.
    it('leaves no refresh token of a login usable after a logout that raced a refresh', async () => {
      const accounts = createAccounts({
        storage,
        hasher: createFakePasswordHasher(),
        signer: createFakeTokenSigner({ secret: 'race-secret' }),
      })
      const email = `racer-${randomUUID()}@example.com`
      await accounts.register({ email, password: 'password one', companyName: 'Racers' })
      const survivors: number[] = []
      for (let round = 0; round < 30; round += 1) {
        const { session } = (await accounts.login({ email, password: 'password one' }))._unsafeUnwrap()
        const principal = (await accounts.authenticate(`Bearer ${session.access_token}`))._unsafeUnwrap()
        const [refreshed] = await Promise.all([
          accounts.refresh({ refreshToken: session.refresh_token }),
          accounts.logout(principal),
        ])
        if (refreshed.isErr()) continue
        const next = await accounts.refresh({ refreshToken: refreshed.value.session.refresh_token })
        if (next.isOk()) survivors.push(round)
      }
      expect(survivors).toEqual([])
    })

    // Logins sent at once often record the same millisecond; each success or turned-away attempt
    // takes back one record. Left behind, they added up to a lockout of a right password.
    it('forgets one login failure per call when attempts of the same millisecond forget at once', async () => {
      const emailKey = `burst-${randomUUID()}@example.com`
      const at = new Date()
      for (let index = 0; index < 8; index += 1) await storage.loginFailures.record({ emailKey, at })

      await Promise.all(Array.from({ length: 8 }, () => storage.loginFailures.forget({ emailKey, at })))

      expect(await storage.loginFailures.count({ emailKey, since: new Date(at.getTime() - 1000) })).toBe(0)
    })

    // A writer of a reference holds the agents it names against their delete, not against their
    // edits: agents naming each other (or themselves) are edited at once without a deadlock.
    it('edits agents that name each other, or themselves, at once without an error', async () => {
      const agents = createAgentService({ storage, clock: createSystemClock() })
      const company = await storage.companies.create({
        companyName: 'Edits',
        publicId: randomUUID(),
        at: new Date(),
      })
      const failures: string[] = []
      for (let round = 0; round < 12; round += 1) {
        const first = (await agents.create(company.id, { name: `first ${round}` }))._unsafeUnwrap()
        const second = (
          await agents.create(company.id, {
            name: `second ${round}`,
            handoff: {
              enabled: true,
              allowedTargets: [first.id, ...(round % 2 === 0 ? [] : [0])].filter(Boolean),
            },
          })
        )._unsafeUnwrap()
        await agents.update(company.id, first.id, {
          handoff: { enabled: true, allowedTargets: [second.id, first.id] },
        })
        const outcomes = await Promise.allSettled([
          agents.update(company.id, first.id, { handoff: { enabled: false } }),
          agents.update(company.id, second.id, { handoff: { enabled: false } }),
          agents.update(company.id, first.id, { handoff: { enabled: true } }),
        ])
        for (const outcome of outcomes) {
          if (outcome.status === 'rejected') failures.push(`round ${round}: ${String(outcome.reason)}`)
          else if (outcome.value.isErr()) failures.push(`round ${round}: ${outcome.value.error.code}`)
        }
      }

      expect(failures).toEqual([])
    })

    // Core runs such a transaction again (updateSession, an operator's message) instead of
    // answering 500: PostgreSQL gives up one of two transactions waiting for each other.
    it("rejects a deadlock's victim with core's TransactionConflictError, its cause kept", async () => {
      const table = `deadlock_${randomBytes(4).toString('hex')}`
      await db.query(`CREATE TABLE ${table} (id integer PRIMARY KEY, n integer NOT NULL)`)
      try {
        await db.query(`INSERT INTO ${table} (id, n) VALUES (1, 0), (2, 0)`)
        const first = deferred()
        const second = deferred()
        const crossing = (mine: number, theirs: number, locked: () => void, wait: Promise<void>) =>
          db.transaction(async (client) => {
            await client.query(`UPDATE ${table} SET n = n + 1 WHERE id = $1`, [mine])
            locked()
            await wait
            await client.query(`UPDATE ${table} SET n = n + 1 WHERE id = $1`, [theirs])
          })

        const outcomes = await Promise.allSettled([
          crossing(1, 2, first.resolve, second.promise),
          crossing(2, 1, second.resolve, first.promise),
        ])

        const failures = outcomes.flatMap((outcome) =>
          outcome.status === 'rejected' ? [outcome.reason] : [],
        )
        expect(failures).toHaveLength(1)
        expect(TransactionConflictError.isInstance(failures[0])).toBe(true)
        expect(((failures[0] as Error).cause as { code?: string }).code).toBe('40P01')
      } finally {
        await db.query(`DROP TABLE ${table}`)
      }
    })

    // Every writer of a session takes its advisory lock before its row: an operator's message and
    // a turn's commit insert (the lock) then read or save the row; ingest following a customer to
    // another channel saved the row first, and with either of them waited in a circle.
    it('saves a session and inserts its messages in either order without deadlocking another writer', async () => {
      const company = await storage.companies.create({
        companyName: 'Locks',
        publicId: randomUUID(),
        at: new Date(),
      })
      const session = await openSession(storage, company.id)
      const inserted = deferred()
      const saved = deferred()
      const message = (role: 'operator' | 'customer') => ({
        id: randomUUID(),
        companyId: company.id,
        sessionId: session.id,
        integrationId: session.integrationId,
        role,
        text: role,
        at: new Date(),
        ...(role === 'operator' ? { delivery: 'pending' as const } : {}),
      })
      const operator = storage.transaction(async (tx) => {
        await tx.messages.insert(message('operator'))
        inserted.resolve()
        await saved.promise
        // Long enough for the other to be waiting on this one's lock.
        await new Promise((resolve) => setTimeout(resolve, 200))
        return tx.sessions.get({ id: session.id, lock: true })
      })
      const ingest = storage.transaction(async (tx) => {
        await inserted.promise
        const followed = tx.sessions.save({
          ...session,
          customer: { ...session.customer, channelId: 'another' },
        })
        saved.resolve()
        await followed
        await tx.messages.insertMany([message('customer')])
      })

      const outcomes = await Promise.allSettled([operator, ingest])

      expect(
        outcomes.map((outcome) => (outcome.status === 'rejected' ? String(outcome.reason) : 'ok')),
      ).toEqual(['ok', 'ok'])
      expect((await storage.sessions.get({ id: session.id }))?.customer.channelId).toBe('another')
    })

    it('stores a message from another channel though another process saved its session between its read and its save', async () => {
      const { integration } = await seedChannel(storage)
      const opened = await storage.transaction((tx) =>
        tx.sessions.create({
          id: randomUUID(),
          companyId: integration.companyId,
          integrationId: integration.id,
          customer: { clientId: 'busy', channelId: 'sms' },
          state: 'ongoing',
          activeAgentId: integration.entryAgentId,
          entryAgentId: integration.entryAgentId,
          metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
          createdAt: new Date().toISOString(),
          updatedAt: new Date().toISOString(),
        }),
      )
      // Before each store's first save of the session, another process commits a save of its own
      // (a turn's commit, say): every attempt finds the version it read gone.
      let raced = 0
      const racing: Db = {
        ...db,
        transaction: (fn) =>
          db.transaction((client) => {
            let first = true
            return fn({
              async query(sql, params) {
                if (first && /^\s*UPDATE sessions/.test(sql)) {
                  first = false
                  raced += 1
                  await secondDb.query('UPDATE sessions SET version = version + 1 WHERE id = $1::uuid', [
                    opened.id,
                  ])
                }
                return client.query(sql, params)
              },
            })
          }),
        close: async () => {},
      }
      const racingStorage = await createPostgresStorage({ db: racing })
      const switchboard = createSwitchboard({
        storage: racingStorage,
        model: createOfflineProvider(),
        knowledge: createMemoryKnowledgeIndex(),
        concurrency: 0,
      })
      try {
        const stored = await switchboard.ingest({
          integrationId: integration.id,
          clientId: 'busy',
          text: 'from whatsapp now',
          channelId: 'whatsapp',
        })
        expect(raced).toBeGreaterThan(0)
        expect(stored._unsafeUnwrap().session.id).toBe(opened.id)
        expect((await storage.sessions.get({ id: opened.id }))?.customer.channelId).toBe('whatsapp')
        expect(await storage.jobs.pending({ sessionId: opened.id })).toBe(1)
      } finally {
        await switchboard.stop()
        await racingStorage.close()
        // Done with: no later test's workers should find this job due.
        await db.query(`UPDATE jobs SET state = 'done' WHERE session_id = $1::uuid`, [opened.id])
      }
    })

    // A customer's message and an operator's close (or the platform's close_dialog) at once: ingest
    // read the session open, the close committed while the message's insert waited for the
    // session's lock, and the message was stored in the closed session, where no turn answers it.
    describe("a message that races its session's close", () => {
      /** Another process whose next transaction, once armed, holds its commit until told. */
      const processHoldingItsCommit = async () => {
        let hold: { held(pid: number): void; commit: Promise<void> } | undefined
        const holding: Db = {
          ...secondDb,
          transaction: (fn) =>
            secondDb.transaction(async (client) => {
              const result = await fn(client)
              const armed = hold
              hold = undefined
              if (armed !== undefined) {
                const [row] = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
                armed.held(row!.pid)
                await armed.commit
              }
              return result
            }),
          close: async () => {},
        }
        const storage = await createPostgresStorage({ db: holding })
        const switchboard = createSwitchboard({
          storage,
          model: createOfflineProvider(),
          knowledge: createMemoryKnowledgeIndex(),
          concurrency: 0,
        })
        return {
          switchboard,
          /** Runs `change` up to its commit; resolves with the pid of its connection, and `commit`. */
          async holdCommitOf<T>(change: () => Promise<T>) {
            let held = (_pid: number) => {}
            const holding = new Promise<number>((resolve) => {
              held = resolve
            })
            const commit = deferred()
            hold = { held, commit: commit.promise }
            const outcome = change()
            return { pid: await holding, commit: commit.resolve, outcome }
          },
          async stop() {
            await switchboard.stop()
            await storage.close()
          },
        }
      }

      /** Resolves once a message insert waits for a lock that the connection `pid` holds. */
      const insertWaitingFor = async (pid: number) => {
        for (let attempt = 0; attempt < 500; attempt += 1) {
          const [row] = await admin.query<{ waiting: string }>(
            `SELECT count(*) AS waiting FROM pg_stat_activity
            WHERE $1::integer = ANY(pg_blocking_pids(pid)) AND query LIKE '%INSERT INTO messages%'`,
            [pid],
          )
          if (Number(row?.waiting) > 0) return
          await new Promise((resolve) => setTimeout(resolve, 10))
        }
        throw new Error('no message insert waited for the other process')
      }

      type InsertHook = (insert: () => Promise<DbRow[]>, sql: string) => Promise<DbRow[]>

      /** Whether a statement inserts customer messages (ingest's), not replies or operator messages. */
      const storesCustomerMessages = (sql: string, params: readonly unknown[] | undefined): boolean =>
        /\bINSERT INTO messages\b/.test(sql) &&
        (params?.[4] === 'customer' || String(params?.[0]).includes('"role":"customer"'))

      /** A switchboard on `db` whose customer message inserts run through `hooks`, the first one each. */
      const switchboardWithInsertHooks = async () => {
        const hooks: InsertHook[] = []
        const hooked: Db = {
          ...db,
          transaction: (fn) =>
            db.transaction((client) => {
              // Statements started after a hooked insert are sent after it, as ingest sent them.
              let sentBefore: Promise<void> = Promise.resolve()
              return fn({
                query(sql, params) {
                  const earlier = sentBefore
                  const hook = storesCustomerMessages(sql, params) ? hooks.shift() : undefined
                  if (hook === undefined) return earlier.then(() => client.query(sql, params))
                  const sent = deferred()
                  sentBefore = sent.promise
                  const insert = () => {
                    const inserting = client.query(sql, params)
                    sent.resolve()
                    return inserting
                  }
                  return earlier.then(() => hook(insert, sql)) as Promise<never>
                },
              })
            }),
          close: async () => {},
        }
        const storage = await createPostgresStorage({ db: hooked })
        const connector = createRecordingConnector()
        const switchboard = createSwitchboard({
          storage,
          model: createOfflineProvider(),
          knowledge: createMemoryKnowledgeIndex(),
          connectors: [connector],
        })
        return {
          switchboard,
          connector,
          hooks,
          async stop() {
            await switchboard.stop()
            await storage.close()
          },
        }
      }

      /**
       * The hook that closes `session` in the other process while the insert is under way: the
       * close saves the session, the insert is sent and waits for its lock, then the close commits.
       */
      const closingMeanwhile = (
        other: Awaited<ReturnType<typeof processHoldingItsCommit>>,
        session: Session,
        raced: string[],
      ): InsertHook => {
        return async (insert, sql) => {
          const close = await other.holdCommitOf(() =>
            other.switchboard.sessions.close({ companyId: session.companyId, sessionId: session.id }),
          )
          const inserting = insert()
          inserting.catch(() => {})
          await insertWaitingFor(close.pid)
          close.commit()
          expect((await close.outcome).isOk()).toBe(true)
          raced.push(sql.includes('jsonb_to_recordset') ? 'insertMany' : 'insert')
          return inserting
        }
      }

      /**
       * A lone message's store, held until the messages after it have queued: they are then stored
       * together as one batch, and the close of `session` in `other` races that batch's insert.
       * Returns the lone store and `release`, to call once the batch's messages are ingested.
       */
      const holdLoneStoreThenRaceAClose = async (
        receiving: Awaited<ReturnType<typeof switchboardWithInsertHooks>>,
        integrationId: string,
        close: InsertHook,
      ) => {
        const queued = deferred()
        receiving.hooks.push(async (insert) => {
          await queued.promise
          return insert()
        }, close)
        const lone = receiving.switchboard.ingest({ integrationId, clientId: 'lone', text: 'hi' })
        await new Promise((resolve) => setTimeout(resolve, 20))
        return { lone, release: queued.resolve }
      }

      /** The racing message ('are you there?') left the closed session alone and was answered in its own. */
      async function expectAnsweredInANewSession(
        receiving: { connector: { sent: readonly { sessionId: string; role: string }[] } },
        stored: { session: { id: string } },
        closedSessionId: string,
      ): Promise<void> {
        expect(stored.session.id).not.toBe(closedSessionId)
        const closedSession = await storage.messages.list({ sessionId: closedSessionId, limit: 10 })
        expect(closedSession.map((message) => message.text)).not.toContain('are you there?')
        const replies = receiving.connector.sent.filter((sent) => sent.sessionId === stored.session.id)
        expect(replies.map((sent) => sent.role)).toEqual(['agent'])
      }

      it('is stored in a new session and answered there when the close commits first, alone', async () => {
        const { integration } = await seedChannel(storage)
        const other = await processHoldingItsCommit()
        const receiving = await switchboardWithInsertHooks()
        try {
          const customer = { integrationId: integration.id, clientId: 'closing' }
          const first = (await receiving.switchboard.ingest({ ...customer, text: 'hello' }))._unsafeUnwrap()
          await receiving.switchboard.idle()
          const raced: string[] = []
          receiving.hooks.push(closingMeanwhile(other, first.session, raced))

          const racing = await receiving.switchboard.ingest({ ...customer, text: 'are you there?' })
          await receiving.switchboard.idle()

          expect(raced).toEqual(['insert'])
          expect(racing._unsafeUnwrap().queued).toBe(true)
          await expectAnsweredInANewSession(receiving, racing._unsafeUnwrap(), first.session.id)
        } finally {
          await receiving.stop()
          await other.stop()
        }
      })

      it('is stored in a new session and answered there when the close commits first, in a batch', async () => {
        const { integration } = await seedChannel(storage)
        const other = await processHoldingItsCommit()
        const receiving = await switchboardWithInsertHooks()
        try {
          const closing = { integrationId: integration.id, clientId: 'closing' }
          const first = (await receiving.switchboard.ingest({ ...closing, text: 'hello' }))._unsafeUnwrap()
          await receiving.switchboard.idle()
          const raced: string[] = []
          const { lone, release } = await holdLoneStoreThenRaceAClose(
            receiving,
            integration.id,
            closingMeanwhile(other, first.session, raced),
          )
          const together = [
            receiving.switchboard.ingest({ ...closing, text: 'are you there?' }),
            receiving.switchboard.ingest({ integrationId: integration.id, clientId: 'beside', text: 'hey' }),
          ]
          release()
          const [, racing, beside] = await Promise.all([lone, ...together])
          await receiving.switchboard.idle()

          expect(raced).toEqual(['insertMany'])
          expect(beside!.isOk()).toBe(true)
          await expectAnsweredInANewSession(receiving, racing!._unsafeUnwrap(), first.session.id)
        } finally {
          await receiving.stop()
          await other.stop()
        }
      })

      // The batch is refused as a whole and stored again message by message: a customer's messages
      // side by side raced each other for the new session and landed, and were answered, out of
      // order (c1, c4, c2, c5, c3).
      it("stores each message of a refused batch once and in order, the closed customer's in one new session", async () => {
        const { integration } = await seedChannel(storage)
        const other = await processHoldingItsCommit()
        const receiving = await switchboardWithInsertHooks()
        try {
          const closing = { integrationId: integration.id, clientId: 'closing-many' }
          const beside = { integrationId: integration.id, clientId: 'beside-many' }
          const first = (await receiving.switchboard.ingest({ ...closing, text: 'hello' }))._unsafeUnwrap()
          const besideSession = (
            await receiving.switchboard.ingest({ ...beside, text: 'b0' })
          )._unsafeUnwrap().session
          await receiving.switchboard.idle()
          const raced: string[] = []
          const { lone, release } = await holdLoneStoreThenRaceAClose(
            receiving,
            integration.id,
            closingMeanwhile(other, first.session, raced),
          )
          const texts = ['c1', 'b1', 'c2', 'b2', 'c3', 'b3', 'c4', 'b4', 'c5', 'b5']
          const together = texts.map((text) =>
            receiving.switchboard.ingest({ ...(text.startsWith('c') ? closing : beside), text }),
          )
          release()
          const [, ...stored] = await Promise.all([lone, ...together])
          await receiving.switchboard.idle()

          expect(raced).toEqual(['insertMany'])
          const sessionIds = stored.map((result) => result._unsafeUnwrap().session.id)
          const opened = sessionIds[0]!
          expect(opened).not.toBe(first.session.id)
          expect(sessionIds).toEqual(texts.map((text) => (text.startsWith('c') ? opened : besideSession.id)))
          const customerTexts = async (sessionId: string) =>
            (await storage.messages.list({ sessionId, limit: 100 }))
              .filter((message) => message.role === 'customer')
              .map((message) => message.text)
          expect(await customerTexts(first.session.id)).toEqual(['hello'])
          expect(await customerTexts(opened)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5'])
          expect(await customerTexts(besideSession.id)).toEqual(['b0', 'b1', 'b2', 'b3', 'b4', 'b5'])
        } finally {
          await receiving.stop()
          await other.stop()
        }
      })
    })
  })
})

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve = () => {}
  const promise = new Promise<void>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

async function openSession(storage: Storage, companyId: number): Promise<Session> {
  const at = new Date()
  const { agent, integration } = await seedChannel(storage, { companyId, type: 'webchat', at })
  return createSession(storage, { companyId, integrationId: integration.id, agentId: agent.id, at })
}

/** An ongoing session with the agent active, new to its customer (a random one unless named). */
function createSession(
  storage: Storage,
  options: { companyId: number; integrationId: string; agentId: number; at: Date; clientId?: string },
): Promise<Session> {
  const { companyId, integrationId, agentId, at } = options
  return storage.sessions.create({
    id: randomUUID(),
    companyId,
    integrationId,
    customer: { clientId: options.clientId ?? randomUUID() },
    state: 'ongoing',
    activeAgentId: agentId,
    entryAgentId: agentId,
    metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
    createdAt: at.toISOString(),
    updatedAt: at.toISOString(),
  })
}

/** Ingest's shape: the message and its job in one transaction. */
async function receive(storage: Storage, session: Session): Promise<void> {
  await storage.transaction(async (tx) => {
    const at = new Date()
    const message = await tx.messages.insert({
      id: randomUUID(),
      companyId: session.companyId,
      sessionId: session.id,
      integrationId: session.integrationId,
      role: 'customer',
      text: 'hello',
      at,
    })
    await tx.jobs.enqueue({
      companyId: session.companyId,
      sessionId: session.id,
      messageId: message.id,
      availableAt: at,
    })
  })
}
