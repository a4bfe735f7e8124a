/**
 * The job queue end to end: customer messages ingested → leased → turn (a model that answers at
 * once) → committed → reply handed to the channel, on PostgreSQL and on PGlite, each next to the
 * raw single-row insert rate of the same database measured in the same run.
 *
 *   npm run bench:queue -w @switchboard/bench
 *
 * PostgreSQL: DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test; the bench works in a
 * schema of its own and drops it. PGlite: file-backed in a temporary folder, as the reference
 * server keeps it in DATA_DIR. Without a reachable server the PostgreSQL row says why.
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  createPgDb,
  createPgliteDb,
  createPostgresKnowledgeIndex,
  createPostgresStorage,
  type Db,
} from '@switchboard/adapter-postgres'
import { type Connector, createSwitchboard, type Storage } from '@switchboard/core'
import { seedChannel } from '@switchboard/core/testing'
import { createZeroLatencyModel } from './core-turn/zero-latency-model.js'

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test'
/** The reference server's pool size; the raw inserts keep as many in flight. */
const POOL_SIZE = 10
const INSERT_SECONDS = 3
const CUSTOMERS = 200
const MESSAGES_PER_CUSTOMER = 5
const WARM_UP_CUSTOMERS = 40
/**
 * Loads of the latency rows, in messages per second: light, and near what one process sustains,
 * one message at a time; and bursts of new customers writing at once (stored together), below
 * what the process sustains.
 */
const LATENCY_LOADS = [
  { rate: 25, burst: 1 },
  { rate: 100, burst: 1 },
  { rate: 160, burst: 8 },
] as const
const LATENCY_SECONDS = 5
/** The aim for PostgreSQL at moderate load, checked at each rate. */
const TARGET_P99_MS = 50
const DRAIN_LIMIT_MS = 120_000

interface Latency {
  readonly rate: number
  /** Messages sent at once, every `burst / rate` seconds. */
  readonly burst: number
  readonly ingestP99Ms: number
  readonly endToEndP50Ms: number
  readonly endToEndP99Ms: number
  readonly endToEndMaxMs: number
}

interface Row {
  readonly name: string
  readonly insertsPerSecond: number
  readonly processedPerSecond: number
  /** This process's CPU time (every thread) per message during the throughput run. */
  readonly cpuMsPerMessage: number
  readonly latencies: readonly Latency[]
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

function percentile(values: readonly number[], share: number): number {
  const sorted = [...values].sort((left, right) => left - right)
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)] ?? Number.NaN
}

/** Single-row INSERTs, each its own transaction (autocommit), POOL_SIZE in flight. */
async function measureInserts(db: Db): Promise<number> {
  await db.query(
    'CREATE TABLE bench_inserts (id bigserial PRIMARY KEY, payload text NOT NULL, at timestamptz NOT NULL DEFAULT now())',
  )
  const insertFor = async (ms: number) => {
    const until = performance.now() + ms
    let count = 0
    await Promise.all(
      Array.from({ length: POOL_SIZE }, async () => {
        while (performance.now() < until) {
          await db.query('INSERT INTO bench_inserts (payload) VALUES ($1)', [
            'a customer message of some length',
          ])
          count += 1
        }
      }),
    )
    return count
  }
  await insertFor(500)
  const started = performance.now()
  const count = await insertFor(INSERT_SECONDS * 1000)
  return count / ((performance.now() - started) / 1000)
}

/** Knows when each customer's reply reached the channel: a new customer per message, by client id. */
function createTimingConnector() {
  const delivered = new Map<string, number>()
  const waiters = new Map<string, () => void>()
  const connector: Connector = {
    type: 'bench',
    async send({ session }) {
      const clientId = session.customer.clientId
      delivered.set(clientId, performance.now())
      waiters.get(clientId)?.()
      return { ok: true }
    },
  }
  return {
    connector,
    delivered,
    count: () => delivered.size,
    waitFor(clientId: string): Promise<void> {
      if (delivered.has(clientId)) return Promise.resolve()
      return new Promise((resolve) => waiters.set(clientId, resolve))
    },
  }
}

async function seed(storage: Storage): Promise<string> {
  const { companyId, integration } = await seedChannel(storage, {
    type: 'bench',
    agent: { name: 'Bench agent', systemPrompt: 'You answer customers.' },
  })
  // The reference server enforces credits; the bench pays for every turn like it would.
  await storage.billing.adjust({ companyId, amountUsd: 1_000_000, at: new Date() })
  return integration.id
}

async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + DRAIN_LIMIT_MS
  while (!condition()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(2)
  }
}

async function measureQueue(name: string, db: Db): Promise<Row> {
  process.stderr.write(`${name}: raw inserts…\n`)
  const insertsPerSecond = await measureInserts(db)
  const storage = await createPostgresStorage({ db })
  const knowledge = await createPostgresKnowledgeIndex({ db })
  const integrationId = await seed(storage)
  const timing = createTimingConnector()
  const switchboard = createSwitchboard({
    storage,
    knowledge,
    model: createZeroLatencyModel(),
    connectors: [timing.connector],
    enforceCredits: true,
  })
  const ingest = (clientId: string) =>
    switchboard
      .ingest({ integrationId, clientId, text: 'Hi, what does the pro plan cost?' })
      .then((result) => {
        if (result.isErr()) throw new Error(`ingest failed: ${result.error.code}`)
      })

  try {
    // Throughput: every customer writes its messages one after another, each once the last was
    // stored; all customers at once. Replies are counted per customer, so the last one closes it.
    const burst = async (prefix: string, customers: number) => {
      let replies = 0
      const count = () => {
        replies += 1
      }
      switchboard.events.on('message-delivered', count)
      const cpuBefore = process.cpuUsage()
      const started = performance.now()
      await Promise.all(
        Array.from({ length: customers }, async (_, customer) => {
          for (let message = 0; message < MESSAGES_PER_CUSTOMER; message++) {
            await ingest(`${prefix}-${customer}`)
          }
        }),
      )
      await waitUntil(() => replies >= customers * MESSAGES_PER_CUSTOMER, `${prefix} replies`)
      switchboard.events.off('message-delivered', count)
      const seconds = (performance.now() - started) / 1000
      const cpu = process.cpuUsage(cpuBefore)
      const messages = customers * MESSAGES_PER_CUSTOMER
      return { perSecond: messages / seconds, cpuMsPerMessage: (cpu.user + cpu.system) / 1000 / messages }
    }
    process.stderr.write(`${name}: warm-up…\n`)
    await burst('warm-up', WARM_UP_CUSTOMERS)
    process.stderr.write(`${name}: throughput…\n`)
    const throughput = await burst('burst', CUSTOMERS)
    await switchboard.idle()

    // Latency at steady rates: a new customer each time, so its reply names it.
    const latencies: Latency[] = []
    for (const { rate, burst } of LATENCY_LOADS) {
      process.stderr.write(`${name}: latency at ${rate} msg/s, ${burst} at once…\n`)
      const ingestMs: number[] = []
      const endToEndMs: number[] = []
      const inFlight: Promise<void>[] = []
      const started = performance.now()
      for (let index = 0; index < rate * LATENCY_SECONDS; index++) {
        if (index % burst === 0) await sleep(started + (index * 1000) / rate - performance.now())
        const clientId = `steady-${rate}-${burst}-${index}`
        const sentAt = performance.now()
        inFlight.push(
          ingest(clientId).then(async () => {
            ingestMs.push(performance.now() - sentAt)
            await timing.waitFor(clientId)
            endToEndMs.push(timing.delivered.get(clientId)! - sentAt)
          }),
        )
      }
      await Promise.all(inFlight)
      latencies.push({
        rate,
        burst,
        ingestP99Ms: percentile(ingestMs, 0.99),
        endToEndP50Ms: percentile(endToEndMs, 0.5),
        endToEndP99Ms: percentile(endToEndMs, 0.99),
        endToEndMaxMs: Math.max(...endToEndMs),
      })
    }
    return {
      name,
      insertsPerSecond,
      processedPerSecond: throughput.perSecond,
      cpuMsPerMessage: throughput.cpuMsPerMessage,
      latencies,
    }
  } finally {
    await switchboard.stop()
    await storage.close()
  }
}

async function onPostgres(connectionString: string): Promise<Row | string> {
  const schema = `bench_queue_${randomBytes(6).toString('hex')}`
  const admin = createPgDb({ connectionString, max: 1, connectionTimeoutMillis: 5_000 })
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
  } catch (error) {
    await admin.close()
    return `PostgreSQL not measured: ${error instanceof Error ? error.message : String(error)}`
  }
  const db = createPgDb({ connectionString, max: POOL_SIZE, options: `-c search_path=${schema}` })
  try {
    return await measureQueue('PostgreSQL', db)
  } finally {
    await db.close()
    await admin.query(`DROP SCHEMA ${schema} CASCADE`)
    await admin.close()
  }
}

async function onPglite(): Promise<Row> {
  const dataDir = await mkdtemp(join(tmpdir(), 'bench-queue-pglite-'))
  const db = await createPgliteDb({ dataDir })
  try {
    return await measureQueue('PGlite (file)', db)
  } finally {
    await db.close()
    await rm(dataDir, { recursive: true, force: true })
  }
}

function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((cell, index) => (index === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[index]!)))
    .join('  ')
}

function printTable(header: readonly string[], body: readonly (readonly string[])[]): void {
  const widths = header.map((_, column) =>
    Math.max(...[header, ...body].map((cells) => cells[column]!.length)),
  )
  console.log(formatRow(header, widths))
  for (const cells of body) console.log(formatRow(cells, widths))
  console.log('')
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  const connectionString = process.env.DATABASE_URL || DEFAULT_DATABASE_URL
  console.log(
    'queue: ingest → lease → turn (zero-latency model) → commit → reply handed to the channel, one process',
  )
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
  console.log(
    `raw inserts/s: single-row INSERTs in autocommit, ${POOL_SIZE} in flight, ${INSERT_SECONDS} s, same database, same run`,
  )
  console.log(
    `processed msg/s: ${CUSTOMERS} customers × ${MESSAGES_PER_CUSTOMER} messages at once (each customer waits for ` +
      'each ingest), until every reply reached the channel; worker pool of 8, credits enforced',
  )
  console.log(
    `latency: new customers at a steady rate for ${LATENCY_SECONDS} s, one at a time or in bursts written at once; ` +
      'ingest = ingest() called → resolved; e2e = ingest() called → reply handed to the connector',
  )
  console.log('')

  const results = [await onPostgres(connectionString), await onPglite()]
  const rows = results.filter((result): result is Row => typeof result !== 'string')
  printTable(
    ['', 'raw inserts/s', 'processed msg/s', 'msg ÷ inserts', 'cpu ms/msg'],
    rows.map((row) => [
      row.name,
      row.insertsPerSecond.toFixed(0),
      row.processedPerSecond.toFixed(0),
      (row.processedPerSecond / row.insertsPerSecond).toFixed(3),
      row.cpuMsPerMessage.toFixed(2),
    ]),
  )
  printTable(
    ['', 'load msg/s', 'at once', 'ingest p99 ms', 'e2e p50 ms', 'e2e p99 ms', 'e2e max ms'],
    rows.flatMap((row) =>
      row.latencies.map((latency) => [
        row.name,
        String(latency.rate),
        String(latency.burst),
        latency.ingestP99Ms.toFixed(1),
        latency.endToEndP50Ms.toFixed(1),
        latency.endToEndP99Ms.toFixed(1),
        latency.endToEndMaxMs.toFixed(1),
      ]),
    ),
  )
  for (const result of results) if (typeof result === 'string') console.log(result)
  const postgres = rows.find((row) => row.name === 'PostgreSQL')
  for (const latency of postgres?.latencies ?? []) {
    console.log(
      `${latency.endToEndP99Ms < TARGET_P99_MS ? 'meets' : 'misses'} the aim of end-to-end p99 < ${TARGET_P99_MS} ms ` +
        `on PostgreSQL at ${latency.rate} msg/s, ${latency.burst} at once (${latency.endToEndP99Ms.toFixed(1)} ms)`,
    )
  }
  console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
}

main().catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
