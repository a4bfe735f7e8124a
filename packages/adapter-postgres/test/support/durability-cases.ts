import { randomUUID } from 'node:crypto'
import {
  type Completion,
  createMemoryKnowledgeIndex,
  createSwitchboard,
  type HumanTransferOutcome,
  type Integration,
  type LlmProvider,
  type Storage,
  type Switchboard,
} from '@switchboard/core'
import {
  createManualClock,
  createRecordingConnector,
  createScriptedModel,
  handoff,
  reply,
  seedChannel,
} from '@switchboard/core/testing'
import { expect, it } from 'vitest'
import {
  createPostgresStorage,
  type Db,
  type DbClient,
  type DbRow,
  type TransactionClient,
} from '../../src/index.js'
import { seedHandoffToHuman } from './seed-handoff-to-human.js'

export interface DurabilityCaseContext {
  readonly db: () => Db
  readonly storage: () => Storage
  /** Another connection pool on the same database, as a second process would have; else `db`. */
  readonly otherDb?: () => Db
}

const LEASE_MS = 30_000
const CENTURY_MS = 100 * 365 * 24 * 3600 * 1000
const usage = { inputTokens: 10, outputTokens: 5 }

/**
 * The storage is shared with the conformance suites, and a switchboard's workers take any due job
 * of the database: jobs other tests left queued are leased for a century, so these tests' workers
 * only ever see their own.
 */
async function parkLeftoverJobs(storage: Storage): Promise<void> {
  // A day ahead, so a job due a little later (a retry's backoff) is parked as well.
  const now = new Date(Date.now() + 24 * 3600 * 1000)
  while ((await storage.jobs.lease({ now, leaseMs: CENTURY_MS, token: `parked-${randomUUID()}` })) !== null) {
    // Each lease parks one job; the loop ends when none is due.
  }
}

async function seed(storage: Storage): Promise<{ companyId: number; integration: Integration }> {
  const { companyId, integration } = await seedChannel(storage)
  return { companyId, integration }
}

function deferred<T = void>() {
  let resolve: (value: T) => void = () => {}
  const promise = new Promise<T>((settle) => {
    resolve = settle
  })
  return { promise, resolve }
}

/**
 * The most buffer pages any node of an `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` plan read; a node
 * counts its children's. A temporary table's pages are local buffers.
 */
function mostPagesRead(plan: unknown): number {
  if (Array.isArray(plan)) return Math.max(0, ...plan.map(mostPagesRead))
  if (plan === null || typeof plan !== 'object') return 0
  const node = plan as Record<string, unknown>
  const own =
    Number(node['Shared Hit Blocks'] ?? 0) +
    Number(node['Shared Read Blocks'] ?? 0) +
    Number(node['Local Hit Blocks'] ?? 0) +
    Number(node['Local Read Blocks'] ?? 0)
  return Math.max(own, ...Object.values(node).map(mostPagesRead))
}

/**
 * A `Db` whose statements and transactions fail once it is "down", as when the server stops or
 * the network breaks. It goes down by itself at the first statement matching `goDownAt`, so the
 * failure lands in the middle of a transaction that already wrote something.
 */
function createFailingDb(db: Db) {
  let down = false
  let goDownAt: RegExp | null = null
  const failIfDown = (sql: string) => {
    if (goDownAt?.test(sql)) {
      down = true
      goDownAt = null
    }
    if (down) throw new Error('Connection terminated unexpectedly')
  }
  const wrap = (client: DbClient): DbClient => ({
    async query<Row extends object = DbRow>(sql: string, params?: readonly unknown[]) {
      failIfDown(sql)
      return client.query<Row>(sql, params)
    },
  })
  // A transaction's early COMMIT goes the way its statements went: not out once the "connection"
  // is down, as it could not leave a broken one either.
  const wrapTransaction = (client: TransactionClient): TransactionClient => {
    const { commitBehindStatements } = client
    return commitBehindStatements === undefined
      ? wrap(client)
      : {
          ...wrap(client),
          commitBehindStatements: () => {
            if (!down) commitBehindStatements()
          },
        }
  }
  const failing: Db = {
    kind: db.kind,
    query: <Row extends object = DbRow>(sql: string, params?: readonly unknown[]) =>
      wrap(db).query<Row>(sql, params),
    async transaction(fn) {
      if (down) throw new Error('Connection terminated unexpectedly')
      return db.transaction((client) => fn(wrapTransaction(client)))
    },
    listen: (channel, handler) => db.listen(channel, handler),
    notify: (channel, payload) => db.notify(channel, payload),
    // The real database belongs to the test file.
    close: async () => {},
  }
  return {
    db: failing,
    failFrom(statement: RegExp) {
      goDownAt = statement
    },
    comeBack() {
      down = false
      goDownAt = null
    },
  }
}

/**
 * A `Db` whose next transaction, once armed, answers its caller with a lost connection as it is
 * about to commit, and commits all the same a moment later: the answer to COMMIT was lost while
 * the server still worked on it (a standby confirming it, a network that broke on the way back).
 * It commits once the give-back of a job has been answered, or after 200 ms.
 */
function createLateCommitDb(db: Db) {
  let armed = false
  let commit: (() => void) | null = null
  const late: Db = {
    kind: db.kind,
    async query<Row extends object = DbRow>(sql: string, params?: readonly unknown[]) {
      const rows = await db.query<Row>(sql, params)
      if (/^UPDATE jobs SET leased_until/.test(sql)) commit?.()
      return rows
    },
    transaction(fn) {
      if (!armed) return db.transaction(fn)
      armed = false
      return new Promise((_resolve, reject) => {
        db.transaction(async (client) => {
          const result = await fn(client)
          reject(new Error('Connection terminated unexpectedly'))
          await new Promise<void>((resolve) => {
            commit = resolve
            setTimeout(resolve, 200)
          })
          return result
        }).catch(reject)
      })
    },
    listen: (channel, handler) => db.listen(channel, handler),
    notify: (channel, payload) => db.notify(channel, payload),
    // The real database belongs to the test file.
    close: async () => {},
  }
  return {
    db: late,
    arm() {
      armed = true
    },
  }
}

/** Durability promises of the runtime on this adapter, on either driver. */
export function runDurabilityCases(context: DurabilityCaseContext): void {
  it('fences a worker whose lease was taken over: its late turn writes nothing and sends nothing', async () => {
    const storage = context.storage()
    await parkLeftoverJobs(storage)
    const { companyId, integration } = await seed(storage)
    const otherStorage =
      context.otherDb === undefined ? storage : await createPostgresStorage({ db: context.otherDb() })

    // The stale worker saves a fact, then stalls in its second model call until the test lets go.
    const stalled = deferred()
    const letGo = deferred()
    const staleModel: LlmProvider = {
      name: 'stalling',
      async complete(request): Promise<Completion> {
        const last = request.messages[request.messages.length - 1]
        if (last?.role !== 'tool') {
          const call = { id: 'call_fact', name: 'save_fact', arguments: '{"key":"late","value":"yes"}' }
          return { text: '', toolCalls: [call], usage }
        }
        stalled.resolve()
        await letGo.promise
        return { text: 'late reply', toolCalls: [], usage }
      },
    }
    const takeoverModel: LlmProvider = {
      name: 'prompt',
      complete: async () => ({ text: 'on-time reply', toolCalls: [], usage }),
    }
    // Manual clocks: the stale worker never renews its lease, and the other one lives a lease
    // later, so the lease has expired for it without the test waiting.
    const staleClock = createManualClock(new Date())
    const laterClock = createManualClock(new Date(Date.now() + 2 * LEASE_MS))
    const staleConnector = createRecordingConnector()
    const takeoverConnector = createRecordingConnector()
    const switchboards: Switchboard[] = []
    try {
      const stale = createSwitchboard({
        storage,
        model: staleModel,
        knowledge: createMemoryKnowledgeIndex(),
        connectors: [staleConnector],
        clock: staleClock,
        leaseMs: LEASE_MS,
        concurrency: 1,
      })
      switchboards.push(stale)
      const ingested = await stale.ingest({ integrationId: integration.id, clientId: 'customer', text: 'hi' })
      const sessionId = ingested._unsafeUnwrap().session.id
      await stalled.promise

      const takeover = createSwitchboard({
        storage: otherStorage,
        model: takeoverModel,
        knowledge: createMemoryKnowledgeIndex(),
        connectors: [takeoverConnector],
        clock: laterClock,
        leaseMs: LEASE_MS,
        concurrency: 1,
      })
      switchboards.push(takeover)
      await expect.poll(() => takeoverConnector.sent.length, { timeout: 10_000 }).toBe(1)
      await takeover.idle()

      letGo.resolve()
      await stale.idle()

      expect(takeoverConnector.sent.map((sent) => sent.text)).toEqual(['on-time reply'])
      expect(staleConnector.sent).toEqual([])
      const messages = await storage.messages.list({ sessionId, limit: 10 })
      expect(messages.map((message) => [message.role, message.text])).toEqual([
        ['customer', 'hi'],
        ['agent', 'on-time reply'],
      ])
      const session = await storage.sessions.get({ id: sessionId })
      expect(session?.metadata.sharedContext.facts).toEqual({})
      // One model call was charged: the turn that committed. The stale turn made two.
      const charged = await storage.billing.listUsage({ companyId, limit: 10 })
      expect(charged.items).toHaveLength(1)
      expect(await storage.jobs.pending({ sessionId })).toBe(0)
    } finally {
      letGo.resolve()
      await Promise.all(switchboards.map((switchboard) => switchboard.stop()))
      if (otherStorage !== storage) await otherStorage.close()
    }
  })

  it('leases with work proportional to the backlog, not its square, before the table has statistics', async () => {
    // A burst leaves many sessions with several queued messages each. PGlite never analyzes a
    // table (it has no autovacuum), nor has a server before its first autoanalyze; a lease whose
    // plan depended on statistics compared every queued job with every other: about 0.1 s per
    // lease with a thousand queued on PGlite, all the while holding its only connection.
    const storage = context.storage()
    const db = context.db()
    await parkLeftoverJobs(storage)
    const { companyId, integration } = await seed(storage)
    await db.query(
      `WITH opened AS (
        INSERT INTO sessions (id, company_id, integration_id, client_id, customer, state, active_agent_id,
          entry_agent_id, metadata, created_at, updated_at, version)
        SELECT gen_random_uuid(), $1, $2::bigint, 'backlog-' || n, jsonb_build_object('clientId', 'backlog-' || n),
          'ongoing', 1, 1, '{"agentPath":[],"sharedContext":{"facts":{},"journey":[]},"errors":[]}'::json, now(), now(), 1
        FROM generate_series(1, 200) AS n
        RETURNING id
      ), received AS (
        INSERT INTO messages (id, company_id, session_id, integration_id, role, text, at)
        SELECT gen_random_uuid(), $1, opened.id, $2::bigint, 'customer', 'backlog', now()
        FROM opened, generate_series(1, 5)
        RETURNING id, session_id, sequence
      )
      INSERT INTO jobs (company_id, session_id, message_id, available_at)
      SELECT $1, session_id, id, now() - interval '1 minute' FROM received ORDER BY sequence`,
      [companyId, integration.id],
    )
    // The lease statement as the queue sends it, to measure what it reads.
    let leaseStatement: { sql: string; params: readonly unknown[] } | null = null
    const recording: Db = {
      ...db,
      query: <Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) => {
        if (/^\s*UPDATE jobs SET lease_token/.test(sql)) leaseStatement = { sql, params }
        return db.query<Row>(sql, params)
      },
    }
    const recordingStorage = await createPostgresStorage({ db: recording })
    try {
      const queued = await storage.jobs.pending({})
      expect(queued).toBeGreaterThanOrEqual(1000)
      expect(
        await recordingStorage.jobs.lease({ now: new Date(), leaseMs: LEASE_MS, token: 'measured' }),
      ).not.toBeNull()
      const { sql, params } = leaseStatement!
      // EXPLAIN ANALYZE runs the lease; the transaction rolls it back.
      let plan: unknown
      await db
        .transaction(async (client) => {
          const [row] = await client.query<Record<string, unknown>>(
            `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`,
            params,
          )
          plan = Object.values(row ?? {})[0]
          throw new Error('roll back')
        })
        .catch(() => {})
      const pagesRead = mostPagesRead(typeof plan === 'string' ? JSON.parse(plan) : plan)
      // Linear plans read about three pages per queued job, or a handful in all; the quadratic one
      // read twelve per job at this size, and more the longer the queue.
      expect(pagesRead).toBeGreaterThan(0)
      expect(pagesRead).toBeLessThan(6 * queued)
    } finally {
      await recordingStorage.close()
      await db.query(`UPDATE jobs SET state = 'done' WHERE company_id = $1 AND state = 'queued'`, [companyId])
    }
  })

  it('completes a job with work independent of the backlog, on a plan made while the queue was nearly empty', async () => {
    // A connection keeps the generic plan of a prepared statement, chosen while the database was
    // new. Completing a job looks for its session's next one; planned as a semi-join on a nearly
    // empty queue, that read every queued job of every session on each completion.
    const storage = context.storage()
    const db = context.db()
    await parkLeftoverJobs(storage)
    const { companyId, integration } = await seed(storage)
    const [queued] = await db.query<{ session_id: string; message_id: string }>(
      `WITH opened AS (
        INSERT INTO sessions (id, company_id, integration_id, client_id, customer, state, active_agent_id,
          entry_agent_id, metadata, created_at, updated_at, version)
        VALUES (gen_random_uuid(), $1, $2::bigint, 'finish', '{"clientId":"finish"}', 'ongoing', 1, 1,
          '{"agentPath":[],"sharedContext":{"facts":{},"journey":[]},"errors":[]}'::json, now(), now(), 1)
        RETURNING id
      ), received AS (
        INSERT INTO messages (id, company_id, session_id, integration_id, role, text, at)
        SELECT gen_random_uuid(), $1, opened.id, $2::bigint, 'customer', 'hello', now() FROM opened
        RETURNING id, session_id
      )
      INSERT INTO jobs (company_id, session_id, message_id, available_at)
      SELECT $1, session_id, id, now() - interval '1 minute' FROM received
      RETURNING session_id, message_id`,
      [companyId, integration.id],
    )
    // The completion statement as the queue sends it, to measure what it reads.
    let finishStatement: { sql: string; params: readonly unknown[] } | null = null
    const recording: Db = {
      ...db,
      transaction: (fn) =>
        db.transaction((client) =>
          fn({
            query: <Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) => {
              if (/^\s*WITH finished AS/.test(sql)) finishStatement = { sql, params }
              return client.query<Row>(sql, params)
            },
          }),
        ),
    }
    const recordingStorage = await createPostgresStorage({ db: recording })
    try {
      const leased = (await storage.jobs.lease({ now: new Date(), leaseMs: LEASE_MS, token: 'measured' }))!
      expect(leased.messageId).toBe(queued!.message_id)
      expect(
        await recordingStorage.transaction((tx) =>
          tx.jobs.complete({ jobId: leased.jobId, token: 'measured' }),
        ),
      ).toBe(true)
      const { sql, params } = finishStatement!
      // EXECUTE takes its arguments as SQL text: a utility statement has no parameters of its own.
      const literals = params.map((value) =>
        value === null ? 'NULL' : `'${String(value).replaceAll("'", "''")}'`,
      )
      let plan: unknown
      await db
        .transaction(async (client) => {
          // A queue of this transaction's own, found first on the search path, holding only the job,
          // on which the statement is planned once for every call; then a backlog of 2,000 jobs of
          // other sessions.
          await client.query('CREATE TEMPORARY TABLE jobs (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES)')
          await client.query(`SET LOCAL plan_cache_mode = force_generic_plan`)
          await client.query(`PREPARE measured_finish (bigint, text, text, text, text) AS ${sql}`)
          await client.query(
            `INSERT INTO jobs (id, company_id, session_id, message_id, available_at, lease_token)
            VALUES ($1::bigint, $2, $3::uuid, gen_random_uuid(), now(), $4)`,
            [leased.jobId, companyId, queued!.session_id, 'measured'],
          )
          // The generic plan is made at the first EXECUTE; this one finds no job to complete.
          await client.query(`EXECUTE measured_finish (${['0', ...literals.slice(1)].join(', ')})`)
          await client.query(
            `INSERT INTO jobs (company_id, session_id, message_id, available_at)
            SELECT $1, gen_random_uuid(), gen_random_uuid(), now() FROM generate_series(1, 2000)`,
            [companyId],
          )
          const [row] = await client.query<Record<string, unknown>>(
            `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE measured_finish (${literals.join(', ')})`,
          )
          plan = Object.values(row ?? {})[0]
          throw new Error('roll back')
        })
        .catch(() => {})
      // What executing it read; planning is left out.
      const [explained] = (typeof plan === 'string' ? JSON.parse(plan) : plan) as [{ Plan: unknown }]
      const pagesRead = mostPagesRead(explained.Plan)
      // The update reads about a dozen pages (its row, its index entries) and the probe of the
      // session's queue a few; the semi-join read every queued job's index entry and row, about 55
      // pages in all at this size, and more the longer the queue.
      expect(pagesRead).toBeGreaterThan(0)
      expect(pagesRead).toBeLessThan(30)
    } finally {
      await recordingStorage.close()
    }
  })

  it("charges a turn's usage last in its commit, so the company's balance row stays locked only until COMMIT", async () => {
    // Every turn of a company updates its one balance row. Charged earlier, the row stays locked
    // while the rest of the turn is written, and the company's turns queue on it, each holding a
    // pooled connection that ingest then waits for.
    const storage = context.storage()
    await parkLeftoverJobs(storage)
    const { integration } = await seed(storage)
    const transactions: string[][] = []
    const db = context.db()
    const recording: Db = {
      ...db,
      transaction: (fn) =>
        db.transaction((client) => {
          const statements: string[] = []
          transactions.push(statements)
          return fn({
            query: <Row extends object = DbRow>(sql: string, params?: readonly unknown[]) => {
              statements.push(sql.replace(/\s+/g, ' ').trim())
              return client.query<Row>(sql, params)
            },
          })
        }),
    }
    const recordingStorage = await createPostgresStorage({ db: recording })
    const switchboard = createSwitchboard({
      storage: recordingStorage,
      model: { name: 'prompt', complete: async () => ({ text: 'reply', toolCalls: [], usage }) },
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [createRecordingConnector()],
      clock: createManualClock(new Date()),
    })
    try {
      await switchboard.ingest({ integrationId: integration.id, clientId: 'charged', text: 'hi' })
      await switchboard.idle()
      const commit = transactions.find((statements) =>
        statements.some((sql) => sql.includes('usage_records')),
      )
      expect(commit, 'the transaction that charged the turn').toBeDefined()
      const charge = commit!.findIndex((sql) => sql.includes('usage_records'))
      expect(commit!.slice(charge + 1)).toEqual([])
      expect(commit!.some((sql) => sql.startsWith('UPDATE sessions'))).toBe(true)
    } finally {
      await switchboard.stop()
      await recordingStorage.close()
    }
  })

  it('leaves no operator message of a closed session pending when it raced the close', async () => {
    const storage = context.storage()
    // Deliveries never claim anything, so what is checked is what the two transactions committed:
    // no sender marks a message blocked or sent on their behalf.
    const undelivered: Storage = {
      ...storage,
      outbox: { ...storage.outbox, claim: async () => null, claimDue: async () => [] },
    }
    const { companyId, integration } = await seed(storage)
    const switchboard = createSwitchboard({
      storage: undelivered,
      model: { name: 'unused', complete: async () => ({ text: '', toolCalls: [], usage }) },
      knowledge: createMemoryKnowledgeIndex(),
      clock: createManualClock(new Date()),
      concurrency: 0,
    })
    try {
      const outcomes = await Promise.all(
        Array.from({ length: 40 }, async (_, index) => {
          const opened = await switchboard.openSession({
            integrationId: integration.id,
            clientId: `c${index}`,
          })
          const sessionId = opened._unsafeUnwrap().id
          const target = { companyId, sessionId }
          const [closed, ...sent] = await Promise.all([
            switchboard.sessions.close(target),
            ...Array.from({ length: 3 }, (_, message) =>
              switchboard.sessions.sendOperatorMessage({ ...target, text: `operator ${message}` }),
            ),
          ])
          return { sessionId, closed, sent }
        }),
      )

      for (const { sessionId, closed, sent } of outcomes) {
        expect(closed.isOk()).toBe(true)
        for (const result of sent) {
          if (result.isErr()) expect(result.error.code).toBe('INVALID_STATE')
        }
        const messages = await storage.messages.list({ sessionId, limit: 10 })
        const accepted = sent.filter((result) => result.isOk()).length
        expect(messages).toHaveLength(accepted)
        // Nothing was sent, so every message the close did not refuse is one the close blocked.
        expect(messages.map((message) => `${message.text}: ${message.delivery}`)).toEqual(
          messages.map((message) => `${message.text}: blocked`),
        )
      }
    } finally {
      await switchboard.stop()
    }
  })

  /**
   * A switchboard that only ingests (what is checked is what the database holds), on a storage
   * over `createFailingDb`; `receive` sends a customer message whose text is its external id.
   */
  const ingestOnFailingDb = async () => {
    const storage = context.storage()
    await parkLeftoverJobs(storage)
    const { integration } = await seed(storage)
    const failing = createFailingDb(context.db())
    const failingStorage = await createPostgresStorage({ db: failing.db })
    const switchboard = createSwitchboard({
      storage: failingStorage,
      model: { name: 'unused', complete: async () => ({ text: '', toolCalls: [], usage }) },
      knowledge: createMemoryKnowledgeIndex(),
      concurrency: 0,
    })
    return {
      storage,
      integration,
      failing,
      receive: (clientId: string, externalId: string) =>
        switchboard.ingest({ integrationId: integration.id, clientId, text: externalId, externalId }),
      async close() {
        await switchboard.stop()
        await failingStorage.close()
        // Done with: no later test's workers should find these jobs due.
        await parkLeftoverJobs(storage)
      },
    }
  }

  it('keeps nothing of a message whose ingest the database failed midway, and takes it once it is back', async () => {
    const { storage, integration, failing, receive, close } = await ingestOnFailingDb()
    try {
      const first = (await receive('known', 'known-1'))._unsafeUnwrap()

      // A message of an open session: the database goes away after the message row, before its job.
      failing.failFrom(/INSERT INTO jobs/)
      await expect(receive('known', 'known-2')).rejects.toThrow(/terminated/)
      // A new customer's first message: the session row would be written first.
      await expect(receive('new', 'new-1')).rejects.toThrow(/terminated/)

      failing.comeBack()
      expect(
        await storage.messages.findByExternalId({ integrationId: integration.id, externalId: 'known-2' }),
      ).toBeNull()
      expect(
        await storage.messages.findByExternalId({ integrationId: integration.id, externalId: 'new-1' }),
      ).toBeNull()
      expect(await storage.sessions.findOpen({ integrationId: integration.id, clientId: 'new' })).toBeNull()
      const knownMessages = await storage.messages.list({ sessionId: first.session.id, limit: 10 })
      expect(knownMessages.map((message) => message.text)).toEqual(['known-1'])
      expect(await storage.jobs.pending({ sessionId: first.session.id })).toBe(1)

      // The platform sends both again; now they are stored, each with its job, once.
      const retried = (await receive('known', 'known-2'))._unsafeUnwrap()
      const opened = (await receive('new', 'new-1'))._unsafeUnwrap()
      expect([retried.duplicate, retried.queued, opened.duplicate, opened.queued]).toEqual([
        false,
        true,
        false,
        true,
      ])
      expect(await storage.jobs.pending({ sessionId: first.session.id })).toBe(2)
      expect(await storage.jobs.pending({ sessionId: opened.session.id })).toBe(1)
    } finally {
      await close()
    }
  })

  it('keeps nothing of a batch of messages whose writes the database failed midway, and takes them once it is back', async () => {
    const { storage, integration, failing, receive, close } = await ingestOnFailingDb()
    const customers = ['batch-a', 'batch-b', 'batch-c']
    try {
      await receive('repeated', 'repeated-1')
      // The database goes away at the batch's job insert, after its message insert has gone out,
      // and COMMIT may be sent behind them (noMoreCalls): it must not leave with the messages.
      failing.failFrom(/INSERT INTO jobs/)
      const sent = Promise.allSettled([
        // Stored alone, first (a repeat writes nothing); the others wait for it, then go together.
        receive('repeated', 'repeated-1'),
        ...customers.map((clientId) => receive(clientId, `${clientId}-1`)),
      ])
      const [repeat, ...batch] = await sent
      expect(repeat.status === 'fulfilled' && repeat.value._unsafeUnwrap().duplicate).toBe(true)
      expect(batch.map((outcome) => outcome.status)).toEqual(customers.map(() => 'rejected'))

      failing.comeBack()
      for (const clientId of customers) {
        expect(
          await storage.messages.findByExternalId({
            integrationId: integration.id,
            externalId: `${clientId}-1`,
          }),
        ).toBeNull()
      }
      const retried = await Promise.all(customers.map((clientId) => receive(clientId, `${clientId}-1`)))
      expect(retried.map((result) => result._unsafeUnwrap().duplicate)).toEqual(customers.map(() => false))
    } finally {
      await close()
    }
  })

  it("runs a job whose transaction's commit was answered with an error and landed only after", async () => {
    const storage = context.storage()
    await parkLeftoverJobs(storage)
    const { integration } = await seed(storage)
    const late = createLateCommitDb(context.db())
    const lateStorage = await createPostgresStorage({ db: late.db })
    const model = createScriptedModel()
    model.script(integration.entryAgentId, reply('first'), reply('second'), reply('second again'))
    const connector = createRecordingConnector()
    // The clock stands still: a job still leased to the ingest's worker would never run.
    const switchboard = createSwitchboard({
      storage: lateStorage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(new Date()),
    })
    const says = (text: string) =>
      switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text })
    try {
      await says('hello')
      await switchboard.idle()
      late.arm()
      // The commit lands after ingest heard the error, and after a give-back made at once would
      // have found no job; the retry stores the message again.
      expect((await says('again')).isOk()).toBe(true)
      await expect.poll(() => connector.sent.length, { timeout: 5000 }).toBe(3)
      expect(connector.sent.map((sent) => sent.text)).toEqual(['first', 'second', 'second again'])
    } finally {
      await switchboard.stop()
      await lateStorage.close()
      await parkLeftoverJobs(storage)
    }
  })

  it('makes a transfer to a human whose switchboard stopped after the pause committed, from another one', async () => {
    const storage = context.storage()
    await parkLeftoverJobs(storage)
    const at = new Date()
    const { integration, agent: reception, human } = await seedHandoffToHuman(storage, at)
    const otherStorage =
      context.otherDb === undefined ? storage : await createPostgresStorage({ db: context.otherDb() })
    const model = createScriptedModel()
    model.script(reception.id, handoff(human.id, 'wants a person'))
    // The first switchboard's platform never answers the transfer: its process is as good as dead.
    const called = deferred()
    const hung = deferred<HumanTransferOutcome>()
    const stale = createRecordingConnector({ humanTransfer: true })
    stale.transferToHuman = () => {
      called.resolve()
      return hung.promise
    }
    const platform = createRecordingConnector({ humanTransfer: true, externalReference: 'request-42' })
    const staleClock = createManualClock(at)
    // Past the stale claim's lease: the survivor's first sweep may take the transfer.
    const laterClock = createManualClock(new Date(at.getTime() + 2 * 60_000))
    const switchboards: Switchboard[] = []
    try {
      const first = createSwitchboard({
        storage,
        model,
        knowledge: createMemoryKnowledgeIndex(),
        connectors: [stale],
        clock: staleClock,
        concurrency: 1,
      })
      switchboards.push(first)
      const ingested = await first.ingest({
        integrationId: integration.id,
        clientId: 'customer',
        text: 'I want to talk to a person',
      })
      const sessionId = ingested._unsafeUnwrap().session.id
      await called.promise
      await first.stop({ timeoutMs: 1 })

      const survivor = createSwitchboard({
        storage: otherStorage,
        model: createScriptedModel(),
        knowledge: createMemoryKnowledgeIndex(),
        connectors: [platform],
        clock: laterClock,
        concurrency: 0,
      })
      switchboards.push(survivor)
      await expect
        .poll(
          async () => {
            await laterClock.advance(1_000)
            return platform.transfers.length
          },
          { timeout: 10_000 },
        )
        .toBe(1)
      await survivor.idle()

      expect(platform.transfers).toEqual([{ sessionId, groupId: 7, systemMessage: false, sentBefore: 0 }])
      expect(stale.sent.map((sent) => sent.text)).toEqual(['A colleague will take over.'])
      const session = await storage.sessions.get({ id: sessionId })
      expect(session?.state).toBe('paused')
      expect(session?.activeAgentId).toBe(human.id)
      expect(session?.pauseState?.externalReference).toBe('request-42')

      // The stale call answers at last: its claim was taken over, so it records nothing.
      hung.resolve({ ok: true, externalReference: 'too-late' })
      await first.idle()
      expect((await storage.sessions.get({ id: sessionId }))?.pauseState?.externalReference).toBe(
        'request-42',
      )
      const left = await context
        .db()
        .query('SELECT id FROM human_transfers WHERE session_id = $1::uuid', [sessionId])
      expect(left).toEqual([])
    } finally {
      hung.resolve({ ok: false, error: 'test over' })
      await Promise.all(switchboards.map((switchboard) => switchboard.stop()))
      if (otherStorage !== storage) await otherStorage.close()
    }
  })
}
