import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type AgentPatch,
  agentInputSchema,
  createMemoryStorage,
  type IntegrationPatch,
  type JobLease,
  type Message,
  type MessageRole,
  type NewJob,
  type NewMessage,
  type NewWebhookLog,
  type Page,
  type Repositories,
  SessionClosedError,
  type SessionState,
  type Storage,
  TransactionConflictError,
  WEBHOOK_DELIVERIES_KEPT_MS,
  WEBHOOK_LOGS_KEPT_PER_INTEGRATION,
  WEBHOOK_OUTCOMES,
} from '@switchboard/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, createPgliteDb, createPostgresStorage, type Db } from '../src/index.js'

/**
 * A differential test of the Storage port: one random sequence of calls is applied to a fresh
 * memory storage and to a fresh SQL storage (PGlite always; PostgreSQL too with DATABASE_URL), and
 * every answer must be the same on each, once what is legitimately the storage's own is set aside
 * (`observed`, `pagesOf`). The memory storage is the reference the conformance suites are written
 * against, but a disagreement says only that one of the two is wrong: the port's doc comments and
 * the contract decide which.
 */

const connectionString = process.env.DATABASE_URL
const onPostgres = connectionString !== undefined && connectionString !== ''
/**
 * STORAGE_AGREEMENT_RUNS sets how many sequences (of up to 60 calls) are tried;
 * STORAGE_AGREEMENT_SEED replays a run (fast-check prints the seed and path of a failure).
 */
const RUNS = Number(process.env.STORAGE_AGREEMENT_RUNS ?? 10)
const SEED =
  process.env.STORAGE_AGREEMENT_SEED === undefined ? undefined : Number(process.env.STORAGE_AGREEMENT_SEED)
/** With STORAGE_AGREEMENT_TALLY set, how often each call answered, failed or was skipped is printed. */
const tally = process.env.STORAGE_AGREEMENT_TALLY === undefined ? null : new Map<string, number>()

function count(operation: AnyOperation, outcome: unknown): void {
  if (tally === null) return
  const shown = (call: string, answer: unknown): string => {
    if (typeof answer === 'object' && answer !== null && 'threw' in answer) return `${call} threw`
    if (typeof answer === 'object' && answer !== null && 'ok' in answer && answer.ok === 'skipped')
      return `${call} skipped`
    return `${call} answered`
  }
  const name =
    operation.kind === 'transaction'
      ? `transaction ${Object.hasOwn((outcome as { committed: Outcome }).committed, 'ok') ? 'committed' : 'rejected'}`
      : shown(operation.kind, outcome)
  tally.set(name, (tally.get(name) ?? 0) + 1)
}

const BASE = Date.parse('2030-01-01T00:00:00.000Z')
const MINUTE = 60_000
const PAGES_READ = 30

// ---------------------------------------------------------------------------------------------
// The SQL databases, emptied before each run so that each run starts from a fresh storage.

interface SqlDatabase {
  readonly name: string
  readonly db: Db
}

let dataDir: string | undefined
let admin: Db | undefined
let schema: string | undefined
const databases: SqlDatabase[] = []

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'switchboard-agreement-'))
  databases.push({ name: 'PGlite', db: await createPgliteDb({ dataDir }) })
  if (onPostgres) {
    schema = `switchboard_agreement_${randomBytes(6).toString('hex')}`
    admin = createPgDb({ connectionString, max: 1 })
    await admin.query(`CREATE SCHEMA ${schema}`)
    databases.push({
      name: 'PostgreSQL',
      db: createPgDb({ connectionString, max: 4, options: `-c search_path=${schema}` }),
    })
  }
  // Migrated once per Db; each run's storage then finds the schema in place.
  for (const { db } of databases) await (await createPostgresStorage({ db })).close()
})

afterAll(async () => {
  if (tally !== null)
    console.log(
      [...tally]
        .sort()
        .map(([name, times]) => `${name}: ${times}`)
        .join('\n'),
    )
  for (const { db } of databases) await db.close()
  if (admin !== undefined) {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin.close()
  }
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
})

/**
 * Every table emptied and every sequence started again, as in a database just migrated: a fresh
 * memory storage numbers companies, agents and integrations from 1 too, so ids compare as they are.
 * DELETE rather than TRUNCATE, which on PGlite costs half a second a run (new files for each
 * table); foreign keys and triggers are not checked meanwhile (`replica`), as every row goes.
 */
async function emptied(db: Db): Promise<void> {
  await db.query(`DO $$
    DECLARE item record;
    BEGIN
      SET LOCAL session_replication_role = replica;
      FOR item IN SELECT tablename FROM pg_tables
        WHERE schemaname = current_schema() AND tablename <> 'schema_migrations' LOOP
        EXECUTE format('DELETE FROM %I', item.tablename);
      END LOOP;
      FOR item IN SELECT sequencename FROM pg_sequences WHERE schemaname = current_schema() LOOP
        EXECUTE format('ALTER SEQUENCE %I RESTART', item.sequencename);
      END LOOP;
    END $$`)
}

// ---------------------------------------------------------------------------------------------
// What each storage remembers of the run: the entities calls may name, by position.

interface Known {
  readonly companies: number[]
  readonly agents: Array<{ companyId: number; id: number }>
  readonly integrations: Array<{ companyId: number; id: string; entryAgentId: number }>
  readonly sessions: Array<{ id: string; companyId: number; integrationId: string }>
  /** Stored messages by id, with this storage's own sequence (`sequence` is not compared). */
  readonly messages: Map<string, KnownMessage>
  /** Each leased job's id as this storage numbered it, by its message. */
  readonly jobs: Map<string, string>
  readonly users: Array<{ id: string; companyId: number }>
  /**
   * An integration of each company whose webhook log only floods fill, with ids never used again:
   * whether the id of an entry the log dropped may be added again is the storage's own (the memory
   * storage forgets it at once, the SQL storages once their periodic trim deletes its row), and
   * log ids are fresh UUIDs in practice.
   */
  readonly floodedIntegrations: Array<{ companyId: number; id: string }>
  readonly counters: { floods: number }
  readonly documents: string[]
}

interface KnownMessage {
  readonly id: string
  readonly companyId: number
  readonly sessionId: string
  readonly integrationId: string
  readonly sequence: number
}

interface Subject {
  readonly name: string
  readonly storage: Storage
  readonly known: Known
}

function knownNothing(): Known {
  return {
    companies: [],
    agents: [],
    integrations: [],
    sessions: [],
    messages: new Map(),
    jobs: new Map(),
    users: [],
    floodedIntegrations: [],
    counters: { floods: 0 },
    documents: [],
  }
}

const pick = <T>(items: readonly T[], index: number): T | undefined =>
  items.length === 0 ? undefined : items[index % items.length]

// ---------------------------------------------------------------------------------------------
// Normalisation: only what a storage may legitimately answer its own way.

type Outcome = { readonly ok: unknown } | { readonly threw: string }

/**
 * Which failure, not its message: a constraint violation is an error on both, but its text is the
 * storage's own (PostgreSQL's words, or the memory storage's). The two errors callers tell apart by
 * `isInstance` are kept apart.
 */
function failureOf(error: unknown): string {
  // Not its `sessionId`: of a batch into several closed sessions, which one the error names is
  // the storage's own (the port does not say, and nothing reads it).
  if (SessionClosedError.isInstance(error)) return 'SessionClosedError'
  if (TransactionConflictError.isInstance(error)) return 'TransactionConflictError'
  if (error instanceof RangeError) return 'RangeError'
  return 'Error'
}

/**
 * The value as the server would answer it: JSON, which cannot tell -0 from 0 nor a key whose value
 * is undefined from a missing one. A message's `sequence` is set aside: it is an insertion
 * counter, which a PostgreSQL sequence advances for an insert that then fails (a repeated external
 * id) and the memory storage does not; only the order it gives is observable, and is compared.
 */
function observed(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (key, entry) =>
      key === 'sequence' && typeof entry === 'number' ? undefined : entry,
    ),
  )
}

/**
 * Lists the port gives "in no order", or without saying in which (the ids `blockPending` and the
 * outbox's removals return), compared as sets: sorted by a stable key of each item.
 */
function unordered<T>(items: readonly T[], keyOf: (item: T) => string): T[] {
  return [...items].sort((left, right) =>
    keyOf(left) < keyOf(right) ? -1 : keyOf(left) > keyOf(right) ? 1 : 0,
  )
}

/** What one storage answered wrongly whatever the other answers: it fails the run, not the call. */
class BrokenPromise extends Error {}

/** Messages must come in sequence order, whatever the numbers. */
function inSequenceOrder(messages: readonly Message[]): readonly Message[] {
  for (let index = 1; index < messages.length; index++) {
    if (messages[index - 1]!.sequence >= messages[index]!.sequence) {
      throw new BrokenPromise(
        `messages out of sequence order: ${messages.map((message) => message.sequence).join(',')}`,
      )
    }
  }
  return messages
}

/**
 * The first pages of a list (at most PAGES_READ: a flooded webhook log holds a thousand entries),
 * each storage following its own cursors: a cursor holds insertion counters, which (like
 * `sequence`) may differ after a failed insert. Whether a next page is announced is compared, and
 * what each page holds.
 */
async function pagesOf<T>(
  read: (cursor: string | undefined) => Promise<Page<T>>,
): Promise<Array<{ items: T[]; more: boolean }>> {
  const pages: Array<{ items: T[]; more: boolean }> = []
  let cursor: string | undefined
  while (pages.length < PAGES_READ) {
    const { items, nextCursor } = await read(cursor)
    pages.push({ items, more: nextCursor !== null })
    if (nextCursor === null) break
    cursor = nextCursor
  }
  return pages
}

// ---------------------------------------------------------------------------------------------
// Generators.

/**
 * Text anyone may type: empty, long, accented, CJK, emoji, quotes and backslashes, U+0000 and lone
 * surrogates (stored as U+FFFD everywhere, port doc), U+FEFF inside. Not leading U+FEFF: PGlite's
 * reads drop one at the start of any text column, a known limit of PGlite handled for keys only
 * (`storableKey`), so it is left out of free text here.
 */
const text = fc
  .oneof(
    fc.constantFrom(
      '',
      'hello',
      'Grüße, Zoë',
      '日本語のテキスト',
      '👋🏽 emoji 🇫🇷',
      'a\u0000b',
      'lone \uD800 high',
      'lone \uDC00 low',
      '\uFFFD',
      'tail\uFEFF',
      'mid\uFEFFdle',
      'it\'s "quoted" \\ back\\slash \\u0000',
      '\u0001json:"x"',
      'x'.repeat(3000),
      '  spaced  \n\t',
    ),
    fc.string({ maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 12 }),
  )
  .map((value) => (value.startsWith('\uFEFF') ? `x${value}` : value))

/** Keys from outside, kept exact (port doc): a small pool, so that they repeat and collide. */
const key = fc.constantFrom(
  'k',
  'K',
  'k\u0000',
  'k\uFFFD',
  'k\uD800',
  '\uFEFFk',
  '\uFEFF',
  '',
  'ключ',
  '🔑',
  '\u0001json:"k"',
)

/**
 * Instants around BASE, ties included, and one past the year 9999, whose ISO text has a six-digit
 * year (+012000-…) that the storages must take as any other.
 */
const FAR_FUTURE = Date.UTC(12000, 0, 1) - BASE
const time = fc
  .constantFrom(0, 0, 1, MINUTE, 2 * MINUTE, -MINUTE, FAR_FUTURE)
  .map((offset) => new Date(BASE + offset))
const index = fc.nat({ max: 50 })
/** Ids that name nothing: not a UUID, or one never stored. */
const unknownId = fc.constantFrom('not-a-uuid', '', '00000000-0000-4000-8000-00000000ffff')
const limit = fc.integer({ min: 1, max: 4 })
const roles: readonly MessageRole[] = ['customer', 'agent', 'operator', 'system']
const role = fc.constantFrom(...roles)
const state = fc.constantFrom<SessionState>('ongoing', 'paused', 'closed')

/** Amounts whose binary value is not the decimal one, halves of a nano-dollar, large ones. */
const amount = fc.oneof(
  fc.constantFrom(
    5,
    0.1,
    0.2,
    -0.3,
    1e-9,
    5e-10,
    -5e-10,
    1.0000000005,
    123456.789,
    -2.5e-9,
    0,
    99999.999999999,
  ),
  fc.double({ min: -1000, max: 1000, noNaN: true }),
  fc.integer({ min: -1_000_000, max: 1_000_000 }).map((nanos) => nanos / 1e9),
)

const facts = fc.dictionary(
  fc.oneof(key, fc.constantFrom('name', '__proto__', 'constructor', '1', '01')),
  text,
  {
    maxKeys: 3,
  },
)

const sessionCreate = fc.record({
  kind: fc.constant('session.create' as const),
  id: fc.uuid({ version: 4 }),
  integration: index,
  clientId: key,
  channelId: fc.option(key, { nil: undefined }),
  transport: fc.option(key, { nil: undefined }),
  state,
  facts,
  journey: fc.array(text, { maxLength: 2 }),
  pause: fc.option(fc.record({ reason: fc.option(text, { nil: undefined }) }), { nil: undefined }),
  at: time,
})

const sessionSave = fc.record({
  kind: fc.constant('session.save' as const),
  session: index,
  versionDelta: fc.constantFrom(0, 0, 0, -1, 1),
  state: fc.option(state, { nil: undefined }),
  clientId: fc.option(key, { nil: undefined }),
  facts: fc.option(facts, { nil: undefined }),
  pauses: fc.option(fc.nat({ max: 3 }), { nil: undefined }),
  routing: fc.option(
    fc.record({
      reason: fc.constantFrom(
        'resolved' as const,
        'max_depth' as const,
        'cycle' as const,
        'fallback' as const,
      ),
      depth: fc.nat({ max: 5 }),
      confidence: fc.double({ min: 0, max: 1, noNaN: true }),
      routeId: text,
    }),
    { nil: undefined },
  ),
  error: fc.option(
    fc.record({
      code: fc.constantFrom(
        'HANDOFF_NOT_ALLOWED' as const,
        'MODEL_UNAVAILABLE' as const,
        'PROCESSING_FAILED' as const,
      ),
      message: text,
    }),
    { nil: undefined },
  ),
  at: time,
})

const sessionReads = fc.oneof(
  fc.record({
    kind: fc.constant('session.get' as const),
    session: fc.oneof(index, unknownId),
    company: fc.option(index, { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('session.findOpen' as const), integration: index, clientId: key }),
  fc.record({
    kind: fc.constant('session.findOpenMany' as const),
    integration: index,
    clientIds: fc.array(key, { maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('session.list' as const),
    company: index,
    state: fc.option(state, { nil: undefined }),
    integration: fc.option(fc.oneof(index.map(String), fc.constantFrom('999', 'abc', '007')), {
      nil: undefined,
    }),
    limit,
  }),
)

const newMessage = fc.record({
  id: fc.oneof(fc.uuid({ version: 4 }), fc.constantFrom('repeat')),
  session: index,
  role,
  text,
  externalId: fc.option(key, { nil: undefined }),
  channelId: fc.option(key, { nil: undefined }),
  transport: fc.option(key, { nil: undefined }),
  delivery: fc.option(fc.constantFrom('pending', 'sent', 'failed', 'blocked' as const), { nil: undefined }),
  agent: fc.option(index, { nil: undefined }),
  at: time,
})

const messageOperations = fc.oneof(
  fc.record({
    kind: fc.constant('message.insert' as const),
    message: newMessage,
    intoOpenSession: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('message.insertMany' as const),
    messages: fc.array(newMessage, { maxLength: 3 }),
    intoOpenSession: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('message.get' as const),
    message: fc.oneof(index, unknownId),
    company: fc.option(index, { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('message.findByExternalId' as const), integration: index, externalId: key }),
  fc.record({
    kind: fc.constant('message.findByExternalIds' as const),
    integration: index,
    externalIds: fc.array(key, { maxLength: 4 }),
  }),
  fc.record({
    kind: fc.constant('message.list' as const),
    session: index,
    after: fc.option(index, { nil: undefined }),
    limit: fc.integer({ min: 1, max: 6 }),
  }),
  fc.record({
    kind: fc.constant('message.history' as const),
    session: index,
    current: index,
    limit: fc.integer({ min: 1, max: 6 }),
  }),
  fc.record({
    kind: fc.constant('message.blockPending' as const),
    session: index,
    roles: fc.subarray([...roles]),
  }),
)

const webhookLog = fc.record({
  id: fc.oneof(fc.uuid({ version: 4 }), fc.constantFrom('repeat')),
  integration: index,
  at: time,
  httpStatus: fc.constantFrom(200, 202, 400, 401, 403, 413, 500),
  outcome: fc.constantFrom(...WEBHOOK_OUTCOMES),
  reason: fc.option(text, { nil: undefined }),
  sessionId: fc.option(fc.oneof(fc.uuid({ version: 4 }), text), { nil: undefined }),
  messageId: fc.option(fc.oneof(fc.uuid({ version: 4 }), text), { nil: undefined }),
})

const webhookLogOperations = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('webhookLog.add' as const), log: webhookLog }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('webhookLog.addMany' as const),
      logs: fc.array(webhookLog, { maxLength: 3 }),
    }),
  },
  // Past the entries kept per integration, so the trim (and what `list` leaves out before it) shows.
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('webhookLog.flood' as const),
      company: index,
      count: fc.integer({ min: 1, max: 70 }).map((extra) => WEBHOOK_LOGS_KEPT_PER_INTEGRATION - 35 + extra),
      at: time,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('webhookLog.list' as const),
      company: index,
      integration: index,
      flooded: fc.boolean(),
      limit: fc.constantFrom(1, 3, 100),
    }),
  },
)

const billingOperations = fc.oneof(
  fc.record({ kind: fc.constant('billing.adjust' as const), company: index, amount, at: time }),
  fc.record({
    kind: fc.constant('billing.recordUsage' as const),
    id: fc.oneof(fc.uuid({ version: 4 }), fc.constantFrom('repeat')),
    company: index,
    sessionId: fc.uuid({ version: 4 }),
    model: text,
    inputTokens: fc.nat({ max: 100_000 }),
    outputTokens: fc.nat({ max: 100_000 }),
    cost: amount.map(Math.abs),
    at: time,
  }),
  fc.record({ kind: fc.constant('billing.getBalance' as const), company: index }),
  fc.record({ kind: fc.constant('billing.listUsage' as const), company: index, limit }),
)

const agentPatch: fc.Arbitrary<AgentPatch> = fc.record(
  {
    name: text.filter((name) => name.length > 0),
    role: fc.option(text, { nil: null }),
    kind: fc.constantFrom('ai' as const, 'human' as const),
    systemPrompt: text,
    routingModel: fc.option(text, { nil: null }),
    maxDepth: fc.integer({ min: 1, max: 2_147_483_647 }),
    fallbackReply: fc.option(text, { nil: null }),
    handoff: fc.record({
      enabled: fc.boolean(),
      allowedTargets: fc.array(fc.integer({ min: 1, max: 2_147_483_647 }), { maxLength: 3 }),
      announceHandoff: fc.boolean(),
      handoffMessageTemplate: text,
      messageHistoryDepth: fc.integer({ min: 5, max: 50 }),
      msgplatform: fc.record(
        {
          targetOperatorId: fc.maxSafeInteger(),
          targetGroupId: fc.maxSafeInteger(),
          sendSystemMessage: fc.boolean(),
        },
        { requiredKeys: ['sendSystemMessage'] },
      ),
    }),
    routingConfig: fc.option(
      fc.record({
        enabled: fc.boolean(),
        routes: fc.array(
          fc.record({
            id: text.filter((id) => id.length > 0),
            agentId: fc.integer({ min: 1, max: 2_147_483_647 }),
            description: text,
          }),
          { maxLength: 2 },
        ),
        confidenceThreshold: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      { nil: null },
    ),
  },
  { requiredKeys: [] },
)

const agentOperations = fc.oneof(
  fc.record({
    kind: fc.constant('agent.create' as const),
    company: index,
    name: text.filter((name) => name.length > 0),
    role: fc.option(text, { nil: undefined }),
    systemPrompt: text,
    at: time,
  }),
  fc.record({ kind: fc.constant('agent.update' as const), agent: index, patch: agentPatch, at: time }),
  fc.record({ kind: fc.constant('agent.delete' as const), agent: index }),
  fc.record({ kind: fc.constant('agent.get' as const), company: index, agent: index }),
  fc.record({
    kind: fc.constant('agent.getMany' as const),
    company: index,
    agents: fc.array(index, { maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('agent.list' as const), company: index, limit }),
  fc.record({ kind: fc.constant('agent.isReferenced' as const), agent: index }),
)

const config = fc.dictionary(
  fc.oneof(key, fc.constantFrom('token', 'baseUrl', '__proto__')),
  fc.oneof(
    text,
    fc.integer(),
    fc.double(),
    fc.constantFrom(0.1 + 0.2, 1e21, 5e-324, 2 ** 53 + 2, -0),
    fc.boolean(),
    fc.constant(null),
    fc.array(text, { maxLength: 2 }),
    fc.jsonValue({ maxDepth: 2 }),
  ),
  { maxKeys: 3 },
)

const integrationPatch: fc.Arbitrary<IntegrationPatch> = fc.record(
  {
    name: text,
    active: fc.boolean(),
    config,
    webhookSecret: fc.option(text, { nil: null }),
  },
  { requiredKeys: [] },
)

const integrationOperations = fc.oneof(
  fc.record({
    kind: fc.constant('integration.create' as const),
    agent: index,
    type: fc.constantFrom('webchat', 'msgplatform'),
    name: text,
    active: fc.boolean(),
    config,
    webhookSecret: fc.option(text, { nil: null }),
    at: time,
  }),
  fc.record({
    kind: fc.constant('integration.update' as const),
    integration: index,
    patch: integrationPatch,
    at: time,
  }),
  fc.record({ kind: fc.constant('integration.delete' as const), integration: index }),
  fc.record({
    kind: fc.constant('integration.get' as const),
    integration: fc.oneof(index.map(String), fc.constantFrom('999', 'abc', '007', '')),
    company: fc.option(index, { nil: undefined }),
  }),
  fc.record({
    kind: fc.constant('integration.getMany' as const),
    integrations: fc.array(fc.oneof(index.map(String), fc.constantFrom('999', 'abc')), { maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('integration.list' as const), company: index, limit }),
)

/** Clock readings and lease lengths around BASE: leases run out, retries come due, ties happen. */
const now = fc
  .constantFrom(0, 1, 1000, 30_000, MINUTE, 2 * MINUTE, 10 * MINUTE)
  .map((offset) => new Date(BASE + offset))
const leaseMs = fc.constantFrom(0, 1000, 30_000, MINUTE)
/** A few holders, so that a stale holder's call and a takeover both happen. */
const token = fc.constantFrom('worker-a', 'worker-b', 'worker-c')

const jobOperations = fc.oneof(
  fc.record({ kind: fc.constant('job.enqueue' as const), message: index, availableAt: now }),
  fc.record({
    kind: fc.constant('job.enqueueMany' as const),
    messages: fc.array(index, { maxLength: 3 }),
    availableAt: now,
  }),
  fc.record({
    kind: fc.constant('job.enqueueLeased' as const),
    message: index,
    availableAt: now,
    now,
    leaseMs,
    token,
  }),
  fc.record({
    kind: fc.constant('job.enqueueManyLeased' as const),
    jobs: fc.array(fc.record({ message: index, token: fc.option(token, { nil: undefined }) }), {
      maxLength: 3,
    }),
    availableAt: now,
    now,
    leaseMs,
  }),
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('job.lease' as const), now, leaseMs, token }),
  },
  fc.record({ kind: fc.constant('job.renew' as const), message: index, token, now, leaseMs }),
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('job.complete' as const), message: index, token }),
  },
  fc.record({
    kind: fc.constant('job.fail' as const),
    message: index,
    token,
    retryAt: now,
    dead: fc.boolean(),
    error: text,
  }),
  fc.record({ kind: fc.constant('job.pending' as const), session: fc.option(index, { nil: undefined }) }),
)

const outboxOperations = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('outbox.add' as const), message: index, availableAt: now }),
  },
  fc.record({ kind: fc.constant('outbox.claim' as const), message: index, now, leaseMs, token }),
  fc.record({ kind: fc.constant('outbox.claimNext' as const), session: index, now, leaseMs, token }),
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('outbox.claimDue' as const),
      now,
      limit: fc.integer({ min: 1, max: 4 }),
      leaseMs,
      token,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('outbox.remove' as const),
      message: index,
      token,
      delivery: fc.option(fc.constantFrom('sent' as const, 'failed' as const, 'blocked' as const), {
        nil: undefined,
      }),
    }),
  },
  fc.record({
    kind: fc.constant('outbox.retryLater' as const),
    message: index,
    token,
    attempts: fc.nat({ max: 5 }),
    availableAt: now,
  }),
  fc.record({ kind: fc.constant('outbox.removeForSession' as const), session: index }),
  fc.record({
    kind: fc.constant('outbox.removeWaiting' as const),
    session: index,
    messages: fc.array(index, { maxLength: 3 }),
    now,
  }),
)

/** A few transfer ids, so that adding one twice happens. */
const transferId = fc.constantFrom(
  '00000000-0000-4000-b000-000000000001',
  '00000000-0000-4000-b000-000000000002',
  '00000000-0000-4000-b000-000000000003',
)

const humanTransferOperations = fc.oneof(
  fc.record({
    kind: fc.constant('humanTransfer.add' as const),
    id: transferId,
    session: index,
    agent: index,
    operatorId: fc.option(fc.integer({ min: 1, max: 2 ** 40 }), { nil: undefined }),
    groupId: fc.option(fc.integer({ min: 1, max: 2 ** 40 }), { nil: undefined }),
    systemMessage: fc.boolean(),
    pauses: fc.nat({ max: 5 }),
    after: fc.array(index, { maxLength: 2 }),
    token,
    leasedUntil: now,
  }),
  fc.record({ kind: fc.constant('humanTransfer.claim' as const), id: transferId, now, leaseMs, token }),
  fc.record({
    kind: fc.constant('humanTransfer.claimDue' as const),
    now,
    limit: fc.integer({ min: 1, max: 3 }),
    leaseMs,
    token,
  }),
  fc.record({ kind: fc.constant('humanTransfer.remove' as const), id: transferId, token }),
)

/** Ids from small pools, so that repeated ids and hashes happen; capitals name the same UUID. */
const userId = fc.constantFrom('00000000-0000-4000-c000-00000000000a', '00000000-0000-4000-c000-00000000000b')
const anyCase = (uuid: fc.Arbitrary<string>) =>
  fc.tuple(uuid, fc.boolean()).map(([value, upper]) => (upper ? value.toUpperCase() : value))
const email = fc.constantFrom(
  'a\u0000nn@example.test',
  'a\uFFFDnn@example.test',
  'ann@example.test',
  'Ann@Example.TEST',
  'bob@example.test',
  'zoë@example.test',
  'ZOË@example.test',
  'straße@example.test',
  'STRASSE@example.test',
)
const tokenHash = fc.constantFrom('hash-1', 'hash-2', 'hash-3', 'hash\u0000', 'hash\uFFFD', 'hash\uD800')
const tokenId = fc.constantFrom(
  '00000000-0000-4000-d000-000000000001',
  '00000000-0000-4000-d000-000000000002',
  '00000000-0000-4000-d000-000000000003',
)
const loginId = fc.constantFrom('00000000-0000-4000-e000-000000000001', 'login\u0000', 'login\uFFFD')

const accountOperations = fc.oneof(
  fc.record({ kind: fc.constant('company.get' as const), company: fc.integer({ min: 0, max: 3 }) }),
  fc.record({
    kind: fc.constant('user.create' as const),
    id: anyCase(userId),
    email,
    company: index,
    at: time,
  }),
  fc.record({ kind: fc.constant('user.findByEmail' as const), email }),
  fc.record({ kind: fc.constant('user.get' as const), id: fc.oneof(anyCase(userId), unknownId) }),
  fc.record({
    kind: fc.constant('refreshToken.create' as const),
    id: anyCase(tokenId),
    tokenHash,
    user: index,
    loginId,
    expiresAt: now,
    at: time,
  }),
  fc.record({ kind: fc.constant('refreshToken.findByHash' as const), tokenHash }),
  fc.record({ kind: fc.constant('refreshToken.markUsed' as const), id: tokenId, at: now }),
  fc.record({ kind: fc.constant('refreshToken.revokeLogin' as const), loginId, at: now }),
  fc.record({ kind: fc.constant('refreshToken.revokeUser' as const), userId: anyCase(userId), at: now }),
  fc.record({
    kind: fc.constant('apiToken.create' as const),
    id: anyCase(tokenId),
    company: index,
    user: index,
    name: text,
    tokenHash,
    at: time,
  }),
  fc.record({ kind: fc.constant('apiToken.findByHash' as const), tokenHash }),
  fc.record({ kind: fc.constant('apiToken.list' as const), company: index, limit }),
  fc.record({
    kind: fc.constant('apiToken.delete' as const),
    company: index,
    id: fc.oneof(anyCase(tokenId), fc.constantFrom('not-a-uuid', '')),
  }),
  fc.record({ kind: fc.constant('loginFailure.record' as const), emailKey: key, at: now }),
  fc.record({ kind: fc.constant('loginFailure.count' as const), emailKey: key, since: now }),
  fc.record({ kind: fc.constant('loginFailure.oldestSince' as const), emailKey: key, since: now }),
  fc.record({ kind: fc.constant('loginFailure.forget' as const), emailKey: key, at: now }),
  fc.record({ kind: fc.constant('loginFailure.forgetBefore' as const), before: now }),
)

/** Around the time a delivery id expires: remembered until `at + WEBHOOK_DELIVERIES_KEPT_MS`. */
const deliveryTime = fc
  .constantFrom(
    0,
    1,
    MINUTE,
    WEBHOOK_DELIVERIES_KEPT_MS - 1,
    WEBHOOK_DELIVERIES_KEPT_MS,
    WEBHOOK_DELIVERIES_KEPT_MS + 1,
  )
  .map((offset) => new Date(BASE + offset))

const otherOperations = fc.oneof(
  fc.record({
    kind: fc.constant('webhookDelivery.record' as const),
    integration: index,
    deliveryId: key,
    at: deliveryTime,
  }),
  fc.record({ kind: fc.constant('webhookDelivery.forget' as const), integration: index, deliveryId: key }),
  fc.record({
    kind: fc.constant('knowledge.create' as const),
    id: fc.oneof(fc.uuid({ version: 4 }), fc.constantFrom('repeat')),
    agent: index,
    title: text,
    content: text,
    at: time,
  }),
  fc.record({ kind: fc.constant('knowledge.get' as const), agent: index, document: index }),
  fc.record({ kind: fc.constant('knowledge.list' as const), agent: index, limit }),
  fc.record({ kind: fc.constant('knowledge.delete' as const), agent: index, document: index }),
  fc.record({
    kind: fc.constant('pipeline.create' as const),
    company: index,
    name: text,
    isDefault: fc.boolean(),
    stages: fc.array(text, { maxLength: 4 }),
    at: time,
  }),
  fc.record({ kind: fc.constant('pipeline.list' as const), company: index }),
)

const singleOperation = fc.oneof(
  { weight: 3, arbitrary: sessionCreate },
  { weight: 3, arbitrary: sessionSave },
  { weight: 3, arbitrary: sessionReads },
  { weight: 6, arbitrary: messageOperations },
  { weight: 2, arbitrary: webhookLogOperations },
  { weight: 2, arbitrary: billingOperations },
  { weight: 2, arbitrary: agentOperations },
  { weight: 2, arbitrary: integrationOperations },
  { weight: 4, arbitrary: jobOperations },
  { weight: 4, arbitrary: outboxOperations },
  { weight: 2, arbitrary: humanTransferOperations },
  { weight: 3, arbitrary: accountOperations },
  { weight: 2, arbitrary: otherOperations },
)

/**
 * A few calls in one transaction, each failure caught as a caller may catch it; then committed, or
 * rolled back by a throw of its function.
 */
const transaction = fc.record({
  kind: fc.constant('transaction' as const),
  operations: fc.array(singleOperation, { minLength: 1, maxLength: 4 }),
  rollBack: fc.boolean(),
})

const operation = fc.oneof({ weight: 12, arbitrary: singleOperation }, { weight: 1, arbitrary: transaction })

type Operation = typeof singleOperation extends fc.Arbitrary<infer T> ? T : never
type AnyOperation = typeof operation extends fc.Arbitrary<infer T> ? T : never
type MessageInput = typeof newMessage extends fc.Arbitrary<infer T> ? T : never
type WebhookLogInput = typeof webhookLog extends fc.Arbitrary<infer T> ? T : never

// ---------------------------------------------------------------------------------------------
// Applying one operation to one storage.

/** Ids the run generated, repeated on purpose: 'repeat' names the run's first id of its kind. */
const REPEATED = '00000000-0000-4000-8000-000000000001'
const idOf = (generated: string) => (generated === 'repeat' ? REPEATED : generated)

/** An integration id as a call may name it: by position among the known ones, or a string of none. */
function integrationIdOf(known: Known, named: string): string {
  return /^\d\d?$/.test(named) ? (pick(known.integrations, Number(named))?.id ?? '999') : named
}

function newMessageOf(known: Known, message: MessageInput): NewMessage | undefined {
  const session = pick(known.sessions, message.session)
  if (session === undefined) return undefined
  const agent = message.agent === undefined ? undefined : pick(known.agents, message.agent)
  return {
    id: idOf(message.id),
    companyId: session.companyId,
    sessionId: session.id,
    integrationId: session.integrationId,
    role: message.role,
    text: message.text,
    at: message.at,
    ...(agent === undefined ? {} : { agentId: agent.id }),
    ...(message.externalId === undefined ? {} : { externalId: message.externalId }),
    ...(message.channelId === undefined ? {} : { channelId: message.channelId }),
    ...(message.transport === undefined ? {} : { transport: message.transport }),
    ...(message.delivery === undefined ? {} : { delivery: message.delivery }),
  }
}

function remember(known: Known, integrationId: string, messages: readonly Message[]): readonly Message[] {
  for (const { id, companyId, sessionId, sequence } of messages) {
    known.messages.set(id, { id, companyId, sessionId, integrationId, sequence })
  }
  return messages
}

function webhookLogOf(known: Known, log: WebhookLogInput): NewWebhookLog | undefined {
  const integration = pick(known.integrations, log.integration)
  if (integration === undefined) return undefined
  return {
    id: idOf(log.id),
    companyId: integration.companyId,
    integrationId: integration.id,
    receivedAt: log.at,
    httpStatus: log.httpStatus,
    outcome: log.outcome,
    reason: log.reason,
    sessionId: log.sessionId,
    messageId: log.messageId,
  }
}

function messageAt(known: Known, position: number): KnownMessage | undefined {
  return pick([...known.messages.values()], position)
}

function newJobOf(message: KnownMessage, availableAt: Date): NewJob {
  return { companyId: message.companyId, sessionId: message.sessionId, messageId: message.id, availableAt }
}

/**
 * A lease as compared: without its job id, which a PostgreSQL sequence advances for an enqueue
 * that then fails (a message that has a job) and the memory storage does not. The message names
 * the job just as well, one job per message; the id is kept for the holder's later calls.
 */
function leased(known: Known, lease: JobLease | null): Omit<JobLease, 'jobId'> | null {
  if (lease === null) return null
  const { jobId, ...rest } = lease
  known.jobs.set(lease.messageId, jobId)
  return rest
}

/** The id of the message's job as this storage numbered it, or one that names no job. */
function jobIdOf(known: Known, position: number): string {
  const message = messageAt(known, position)
  return (message === undefined ? undefined : known.jobs.get(message.id)) ?? '999999'
}

const agentOf = (agent: { companyId: number; id: number }) => ({
  companyId: agent.companyId,
  agentId: agent.id,
})

/** Each storage's answer to `operation`, normalised; `skipped` when it names nothing known yet. */
async function apply(known: Known, storage: Repositories, operation: Operation): Promise<unknown> {
  const company = (position: number) => pick(known.companies, position)!
  switch (operation.kind) {
    case 'session.create': {
      const integration = pick(known.integrations, operation.integration)
      if (integration === undefined) return 'skipped'
      const at = operation.at.toISOString()
      const session = await storage.sessions.create({
        id: operation.id,
        companyId: integration.companyId,
        integrationId: integration.id,
        customer: {
          clientId: operation.clientId,
          ...(operation.channelId === undefined ? {} : { channelId: operation.channelId }),
          ...(operation.transport === undefined ? {} : { transport: operation.transport }),
        },
        state: operation.state,
        activeAgentId: integration.entryAgentId,
        entryAgentId: integration.entryAgentId,
        metadata: {
          agentPath: [
            { agentId: integration.entryAgentId, agentName: 'Reception', timestamp: at, via: 'initial' },
          ],
          sharedContext: {
            facts: operation.facts,
            journey: operation.journey.map((step) => ({ step, at })),
          },
          errors: [],
        },
        ...(operation.pause === undefined
          ? {}
          : {
              pauseState: {
                pausedAt: at,
                ...(operation.pause.reason === undefined ? {} : { reason: operation.pause.reason }),
              },
            }),
        createdAt: at,
        updatedAt: at,
      })
      known.sessions.push({
        id: session.id,
        companyId: session.companyId,
        integrationId: session.integrationId,
      })
      return session
    }
    case 'session.save': {
      const target = pick(known.sessions, operation.session)
      if (target === undefined) return 'skipped'
      const current = await storage.sessions.get({ id: target.id })
      if (current === null) return { missing: target.id }
      const updatedAt = operation.at.toISOString()
      const saved = await storage.sessions.save({
        ...current,
        ...(operation.state === undefined ? {} : { state: operation.state }),
        ...(operation.clientId === undefined
          ? {}
          : { customer: { ...current.customer, clientId: operation.clientId } }),
        metadata: {
          ...current.metadata,
          ...(operation.facts === undefined
            ? {}
            : { sharedContext: { ...current.metadata.sharedContext, facts: operation.facts } }),
          ...(operation.pauses === undefined ? {} : { pauses: operation.pauses }),
          ...(operation.routing === undefined
            ? {}
            : {
                routing: { reason: operation.routing.reason, depth: operation.routing.depth, at: updatedAt },
                agentPath: [
                  ...current.metadata.agentPath,
                  {
                    agentId: current.activeAgentId,
                    agentName: 'Router',
                    confidence: operation.routing.confidence,
                    routeId: operation.routing.routeId,
                    timestamp: updatedAt,
                    via: 'entry_routing' as const,
                    depth: operation.routing.depth,
                  },
                ],
              }),
          ...(operation.error === undefined
            ? {}
            : { errors: [...current.metadata.errors, { ...operation.error, at: updatedAt }] }),
        },
        updatedAt,
        version: current.version + operation.versionDelta,
      })
      return { current, saved }
    }
    case 'session.get': {
      const id =
        typeof operation.session === 'string'
          ? operation.session
          : pick(known.sessions, operation.session)?.id
      if (id === undefined) return 'skipped'
      return storage.sessions.get({
        id,
        ...(operation.company === undefined ? {} : { companyId: company(operation.company) }),
      })
    }
    case 'session.findOpen': {
      const integrationId = pick(known.integrations, operation.integration)!.id
      return storage.sessions.findOpen({ integrationId, clientId: operation.clientId })
    }
    case 'session.findOpenMany': {
      const integrationId = pick(known.integrations, operation.integration)!.id
      const found = await storage.sessions.findOpenMany({ integrationId, clientIds: operation.clientIds })
      return unordered(found, (session) => session.id)
    }
    case 'session.list': {
      const integrationId =
        operation.integration === undefined ? undefined : integrationIdOf(known, operation.integration)
      return pagesOf((cursor) =>
        storage.sessions.list({
          companyId: company(operation.company),
          ...(operation.state === undefined ? {} : { state: operation.state }),
          ...(integrationId === undefined ? {} : { integrationId }),
          limit: operation.limit,
          cursor,
        }),
      )
    }
    case 'message.insert': {
      const message = newMessageOf(known, operation.message)
      if (message === undefined) return 'skipped'
      const inserted = await storage.messages.insert(message, { intoOpenSession: operation.intoOpenSession })
      return remember(known, message.integrationId, [inserted])
    }
    case 'message.insertMany': {
      const messages = operation.messages.map((message) => newMessageOf(known, message))
      if (messages.some((message) => message === undefined)) return 'skipped'
      const inserted = await storage.messages.insertMany(messages as NewMessage[], {
        intoOpenSession: operation.intoOpenSession,
      })
      return inSequenceOrder(
        inserted.flatMap((message, position) =>
          remember(known, messages[position]!.integrationId, [message]),
        ),
      )
    }
    case 'message.get': {
      const id =
        typeof operation.message === 'string'
          ? operation.message
          : pick([...known.messages.keys()], operation.message)
      if (id === undefined) return 'skipped'
      return storage.messages.get({
        id,
        ...(operation.company === undefined ? {} : { companyId: company(operation.company) }),
      })
    }
    case 'message.findByExternalId': {
      const integrationId = pick(known.integrations, operation.integration)!.id
      return storage.messages.findByExternalId({ integrationId, externalId: operation.externalId })
    }
    case 'message.findByExternalIds': {
      const integrationId = pick(known.integrations, operation.integration)!.id
      const found = await storage.messages.findByExternalIds({
        integrationId,
        externalIds: operation.externalIds,
      })
      return unordered(found, (message) => message.id)
    }
    case 'message.list': {
      const session = pick(known.sessions, operation.session)
      if (session === undefined) return 'skipped'
      const after =
        operation.after === undefined ? undefined : pick([...known.messages.values()], operation.after)
      return inSequenceOrder(
        await storage.messages.list({
          sessionId: session.id,
          ...(after === undefined ? {} : { afterSequence: after.sequence }),
          limit: operation.limit,
        }),
      )
    }
    case 'message.history': {
      const session = pick(known.sessions, operation.session)
      const current = pick(
        [...known.messages.values()].filter((message) => message.sessionId === session?.id),
        operation.current,
      )
      if (session === undefined || current === undefined) return 'skipped'
      return inSequenceOrder(
        await storage.messages.history({
          sessionId: session.id,
          currentSequence: current.sequence,
          limit: operation.limit,
        }),
      )
    }
    case 'message.blockPending': {
      const session = pick(known.sessions, operation.session)
      if (session === undefined) return 'skipped'
      const blocked = await storage.messages.blockPending({ sessionId: session.id, roles: operation.roles })
      return unordered(blocked, String)
    }
    case 'webhookLog.add': {
      const log = webhookLogOf(known, operation.log)
      if (log === undefined) return 'skipped'
      await storage.webhookLogs.add(log)
      return 'added'
    }
    case 'webhookLog.addMany': {
      const logs = operation.logs.map((log) => webhookLogOf(known, log))
      if (logs.some((log) => log === undefined)) return 'skipped'
      await storage.webhookLogs.addMany(logs as NewWebhookLog[])
      return 'added'
    }
    case 'webhookLog.flood': {
      const integration = pick(known.floodedIntegrations, operation.company)!
      known.counters.floods += 1
      // Ids of their own, the same on every storage: the flood's number and the entry's position.
      const flood = known.counters.floods
      const logs = Array.from({ length: operation.count }, (_, position) => ({
        id: `00000000-0000-4000-8000-${String(flood).padStart(4, '0')}${String(position).padStart(8, '0')}`,
        companyId: integration.companyId,
        integrationId: integration.id,
        receivedAt: new Date(operation.at.getTime() + (position % 3) * 1000),
        httpStatus: 200,
        outcome: 'queued' as const,
      }))
      // Most in one statement, then one by one past the SQL storage's trim interval (64), so
      // that a trim runs on either path.
      const singly = logs.length - 65
      await storage.webhookLogs.addMany(logs.slice(0, singly))
      for (const log of logs.slice(singly)) await storage.webhookLogs.add(log)
      return 'added'
    }
    case 'webhookLog.list': {
      const integration = pick(
        operation.flooded ? known.floodedIntegrations : known.integrations,
        operation.integration,
      )!
      return pagesOf((cursor) =>
        storage.webhookLogs.list({
          companyId: company(operation.company),
          integrationId: integration.id,
          limit: operation.limit,
          cursor,
        }),
      )
    }
    case 'billing.adjust': {
      const companyId = company(operation.company)
      await storage.billing.adjust({ companyId, amountUsd: operation.amount, at: operation.at })
      return storage.billing.getBalance({ companyId })
    }
    case 'billing.recordUsage': {
      const companyId = company(operation.company)
      const record = await storage.billing.recordUsage({
        id: idOf(operation.id),
        companyId,
        sessionId: operation.sessionId,
        model: operation.model,
        inputTokens: operation.inputTokens,
        outputTokens: operation.outputTokens,
        costUsd: operation.cost,
        at: operation.at,
      })
      return { record, balance: await storage.billing.getBalance({ companyId }) }
    }
    case 'billing.getBalance':
      return storage.billing.getBalance({ companyId: company(operation.company) })
    case 'billing.listUsage':
      return pagesOf((cursor) =>
        storage.billing.listUsage({ companyId: company(operation.company), limit: operation.limit, cursor }),
      )
    case 'agent.create': {
      const agent = await storage.agents.create({
        ...agentInputSchema.parse({ name: 'placeholder' }),
        name: operation.name,
        ...(operation.role === undefined ? {} : { role: operation.role }),
        systemPrompt: operation.systemPrompt,
        companyId: company(operation.company),
        at: operation.at,
      })
      known.agents.push({ companyId: agent.companyId, id: agent.id })
      return agent
    }
    case 'agent.update': {
      const agent = pick(known.agents, operation.agent)!
      return storage.agents.update({ ...agent, patch: operation.patch, at: operation.at })
    }
    case 'agent.delete': {
      const agent = pick(known.agents, operation.agent)!
      return storage.agents.delete(agent)
    }
    case 'agent.get': {
      const agent = pick(known.agents, operation.agent)!
      return storage.agents.get({ companyId: company(operation.company), id: agent.id })
    }
    case 'agent.getMany': {
      const ids = operation.agents.map((position) => pick(known.agents, position)!.id)
      const found = await storage.agents.getMany({ companyId: company(operation.company), ids })
      return unordered(found, (agent) => String(agent.id))
    }
    case 'agent.list':
      return pagesOf((cursor) =>
        storage.agents.list({ companyId: company(operation.company), limit: operation.limit, cursor }),
      )
    case 'agent.isReferenced': {
      const agent = pick(known.agents, operation.agent)!
      return storage.agents.isReferenced(agent)
    }
    case 'integration.create': {
      const agent = pick(known.agents, operation.agent)!
      const integration = await storage.integrations.create({
        companyId: agent.companyId,
        type: operation.type,
        name: operation.name,
        active: operation.active,
        entryAgentId: agent.id,
        config: operation.config,
        webhookSecret: operation.webhookSecret,
        at: operation.at,
      })
      known.integrations.push({
        companyId: integration.companyId,
        id: integration.id,
        entryAgentId: integration.entryAgentId,
      })
      return integration
    }
    case 'integration.update': {
      const integration = pick(known.integrations, operation.integration)!
      return storage.integrations.update({
        companyId: integration.companyId,
        id: integration.id,
        patch: operation.patch,
        at: operation.at,
      })
    }
    case 'integration.delete': {
      const integration = pick(known.integrations, operation.integration)!
      return storage.integrations.delete({ companyId: integration.companyId, id: integration.id })
    }
    case 'integration.get':
      return storage.integrations.get({
        id: integrationIdOf(known, operation.integration),
        ...(operation.company === undefined ? {} : { companyId: company(operation.company) }),
      })
    case 'integration.getMany': {
      const ids = operation.integrations.map((named) => integrationIdOf(known, named))
      return unordered(await storage.integrations.getMany({ ids }), (integration) => integration.id)
    }
    case 'integration.list':
      return pagesOf((cursor) =>
        storage.integrations.list({ companyId: company(operation.company), limit: operation.limit, cursor }),
      )
    case 'job.enqueue': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      await storage.jobs.enqueue(newJobOf(message, operation.availableAt))
      return storage.jobs.pending({ sessionId: message.sessionId })
    }
    case 'job.enqueueMany': {
      const messages = operation.messages.map((position) => messageAt(known, position))
      if (messages.some((message) => message === undefined)) return 'skipped'
      await storage.jobs.enqueueMany(messages.map((message) => newJobOf(message!, operation.availableAt)))
      return storage.jobs.pending({})
    }
    case 'job.enqueueLeased': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      const lease = await storage.jobs.enqueueLeased(newJobOf(message, operation.availableAt), {
        now: operation.now,
        leaseMs: operation.leaseMs,
        token: operation.token,
      })
      return leased(known, lease)
    }
    case 'job.enqueueManyLeased': {
      const messages = operation.jobs.map((job) => messageAt(known, job.message))
      if (messages.some((message) => message === undefined)) return 'skipped'
      const leases = await storage.jobs.enqueueManyLeased(
        operation.jobs.map((job, position) => ({
          ...newJobOf(messages[position]!, operation.availableAt),
          token: job.token,
        })),
        { now: operation.now, leaseMs: operation.leaseMs },
      )
      return leases.map((lease) => leased(known, lease))
    }
    case 'job.lease':
      return leased(
        known,
        await storage.jobs.lease({ now: operation.now, leaseMs: operation.leaseMs, token: operation.token }),
      )
    case 'job.renew':
      return storage.jobs.renew({
        jobId: jobIdOf(known, operation.message),
        token: operation.token,
        now: operation.now,
        leaseMs: operation.leaseMs,
      })
    case 'job.complete':
      return storage.jobs.complete({ jobId: jobIdOf(known, operation.message), token: operation.token })
    case 'job.fail':
      return storage.jobs.fail({
        jobId: jobIdOf(known, operation.message),
        token: operation.token,
        retryAt: operation.retryAt,
        dead: operation.dead,
        error: operation.error,
      })
    case 'job.pending': {
      const session = operation.session === undefined ? undefined : pick(known.sessions, operation.session)
      return storage.jobs.pending(session === undefined ? {} : { sessionId: session.id })
    }
    case 'outbox.add': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      await storage.outbox.add({
        messageId: message.id,
        sessionId: message.sessionId,
        companyId: message.companyId,
        integrationId: message.integrationId,
        availableAt: operation.availableAt,
      })
      return 'added'
    }
    case 'outbox.claim': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      return storage.outbox.claim({
        messageId: message.id,
        now: operation.now,
        leaseMs: operation.leaseMs,
        leaseToken: operation.token,
      })
    }
    case 'outbox.claimNext':
      return storage.outbox.claimNext({
        sessionId: pick(known.sessions, operation.session)!.id,
        now: operation.now,
        leaseMs: operation.leaseMs,
        leaseToken: operation.token,
      })
    case 'outbox.claimDue':
      return storage.outbox.claimDue({
        now: operation.now,
        limit: operation.limit,
        leaseMs: operation.leaseMs,
        leaseToken: operation.token,
      })
    case 'outbox.remove': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      const removed = await storage.outbox.remove({
        messageId: message.id,
        leaseToken: operation.token,
        ...(operation.delivery === undefined ? {} : { delivery: operation.delivery }),
      })
      return { removed, message: await storage.messages.get({ id: message.id }) }
    }
    case 'outbox.retryLater': {
      const message = messageAt(known, operation.message)
      if (message === undefined) return 'skipped'
      return storage.outbox.retryLater({
        messageId: message.id,
        leaseToken: operation.token,
        attempts: operation.attempts,
        availableAt: operation.availableAt,
      })
    }
    case 'outbox.removeForSession': {
      const session = pick(known.sessions, operation.session)!
      return unordered(await storage.outbox.removeForSession({ sessionId: session.id }), String)
    }
    case 'outbox.removeWaiting': {
      const session = pick(known.sessions, operation.session)!
      const messageIds = operation.messages.flatMap((position) => messageAt(known, position)?.id ?? [])
      return unordered(
        await storage.outbox.removeWaiting({ sessionId: session.id, messageIds, now: operation.now }),
        String,
      )
    }
    case 'humanTransfer.add': {
      const session = pick(known.sessions, operation.session)!
      const agent = pick(known.agents, operation.agent)!
      await storage.humanTransfers.add({
        id: operation.id,
        sessionId: session.id,
        companyId: session.companyId,
        integrationId: session.integrationId,
        agentId: agent.id,
        ...(operation.operatorId === undefined ? {} : { operatorId: operation.operatorId }),
        ...(operation.groupId === undefined ? {} : { groupId: operation.groupId }),
        systemMessage: operation.systemMessage,
        pauses: operation.pauses,
        after: operation.after.flatMap((position) => messageAt(known, position)?.id ?? []),
        leaseToken: operation.token,
        leasedUntil: operation.leasedUntil,
      })
      return 'added'
    }
    case 'humanTransfer.claim':
      return storage.humanTransfers.claim({
        id: operation.id,
        now: operation.now,
        leaseMs: operation.leaseMs,
        leaseToken: operation.token,
      })
    case 'humanTransfer.claimDue':
      return storage.humanTransfers.claimDue({
        now: operation.now,
        limit: operation.limit,
        leaseMs: operation.leaseMs,
        leaseToken: operation.token,
      })
    case 'humanTransfer.remove':
      return storage.humanTransfers.remove({ id: operation.id, leaseToken: operation.token })
    case 'company.get':
      return storage.companies.get({ id: known.companies[operation.company] ?? 9999 })
    case 'user.create': {
      const user = await storage.users.create({
        id: operation.id,
        email: operation.email,
        companyId: company(operation.company),
        passwordHash: 'argon2id$hash',
        at: operation.at,
      })
      known.users.push({ id: user.id, companyId: user.companyId })
      return user
    }
    case 'user.findByEmail':
      return storage.users.findByEmail({ email: operation.email })
    case 'user.get':
      return storage.users.get({ id: operation.id })
    case 'refreshToken.create': {
      const user = pick(known.users, operation.user)!
      return storage.refreshTokens.create({
        id: operation.id,
        tokenHash: operation.tokenHash,
        userId: user.id,
        companyId: user.companyId,
        loginId: operation.loginId,
        expiresAt: operation.expiresAt,
        at: operation.at,
      })
    }
    case 'refreshToken.findByHash':
      return storage.refreshTokens.findByHash({ tokenHash: operation.tokenHash })
    case 'refreshToken.markUsed':
      return storage.refreshTokens.markUsed({ id: operation.id, at: operation.at })
    case 'refreshToken.revokeLogin':
      await storage.refreshTokens.revokeLogin({ loginId: operation.loginId, at: operation.at })
      return 'revoked'
    case 'refreshToken.revokeUser':
      await storage.refreshTokens.revokeUser({ userId: operation.userId, at: operation.at })
      return 'revoked'
    case 'apiToken.create': {
      const user = pick(known.users, operation.user)!
      return storage.apiTokens.create({
        id: operation.id,
        companyId: user.companyId,
        userId: user.id,
        name: operation.name,
        tokenHash: operation.tokenHash,
        at: operation.at,
      })
    }
    case 'apiToken.findByHash':
      return storage.apiTokens.findByHash({ tokenHash: operation.tokenHash })
    case 'apiToken.list':
      return pagesOf((cursor) =>
        storage.apiTokens.list({ companyId: company(operation.company), limit: operation.limit, cursor }),
      )
    case 'apiToken.delete':
      return storage.apiTokens.delete({ companyId: company(operation.company), id: operation.id })
    case 'loginFailure.record':
      await storage.loginFailures.record({ emailKey: operation.emailKey, at: operation.at })
      return storage.loginFailures.count({ emailKey: operation.emailKey, since: new Date(0) })
    case 'loginFailure.count':
      return storage.loginFailures.count({ emailKey: operation.emailKey, since: operation.since })
    case 'loginFailure.oldestSince':
      return storage.loginFailures.oldestSince({ emailKey: operation.emailKey, since: operation.since })
    case 'loginFailure.forget':
      await storage.loginFailures.forget({ emailKey: operation.emailKey, at: operation.at })
      return storage.loginFailures.count({ emailKey: operation.emailKey, since: new Date(0) })
    case 'loginFailure.forgetBefore':
      await storage.loginFailures.forgetBefore({ before: operation.before })
      return 'forgotten'
    case 'webhookDelivery.record':
      return storage.webhookDeliveries.record({
        integrationId: pick(known.integrations, operation.integration)!.id,
        deliveryId: operation.deliveryId,
        at: operation.at,
      })
    case 'webhookDelivery.forget':
      await storage.webhookDeliveries.forget({
        integrationId: pick(known.integrations, operation.integration)!.id,
        deliveryId: operation.deliveryId,
      })
      return 'forgotten'
    case 'knowledge.create': {
      const agent = pick(known.agents, operation.agent)!
      const document = await storage.knowledgeDocuments.create({
        id: idOf(operation.id),
        companyId: agent.companyId,
        agentId: agent.id,
        title: operation.title,
        content: operation.content,
        at: operation.at,
      })
      known.documents.push(document.id)
      return document
    }
    case 'knowledge.get': {
      const agent = pick(known.agents, operation.agent)!
      const id = pick(known.documents, operation.document)
      if (id === undefined) return 'skipped'
      return storage.knowledgeDocuments.get({ ...agentOf(agent), id })
    }
    case 'knowledge.list': {
      const agent = pick(known.agents, operation.agent)!
      return pagesOf((cursor) =>
        storage.knowledgeDocuments.list({ ...agentOf(agent), limit: operation.limit, cursor }),
      )
    }
    case 'knowledge.delete': {
      const agent = pick(known.agents, operation.agent)!
      const id = pick(known.documents, operation.document)
      if (id === undefined) return 'skipped'
      return storage.knowledgeDocuments.delete({ ...agentOf(agent), id })
    }
    case 'pipeline.create':
      return storage.pipelines.create({
        companyId: company(operation.company),
        name: operation.name,
        isDefault: operation.isDefault,
        stages: operation.stages,
        at: operation.at,
      })
    case 'pipeline.list':
      return storage.pipelines.list({ companyId: company(operation.company) })
  }
}

async function outcomeOf(known: Known, repositories: Repositories, operation: Operation): Promise<Outcome> {
  try {
    return { ok: observed(await apply(known, repositories, operation)) }
  } catch (error) {
    if (error instanceof BrokenPromise) throw error
    return { threw: failureOf(error) }
  }
}

/**
 * Calls that take a number from a sequence (an agent's id, an integration's, a pipeline's and its
 * stages'), left out after a failure in a transaction: the transaction is doomed and its writes
 * vanish, but the memory storage still takes a number, like a sequence not taken back by a
 * rollback, where PostgreSQL refuses the call before it takes one. The next id then differs: a gap
 * the ids may have, which is each storage's own.
 */
const NUMBERED: ReadonlySet<string> = new Set(['agent.create', 'integration.create', 'pipeline.create'])

/**
 * A transaction's answer: each call's until the first that fails (PostgreSQL answers the calls after
 * it in the aborted transaction with errors of its own, the memory storage as usual: the port does
 * not say what they answer), then whether the transaction committed or rejected, and with which
 * failure. What a rejected transaction added is forgotten, as the storage forgot it.
 */
async function transactionOutcome(
  subject: Subject,
  operation: AnyOperation & { kind: 'transaction' },
): Promise<unknown> {
  const before = structuredClone(subject.known)
  const calls: Outcome[] = []
  let failed = false
  let committed: Outcome
  try {
    await subject.storage.transaction(async (tx) => {
      for (const call of operation.operations) {
        if (failed && NUMBERED.has(call.kind)) continue
        const outcome = await outcomeOf(subject.known, tx, call)
        if (!failed) calls.push(outcome)
        failed ||= 'threw' in outcome
      }
      if (operation.rollBack) throw new Error('rolled back by its function')
    })
    committed = { ok: 'committed' }
  } catch (error) {
    if (error instanceof BrokenPromise) throw error
    committed = { threw: failureOf(error) }
    Object.assign(subject.known, before)
  }
  return { calls, committed }
}

async function stepOutcome(subject: Subject, operation: AnyOperation): Promise<unknown> {
  if (operation.kind === 'transaction') return transactionOutcome(subject, operation)
  return outcomeOf(subject.known, subject.storage, operation)
}

/**
 * Two companies, each with a user, an agent, an integration and a session holding a customer's
 * message and a reply: what calls may name from the start.
 */
async function seeded(storage: Storage): Promise<Known> {
  const known = knownNothing()
  const at = new Date(BASE)
  for (const companyName of ['Acme', 'Globex']) {
    const company = await storage.companies.create({
      companyName,
      publicId: `00000000-0000-4000-9000-00000000000${known.companies.length}`,
      at,
    })
    known.companies.push(company.id)
    const user = await storage.users.create({
      id: `00000000-0000-4000-c000-00000000000${known.users.length}`,
      email: `owner${known.users.length}@example.test`,
      companyId: company.id,
      passwordHash: 'argon2id$hash',
      at,
    })
    known.users.push({ id: user.id, companyId: company.id })
    const agent = await storage.agents.create({
      ...agentInputSchema.parse({ name: 'Reception', systemPrompt: 'You help customers.' }),
      companyId: company.id,
      at,
    })
    known.agents.push({ companyId: company.id, id: agent.id })
    const integration = await storage.integrations.create({
      companyId: company.id,
      type: 'webchat',
      name: 'Website',
      active: true,
      entryAgentId: agent.id,
      config: {},
      webhookSecret: null,
      at,
    })
    known.integrations.push({ companyId: company.id, id: integration.id, entryAgentId: agent.id })
    const flooded = await storage.integrations.create({
      companyId: company.id,
      type: 'msgplatform',
      name: 'Flooded',
      active: true,
      entryAgentId: agent.id,
      config: {},
      webhookSecret: null,
      at,
    })
    known.floodedIntegrations.push({ companyId: company.id, id: flooded.id })
    const createdAt = at.toISOString()
    const session = await storage.sessions.create({
      id: `00000000-0000-4000-a000-00000000000${known.sessions.length}`,
      companyId: company.id,
      integrationId: integration.id,
      customer: { clientId: 'first customer' },
      state: 'ongoing',
      activeAgentId: agent.id,
      entryAgentId: agent.id,
      metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
      createdAt,
      updatedAt: createdAt,
    })
    known.sessions.push({ id: session.id, companyId: company.id, integrationId: integration.id })
    const messages = await storage.messages.insertMany(
      (['customer', 'agent'] as const).map((role, position) => ({
        id: `00000000-0000-4000-a000-0000000001${known.sessions.length}${position}`,
        companyId: company.id,
        sessionId: session.id,
        integrationId: integration.id,
        role,
        text: `${role} says hello`,
        at,
        ...(role === 'agent' ? { agentId: agent.id, delivery: 'pending' as const } : { externalId: 'seed' }),
      })),
    )
    remember(known, integration.id, messages)
  }
  return known
}

function describeOperation(operation: AnyOperation): string {
  const shown = JSON.stringify(operation, (_key, value) =>
    typeof value === 'string' && value.length > 40 ? `${value.slice(0, 20)}…(${value.length})` : value,
  )
  return shown.length > 600 ? `${shown.slice(0, 600)}…` : shown
}

describe('the Storage port', () => {
  it(
    'answers a random sequence of calls alike on memory and SQL',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(operation, { minLength: 1, maxLength: 60, size: 'max' }),
          async (operations) => {
            const memory = createMemoryStorage()
            const subjects: Subject[] = [{ name: 'memory', storage: memory, known: await seeded(memory) }]
            try {
              for (const { name, db } of databases) {
                await emptied(db)
                const storage = await createPostgresStorage({ db })
                subjects.push({ name, storage, known: await seeded(storage) })
              }
              for (const [step, operation] of operations.entries()) {
                const [reference, ...others] = await Promise.all(
                  subjects.map((subject) => stepOutcome(subject, operation)),
                )
                count(operation, reference)
                for (const [position, outcome] of others.entries()) {
                  expect(
                    outcome,
                    `step ${step} on ${subjects[position + 1]!.name}: ${describeOperation(operation)}`,
                  ).toEqual(reference)
                }
              }
            } finally {
              for (const subject of subjects) await subject.storage.close()
            }
          },
        ),
        { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
      )
    },
    Math.max(60_000, RUNS * 10_000),
  )
})
