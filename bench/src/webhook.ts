/**
 * Signed-webhook requests per second and p99 through the reference server on each of its storages
 * (memory, PGlite, PostgreSQL), each next to an Express route that only checks the HMAC, measured
 * in turn with it in the same run. autocannon sends the load from a worker thread; each request is
 * a new, freshly signed customer message.
 *
 *   npm run bench:webhook -w @switchboard/bench
 *   npm run bench:webhook:built -w @switchboard/bench   the built packages, as `npm start` runs them
 *   DATABASE_URL=postgres://… npm run bench:webhook -w @switchboard/bench
 *   BENCH_STORAGES=PostgreSQL npm run bench:webhook -w @switchboard/bench   one storage only
 *   BENCH_CONNECTIONS=50 npm run bench:webhook -w @switchboard/bench       other concurrency (default 10)
 */
import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'
import { readConfig, startReferenceServer } from '@switchboard/reference-server'
import { startHmacOnlyServer } from './webhook/hmac-only-server.js'
import { startReplySink } from './webhook/reply-sink.js'
import { type Measured, measureInterleaved, measureOnce, type WebhookTarget } from './webhook/run-load.js'
import {
  type BenchStorage,
  DEFAULT_DATABASE_URL,
  memoryStorage,
  pgliteStorage,
  postgresStorage,
} from './webhook/storages.js'

/** The HMAC-only and store rows alternate 1 s rounds; the answered row runs once, last. */
const LOAD = {
  connections: connectionsFromEnvironment(),
  warmUpSeconds: 1,
  rounds: 5,
  roundSeconds: 1,
  answeredSeconds: 5,
}
const SECRET = 'bench-webhook-secret-0123456789'
const CUSTOMERS = 200
/** The aim for the webhook door against the HMAC-only route (on PostgreSQL). */
const TARGET_RATIO = 0.5
/** How long to wait for the agents to answer the backlog the answered row leaves behind. */
const DRAIN_LIMIT_MS = 30_000

/** Concurrent connections of the load; the aim is stated for the default, 10. */
function connectionsFromEnvironment(): number {
  const given = process.env.BENCH_CONNECTIONS
  if (given === undefined || given === '') return 10
  const connections = Number(given)
  if (!Number.isInteger(connections) || connections < 1 || connections > 1000) {
    throw new Error(`BENCH_CONNECTIONS must be an integer from 1 to 1000, got "${given}"`)
  }
  return connections
}

type RowKind = 'baseline' | 'store' | 'answered'

interface Row extends Measured {
  readonly storage: string
  readonly kind: RowKind
  readonly name: string
}

interface StorageResult {
  readonly storage: string
  readonly rows: readonly Row[]
  /** What became of the answered row's backlog. */
  readonly drain: string
}

type ReplySink = Awaited<ReturnType<typeof startReplySink>>

async function api<Body>(baseUrl: string, path: string, token: string | null, body: unknown): Promise<Body> {
  const response = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`POST ${path}: ${response.status} ${text}`)
  return JSON.parse(text) as Body
}

/**
 * A company made through the API the way a client makes one, with two msgplatform integrations:
 * one whose entry agent is human (webhooks are stored, no turn) and one whose entry agent answers.
 */
async function seed(baseUrl: string, sinkUrl: string): Promise<{ storeOnly: string; answered: string }> {
  const email = 'bench-webhook@example.com'
  const password = 'a bench password, long enough'
  await api(baseUrl, '/api/auth/register', null, { email, password, companyName: 'Bench' })
  const login = await api<{ session: { access_token: string } }>(baseUrl, '/api/auth/login', null, {
    email,
    password,
  })
  const token = login.session.access_token
  const human = await api<{ id: number }>(baseUrl, '/api/agents', token, { name: 'Desk', kind: 'human' })
  const helper = await api<{ id: number }>(baseUrl, '/api/agents', token, { name: 'Helper' })
  await api(baseUrl, `/api/agents/${helper.id}/knowledge`, token, {
    title: 'Orders',
    content: 'Orders arrive within 3 working days. Track yours at example.com/track.',
  })
  const integration = (entryAgentId: number) =>
    api<{ id: string }>(baseUrl, '/api/integrations', token, {
      type: 'msgplatform',
      name: `Bench ${entryAgentId}`,
      entryAgentId,
      config: { apiBaseUrl: sinkUrl, apiToken: 'sink-token' },
      webhookSecret: SECRET,
    })
  const storeOnly = await integration(human.id)
  const answered = await integration(helper.id)
  return { storeOnly: storeOnly.id, answered: answered.id }
}

const STORAGE_KINDS: Readonly<Record<string, string>> = {
  memory: 'memory',
  PGlite: 'pglite',
  PostgreSQL: 'postgres',
}

async function measureStorage(
  storage: BenchStorage,
  baselineUrl: string,
  sink: ReplySink,
): Promise<StorageResult> {
  const progress = (what: string) => process.stderr.write(`${storage.label}: ${what}…\n`)
  progress('starting the reference server')
  // No OPENAI_API_KEY: the offline model answers from the knowledge base, in microseconds.
  const service = await startReferenceServer(
    readConfig({ PORT: '0', LOG_LEVEL: 'silent', ...storage.environment }),
  )
  try {
    const opened = service.switchboard.storage.kind
    if (opened !== STORAGE_KINDS[storage.label]) {
      throw new Error(`${storage.label}: the reference server opened ${opened} storage`)
    }
    const integrations = await seed(service.url, sink.url)
    const webhookPath = (integrationId: string) => `/api/webhook/msgplatform/${integrationId}`
    const baseline: WebhookTarget = {
      name: 'HMAC check only (Express, raw body)',
      baseUrl: baselineUrl,
      path: webhookPath('1'),
    }
    const store: WebhookTarget = {
      name: 'verify, store, log (human agent)',
      baseUrl: service.url,
      path: webhookPath(integrations.storeOnly),
      sampleDatabaseCpu: () => storage.sampleDatabaseCpu(),
    }
    const answer: WebhookTarget = {
      name: '+ agent turn and reply (offline model)',
      baseUrl: service.url,
      path: webhookPath(integrations.answered),
      sampleDatabaseCpu: () => storage.sampleDatabaseCpu(),
    }
    progress(`HMAC check only and verify, store, log: ${LOAD.rounds} rounds each, in turn`)
    const [baselineRow, storeRow] = await measureInterleaved([baseline, store], LOAD)
    await service.switchboard.idle()
    const repliesBefore = await sink.replies()
    progress('+ agent turn and reply')
    const answeredRow = await measureOnce(answer, { ...LOAD, seconds: LOAD.answeredSeconds })
    const loadEnded = performance.now()
    const drained = await Promise.race([
      service.switchboard.idle().then(() => true),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), DRAIN_LIMIT_MS).unref()),
    ])
    const drainSeconds = (performance.now() - loadEnded) / 1000
    const replies = (await sink.replies()) - repliesBefore
    // autocannon leaves out the requests still on their way when a run stops (up to one per
    // connection and run), so a few more replies than counted webhooks are normal.
    const counted = `${replies} replies to ${answeredRow.completed} webhooks (warm-up included)`
    const drain = drained
      ? `${counted}, the last ${drainSeconds.toFixed(1)} s after the load ended`
      : `backlog NOT finished ${drainSeconds.toFixed(0)} s after the load ended: ${counted}`
    const row = (kind: RowKind, target: WebhookTarget, measured: Measured): Row => ({
      ...measured,
      storage: storage.label,
      kind,
      name: target.name,
    })
    return {
      storage: storage.label,
      rows: [
        row('baseline', baseline, baselineRow!),
        row('store', store, storeRow!),
        row('answered', answer, answeredRow),
      ],
      drain,
    }
  } finally {
    progress('closing')
    await service.close()
  }
}

function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((cell, index) => (index < 2 ? cell.padEnd(widths[index]!) : cell.padStart(widths[index]!)))
    .join('  ')
}

const microseconds = (value: number | undefined) => (value === undefined ? '-' : value.toFixed(0))

function printTable(results: readonly StorageResult[]): void {
  const header = [
    'storage',
    '',
    'req/s',
    'rounds',
    'p50 ms',
    'p99 ms',
    'main µs/req',
    'main cpu µs/req',
    'db cpu µs/req',
    '× HMAC-only',
    'failures',
  ]
  const body: string[][] = []
  for (const { storage, rows } of results) {
    const base = rows.find((row) => row.kind === 'baseline')!.requestsPerSecond
    for (const row of rows) {
      body.push([
        row.kind === 'baseline' ? storage : '',
        row.name,
        row.requestsPerSecond.toFixed(0),
        row.kind === 'answered'
          ? '(one run)'
          : `${row.slowestRoundRequestsPerSecond.toFixed(0)}–${row.fastestRoundRequestsPerSecond.toFixed(0)}`,
        row.p50Ms.toFixed(1),
        row.p99Ms.toFixed(1),
        microseconds(row.mainThreadMicrosecondsPerRequest),
        microseconds(row.mainThreadCpuMicrosecondsPerRequest),
        microseconds(row.databaseCpuMicrosecondsPerRequest),
        (row.requestsPerSecond / base).toFixed(2),
        String(row.failures),
      ])
    }
  }
  const widths = header.map((_, column) =>
    Math.max(...[header, ...body].map((cells) => cells[column]!.length)),
  )
  console.log(formatRow(header, widths))
  for (const cells of body) console.log(formatRow(cells, widths))
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  process.env.BENCH_WEBHOOK_SECRET = SECRET
  process.env.BENCH_WEBHOOK_CUSTOMERS = String(CUSTOMERS)
  const databaseUrl = process.env.DATABASE_URL?.trim() || DEFAULT_DATABASE_URL
  const sink = await startReplySink()
  const baseline = await startHmacOnlyServer(SECRET)

  // Each storage is made when its turn comes and removed right after (temporary folder, schema).
  const allStorages: readonly [string, () => Promise<BenchStorage>][] = [
    ['memory', async () => memoryStorage()],
    ['PGlite', () => pgliteStorage()],
    ['PostgreSQL', () => postgresStorage(databaseUrl)],
  ]
  // BENCH_STORAGES=PostgreSQL (a comma-separated list of labels) measures only those.
  const only = process.env.BENCH_STORAGES?.split(',').map((label) => label.trim().toLowerCase())
  const storages = allStorages.filter(([label]) => only === undefined || only.includes(label.toLowerCase()))
  const results: StorageResult[] = []
  const where: string[] = []
  const skipped: string[] = []
  try {
    for (const [label, make] of storages) {
      let storage: BenchStorage
      try {
        storage = await make()
      } catch (error) {
        skipped.push(`${label}: SKIPPED, ${String(error)}`)
        continue
      }
      try {
        where.push(`${storage.label}: ${storage.where}`)
        results.push(await measureStorage(storage, baseline.url, sink))
      } finally {
        await storage.cleanUp()
      }
    }
  } finally {
    await baseline.close()
    await sink.close()
  }

  console.log(
    'webhook: signed msgplatform webhooks per second through the reference server, per storage, next to an Express route doing only the HMAC check',
  )
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
  const server = import.meta.resolve('@switchboard/reference-server')
  console.log(
    server.endsWith('.ts')
      ? 'the reference server from TypeScript sources through tsx (esbuild keepNames: every closure pays a __name call)'
      : `the reference server built, as npm start runs it: ${server}`,
  )
  for (const line of where) console.log(line)
  console.log(
    `load: autocannon 9, ${LOAD.connections} connections, each request a new message of one of ${CUSTOMERS} customers. ` +
      `Per storage: HMAC-only and store rows ${LOAD.warmUpSeconds} s warm-up each, then ${LOAD.rounds} rounds of ${LOAD.roundSeconds} s in turn (medians); ` +
      `answered row ${LOAD.warmUpSeconds} s warm-up + ${LOAD.answeredSeconds} s`,
  )
  console.log('')
  printTable(results)
  console.log('')
  for (const result of results) console.log(`${result.storage}, answered row: ${result.drain}`)
  console.log('')
  for (const { storage, rows } of results) {
    const base = rows.find((row) => row.kind === 'baseline')!.requestsPerSecond
    // The aim is about the door the platform waits on; the answered row shares the CPUs with the
    // turns its webhooks cause, so it shows the whole pipeline and gets no verdict.
    for (const row of rows.filter((candidate) => candidate.kind === 'store')) {
      const ratio = row.requestsPerSecond / base
      console.log(
        `${ratio >= TARGET_RATIO ? 'meets' : 'misses'} the aim of ≥ ${TARGET_RATIO} × HMAC-only: ${storage}, ${row.name} (${ratio.toFixed(2)})`,
      )
    }
  }
  for (const line of skipped) console.log(line)
  const failed = results.some(({ rows }) => rows.some((row) => row.failures > 0))
  if (failed) console.log('WARNING: some requests failed; those rows mean little')
  console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
  if (failed || skipped.length > 0) process.exitCode = 1
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
