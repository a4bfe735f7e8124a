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
import { type LoadResult, type LoadTarget, runLoad } from './http/run-load.js'
import { seedCompany } from './http/seed-company.js'

const LOAD = { connections: 10, warmUpSeconds: 1, seconds: 5 }
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
      // Replies of the seeded session go to a channel that keeps them, not to the network.
      connectors: [createRecordingConnector({ type: 'msgplatform' })],
    },
  )
  const hello = await startHelloWorldServer()
  try {
    const company = await seedCompany(service.url, service.switchboard, { agents: AGENTS })
    const bearer = { authorization: `Bearer ${company.accessToken}` }
    const targets: { target: LoadTarget; read: boolean }[] = [
      { target: { name: 'hello-world (Express, one route)', url: hello.url }, read: false },
      {
        target: {
          name: 'POST /api/auth/login',
          url: `${service.url}/api/auth/login`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: company.email, password: company.password }),
        },
        read: false,
      },
      {
        target: {
          name: `GET /api/agents (${AGENTS} agents)`,
          url: `${service.url}/api/agents`,
          headers: bearer,
        },
        read: true,
      },
      {
        target: {
          name: 'GET /api/sessions/{id}/status',
          url: `${service.url}/api/sessions/${company.sessionId}/status`,
          headers: bearer,
        },
        read: true,
      },
    ]

    console.log('http: requests per second of the HTTP edge, next to an Express hello-world route')
    console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
    console.log(
      `${LOAD.connections} connections, ${LOAD.seconds} s per row after ${LOAD.warmUpSeconds} s of warm-up; ` +
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

    const rows: Row[] = []
    for (const { target, read } of targets) {
      await checkAnswers(target, 200)
      process.stderr.write(`measuring ${target.name}\n`)
      rows.push({ target, read, result: await runLoad(target, LOAD) })
    }

    const baseline = rows[0]!.result.requestsPerSecond
    const widths = [34, 9, 8, 8, 14, 15, 9]
    console.log(
      formatRow(['endpoint', 'req/s', 'p50 ms', 'p99 ms', '× hello-world', 'main µs/req', 'non-2xx'], widths),
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
