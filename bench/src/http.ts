/**
 * Requests per second of the service's HTTP edge next to an Express hello-world route, both in
 * this process; autocannon sends the load from a worker thread.
 *
 *   npm run bench:http -w @switchboard/bench
 */
import { cpus } from 'node:os'
import { createRecordingConnector } from '@switchboard/core/testing'
import { readConfig, startReferenceServer } from '@switchboard/reference-server'
import { startHelloWorldServer } from './http/hello-world-server.js'
import { type LoadResult, type LoadTarget, measureInterleaved } from './http/run-load.js'
import { seedCompany } from './http/seed-company.js'

/** Five 1 s rounds per target make its ~5 s; the rounds take the targets in turn. */
const LOAD = { connections: 10, warmUpSeconds: 1, rounds: 5, roundSeconds: 1 }
const AGENTS = 10
/** The reads should keep at least this share of what the bare framework serves. */
const TARGET_READ_RATIO = 0.5

interface Row {
  readonly target: LoadTarget
  readonly result: LoadResult
  /** Reads held to TARGET_READ_RATIO; the baseline and login (argon2id, slow on purpose) are not. */
  readonly read: boolean
}

/** One request before the load, so a row can never be fast by answering errors. */
async function checkAnswers(target: LoadTarget, expectedStatus: number): Promise<void> {
  const response = await fetch(target.url, {
    method: target.method ?? 'GET',
    ...(target.headers === undefined ? {} : { headers: { ...target.headers } }),
    ...(target.body === undefined ? {} : { body: target.body }),
  })
  const text = await response.text()
  if (response.status !== expectedStatus) {
    throw new Error(
      `${target.name}: expected ${expectedStatus} before the load, got ${response.status} ${text}`,
    )
  }
}

function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((cell, index) => (index === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[index]!)))
    .join('  ')
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  const service = await startReferenceServer(
    readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent' }),
    {
      // In place of the real msgplatform connector: the seeded session's reply is kept here
      // instead of being posted to a platform that does not exist.
      connectors: [createRecordingConnector({ type: 'msgplatform' })],
    },
  )
  const hello = await startHelloWorldServer()
  try {
    const company = await seedCompany(service.url, service.switchboard, { agents: AGENTS })
    const bearer = { authorization: `Bearer ${company.accessToken}` }
    const helloWorld: LoadTarget = { name: 'hello-world (Express, one route)', url: hello.url }
    const login: LoadTarget = {
      name: 'POST /api/auth/login',
      url: `${service.url}/api/auth/login`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: company.email, password: company.password }),
    }
    const agents: LoadTarget = {
      name: `GET /api/agents (${AGENTS} agents)`,
      url: `${service.url}/api/agents`,
      headers: bearer,
    }
    const status: LoadTarget = {
      name: 'GET /api/sessions/{id}/status',
      url: `${service.url}/api/sessions/${company.sessionId}/status`,
      headers: bearer,
    }
    const reads = new Set([agents, status])

    console.log('http: requests per second of the HTTP edge, next to an Express hello-world route')
    console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
    console.log(
      `${LOAD.connections} connections; per row ${LOAD.warmUpSeconds} s of warm-up, then ${LOAD.rounds} rounds of ` +
        `${LOAD.roundSeconds} s taken in turn with the other rows, median shown; ` +
        'servers and autocannon (one worker thread) in one process',
    )
    const adapter = import.meta.resolve('@switchboard/adapter-express')
    console.log(
      adapter.endsWith('.ts')
        ? 'workspace packages from TypeScript sources through tsx'
        : `workspace packages built: ${adapter}`,
    )
    console.log('reference server: memory storage, argon2id (OWASP), jose HS256, LOG_LEVEL=silent')
    console.log('')

    const progress = (message: string) => process.stderr.write(`${message}\n`)
    for (const target of [helloWorld, login, agents, status]) await checkAnswers(target, 200)
    const measured = await measureInterleaved([helloWorld, agents, status], LOAD, progress)
    // Login runs on its own, after the rest: a login row leaves argon2id's aftermath (hashes still
    // finishing, a heap full of garbage), and in trials the rows after it ran at a quarter to a
    // half of their usual speed.
    progress(`measuring ${login.name}`)
    measured.set(login, (await measureInterleaved([login], LOAD)).get(login)!)
    const rows: Row[] = [helloWorld, login, agents, status].map((target) => ({
      target,
      read: reads.has(target),
      result: measured.get(target)!,
    }))

    const baseline = rows[0]!.result.requestsPerSecond
    const widths = [34, 9, 13, 8, 8, 14, 12, 8]
    console.log(
      formatRow(
        ['endpoint', 'req/s', 'rounds', 'p50 ms', 'p99 ms', '× hello-world', 'main µs/req', 'non-2xx'],
        widths,
      ),
    )
    console.log(
      formatRow(
        widths.map((width) => '-'.repeat(width)),
        widths,
      ),
    )
    for (const { target, result } of rows) {
      console.log(
        formatRow(
          [
            target.name,
            result.requestsPerSecond.toFixed(0),
            `${result.slowestRoundRequestsPerSecond.toFixed(0)}–${result.fastestRoundRequestsPerSecond.toFixed(0)}`,
            result.p50Ms.toFixed(0),
            result.p99Ms.toFixed(0),
            (result.requestsPerSecond / baseline).toFixed(2),
            result.mainThreadMicrosecondsPerRequest.toFixed(0),
            String(result.failures),
          ],
          widths,
        ),
      )
    }
    console.log('')
    for (const { target, result } of rows.filter((row) => row.read)) {
      const ratio = result.requestsPerSecond / baseline
      console.log(
        `${target.name}: ${ratio.toFixed(2)} × hello-world, ` +
          `${ratio >= TARGET_READ_RATIO ? 'meets' : 'BELOW'} the ${TARGET_READ_RATIO} target`,
      )
    }
    const spoiled = rows.filter((row) => row.result.failures > 0)
    for (const { target, result } of spoiled) {
      console.log(
        `${target.name}: ${result.failures} failed requests, statuses ${JSON.stringify(result.statusCounts)}`,
      )
    }
    console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
    if (spoiled.length > 0) process.exitCode = 1
  } finally {
    await hello.close()
    await service.close()
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
