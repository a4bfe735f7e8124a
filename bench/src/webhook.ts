/**
 * Signed-webhook requests per second and p99 through the reference server, next to an Express
 * route that only checks the HMAC, in the same run. autocannon sends the load from a worker
 * thread; each request is a new, freshly signed customer message.
 *
 *   npm run bench:webhook -w @switchboard/bench
 */
import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { readConfig, startReferenceServer } from '@switchboard/reference-server'
import autocannon from 'autocannon'
import { startHmacOnlyServer } from './webhook/hmac-only-server.js'
import { startReplySink } from './webhook/reply-sink.js'

const LOAD = { connections: 10, warmUpSeconds: 1, seconds: 5 }
const SECRET = 'bench-webhook-secret-0123456789'
const CUSTOMERS = 200
/** The aim for the service against the HMAC-only route (on PostgreSQL). */
const TARGET_RATIO = 0.5
/** How long to wait for the agents to answer the backlog a load leaves behind. */
const DRAIN_LIMIT_MS = 120_000
const SETUP_REQUEST = fileURLToPath(new URL('./webhook/sign-request.cjs', import.meta.url))

interface Row {
  readonly name: string
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly mainThreadMicrosecondsPerRequest: number
  readonly completed: number
  readonly failures: number
}

async function load(name: string, baseUrl: string, path: string): Promise<Row> {
  const run = (seconds: number) =>
    autocannon({
      url: baseUrl,
      connections: LOAD.connections,
      duration: seconds,
      requests: [{ method: 'POST', path, setupRequest: SETUP_REQUEST }],
      // The load generator gets its own thread; the servers measured run in this one.
      workers: 1,
    })
  await run(LOAD.warmUpSeconds)
  const before = performance.eventLoopUtilization()
  const result = await run(LOAD.seconds)
  const busy = performance.eventLoopUtilization(before)
  return {
    name,
    requestsPerSecond: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    mainThreadMicrosecondsPerRequest: (busy.active * 1000) / Math.max(1, result.requests.total),
    completed: result.requests.total,
    failures: result.non2xx + result.errors + result.timeouts,
  }
}

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

function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((cell, index) => (index === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[index]!)))
    .join('  ')
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  process.env.BENCH_WEBHOOK_SECRET = SECRET
  process.env.BENCH_WEBHOOK_CUSTOMERS = String(CUSTOMERS)
  const sink = await startReplySink()
  const baseline = await startHmacOnlyServer(SECRET)
  // No OPENAI_API_KEY: the offline model answers from the knowledge base, in microseconds.
  const service = await startReferenceServer(
    readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent' }),
  )
  try {
    const email = 'bench-webhook@example.com'
    const password = 'a bench password, long enough'
    await api(service.url, '/api/auth/register', null, { email, password, companyName: 'Bench' })
    const login = await api<{ session: { access_token: string } }>(service.url, '/api/auth/login', null, {
      email,
      password,
    })
    const token = login.session.access_token
    const human = await api<{ id: number }>(service.url, '/api/agents', token, {
      name: 'Desk',
      kind: 'human',
    })
    const helper = await api<{ id: number }>(service.url, '/api/agents', token, { name: 'Helper' })
    await api(service.url, `/api/agents/${helper.id}/knowledge`, token, {
      title: 'Orders',
      content: 'Orders arrive within 3 working days. Track yours at example.com/track.',
    })
    const integration = (entryAgentId: number) =>
      api<{ id: string }>(service.url, '/api/integrations', token, {
        type: 'msgplatform',
        name: `Bench ${entryAgentId}`,
        entryAgentId,
        config: { apiBaseUrl: sink.url, apiToken: 'sink-token' },
        webhookSecret: SECRET,
      })
    const storeOnly = await integration(human.id)
    const answered = await integration(helper.id)

    console.log(
      'webhook: signed msgplatform webhooks per second, next to an Express route doing only the HMAC check',
    )
    console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
    console.log(
      `storage: ${service.switchboard.storage.kind} (PGlite and PostgreSQL storage arrive with adapter-postgres; rerun this then)`,
    )
    console.log(
      `load: autocannon 9, ${LOAD.connections} connections, ${LOAD.warmUpSeconds} s warm-up + ${LOAD.seconds} s per row, ` +
        `each request a new message of one of ${CUSTOMERS} customers`,
    )
    console.log('')

    const rows: Row[] = []
    process.stderr.write('load: HMAC check only…\n')
    rows.push(await load('HMAC check only (Express, raw body)', baseline.url, '/api/webhook/msgplatform/1'))
    process.stderr.write('load: reference server, store only…\n')
    rows.push(
      await load(
        'reference server: verify, store, log (human agent, no turn)',
        service.url,
        `/api/webhook/msgplatform/${storeOnly.id}`,
      ),
    )
    await service.switchboard.idle()
    const repliesBefore = await sink.replies()
    process.stderr.write('load: reference server, answered…\n')
    rows.push(
      await load(
        'reference server: the same + agent turn and reply (offline model)',
        service.url,
        `/api/webhook/msgplatform/${answered.id}`,
      ),
    )
    const loadEnded = performance.now()
    const accepted = rows[2]!.completed
    await Promise.race([
      service.switchboard.idle(),
      new Promise((resolve) => setTimeout(resolve, DRAIN_LIMIT_MS)),
    ])
    const drainSeconds = (performance.now() - loadEnded) / 1000
    const replies = (await sink.replies()) - repliesBefore

    const base = rows[0]!.requestsPerSecond
    const header = ['', 'req/s', 'p50 ms', 'p99 ms', 'main µs/req', '× HMAC-only', 'failures']
    const body = rows.map((row) => [
      row.name,
      row.requestsPerSecond.toFixed(0),
      row.p50Ms.toFixed(1),
      row.p99Ms.toFixed(1),
      row.mainThreadMicrosecondsPerRequest.toFixed(0),
      (row.requestsPerSecond / base).toFixed(2),
      String(row.failures),
    ])
    const widths = header.map((_, column) =>
      Math.max(...[header, ...body].map((cells) => cells[column]!.length)),
    )
    console.log(formatRow(header, widths))
    for (const cells of body) console.log(formatRow(cells, widths))
    console.log('')
    console.log(
      `answered row: ${replies} replies reached the platform for the webhooks of its measured and warm-up runs; ` +
        `the agents finished ${drainSeconds.toFixed(1)} s after the load ended (${accepted} measured webhooks)`,
    )
    for (const row of rows.slice(1)) {
      const ratio = row.requestsPerSecond / base
      console.log(
        `${ratio >= TARGET_RATIO ? 'meets' : 'misses'} the aim of ≥ ${TARGET_RATIO} × HMAC-only: ${row.name} (${ratio.toFixed(2)})`,
      )
    }
    if (rows.some((row) => row.failures > 0))
      console.log('WARNING: some requests failed; those rows mean little')
    console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
  } finally {
    await service.close()
    await baseline.close()
    await sink.close()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
