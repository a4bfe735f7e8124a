/**
 * Memory per idle WebSocket connection at 5,000 connections, and message round trips under load,
 * for Switchboard's webchat next to a bare `ws` echo server, in the same run. Each server runs in
 * its own process (so its memory is its own); the clients run in this one.
 *
 *   npm run bench:webchat -w @switchboard/bench
 */
import { type ChildProcess, fork } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'
import WebSocket from 'ws'
import type { FromServer, ServerKind, ToServer } from './webchat/server-process.js'

const IDLE_CONNECTIONS = 5000
/** Handshakes in flight at once while opening the idle connections. */
const CONNECT_BATCH = 250
/** Visitors who write during the load; the other idle connections stay open meanwhile. */
const ACTIVE_VISITORS = 500
/** One message per visitor per second: inside the webchat's limit of 20 per 10 s. */
const MESSAGES_PER_VISITOR_PER_SECOND = 1
const WARM_UP_SECONDS = 2
const MEASURED_SECONDS = 10
const DRAIN_MS = 5000
const TEXT = 'Hello, what does the pro plan cost?'

interface ServerProcess {
  readonly kind: ServerKind
  readonly socketUrl: string
  memory(): Promise<Extract<FromServer, { type: 'memory' }>>
  stop(): Promise<void>
}

interface Client {
  readonly socket: WebSocket
  /** Send times of the messages whose answer has not come back, oldest first. */
  readonly waiting: number[]
}

async function startServer(kind: ServerKind): Promise<ServerProcess> {
  const child: ChildProcess = fork(new URL('./webchat/server-process.ts', import.meta.url).pathname, [kind], {
    execArgv: ['--import', 'tsx', '--conditions=source', '--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const next = <T extends FromServer['type']>(type: T) =>
    new Promise<Extract<FromServer, { type: T }>>((resolve, reject) => {
      const onMessage = (message: FromServer) => {
        if (message.type !== type) return
        child.off('message', onMessage)
        resolve(message as Extract<FromServer, { type: T }>)
      }
      child.on('message', onMessage)
      child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)))
    })
  const ready = await next('ready')
  const ask = (message: ToServer) => child.send(message)
  return {
    kind,
    socketUrl: ready.socketUrl,
    async memory() {
      const answer = next('memory')
      ask({ type: 'memory' })
      return answer
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      ask({ type: 'stop' })
      await exited
    },
  }
}

/** Opens one client; Switchboard's counts as connected at its `session` frame, the echo's at open. */
function connect(server: ServerProcess): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(server.socketUrl)
    const client: Client = { socket, waiting: [] }
    socket.once('error', reject)
    if (server.kind === 'echo') socket.once('open', () => resolve(client))
    else {
      socket.once('message', (data) => {
        const frame = JSON.parse(data.toString()) as { type: string }
        if (frame.type === 'session') resolve(client)
        else reject(new Error(`expected a session frame, got ${data.toString()}`))
      })
    }
  })
}

async function openConnections(server: ServerProcess, count: number): Promise<Client[]> {
  const clients: Client[] = []
  while (clients.length < count) {
    const batch = Math.min(CONNECT_BATCH, count - clients.length)
    clients.push(...(await Promise.all(Array.from({ length: batch }, () => connect(server)))))
  }
  return clients
}

interface RoundTrips {
  readonly sent: number
  readonly answered: number
  readonly samplesMs: number[]
}

/**
 * Open loop: every active visitor writes once a second at its own phase, whatever the answers
 * do, so a slow server cannot slow the load down and hide its latency. A round trip ends at the
 * echo (bare ws) or at the agent's reply frame (Switchboard): ingest, queue, turn, outbox, bus.
 */
async function measureRoundTrips(server: ServerProcess, clients: readonly Client[]): Promise<RoundTrips> {
  const samplesMs: number[] = []
  let measuring = false
  let sent = 0
  let answered = 0
  for (const client of clients) {
    client.socket.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as { type: string; role?: string }
      const answer =
        server.kind === 'echo' ? frame.type === 'message' : frame.type === 'message' && frame.role === 'agent'
      if (!answer) return
      const sentAt = client.waiting.shift()
      if (sentAt === undefined) return
      if (sentAt >= 0) {
        samplesMs.push(performance.now() - sentAt)
        answered += 1
      }
    })
  }
  const periodMs = 1000 / MESSAGES_PER_VISITOR_PER_SECOND
  const timers: NodeJS.Timeout[] = []
  for (const client of clients) {
    const tick = () => {
      // Warm-up messages are answered too but not counted (-1).
      client.waiting.push(measuring ? performance.now() : -1)
      if (measuring) sent += 1
      client.socket.send(JSON.stringify({ type: 'message', text: TEXT, clientMessageId: randomUUID() }))
    }
    timers.push(
      setTimeout(() => {
        tick()
        timers.push(setInterval(tick, periodMs))
      }, Math.random() * periodMs),
    )
  }
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_SECONDS * 1000))
  measuring = true
  await new Promise((resolve) => setTimeout(resolve, MEASURED_SECONDS * 1000))
  measuring = false
  for (const timer of timers) clearInterval(timer)
  const deadline = performance.now() + DRAIN_MS
  while (answered < sent && performance.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 50))
  return { sent, answered, samplesMs }
}

function percentile(sorted: readonly number[], share: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil(share * sorted.length) - 1)]!
}

function formatRow(cells: readonly string[], widths: readonly number[]): string {
  return cells
    .map((cell, index) => (index === 0 ? cell.padEnd(widths[0]!) : cell.padStart(widths[index]!)))
    .join('  ')
}

interface Row {
  readonly name: string
  readonly connectSeconds: number
  readonly rssPerConnectionKiB: number
  readonly heapPerConnectionKiB: number
  readonly roundTrips: RoundTrips
}

async function measure(kind: ServerKind, name: string): Promise<Row> {
  process.stderr.write(`${name}: starting\n`)
  const server = await startServer(kind)
  try {
    const before = await server.memory()
    const started = performance.now()
    const clients = await openConnections(server, IDLE_CONNECTIONS)
    const connectSeconds = (performance.now() - started) / 1000
    // Let handshakes' garbage and socket buffers settle before the idle measurement.
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const idle = await server.memory()
    if (idle.connections !== IDLE_CONNECTIONS) {
      throw new Error(`${name}: ${idle.connections} connections open, expected ${IDLE_CONNECTIONS}`)
    }
    process.stderr.write(`${name}: ${IDLE_CONNECTIONS} connections in ${connectSeconds.toFixed(1)} s; load\n`)
    const roundTrips = await measureRoundTrips(server, clients.slice(0, ACTIVE_VISITORS))
    for (const client of clients) client.socket.terminate()
    return {
      name,
      connectSeconds,
      rssPerConnectionKiB: (idle.rssBytes - before.rssBytes) / IDLE_CONNECTIONS / 1024,
      heapPerConnectionKiB:
        (idle.heapUsedBytes + idle.externalBytes - before.heapUsedBytes - before.externalBytes) /
        IDLE_CONNECTIONS /
        1024,
      roundTrips,
    }
  } finally {
    await server.stop()
  }
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  const rows = [
    await measure('echo', 'bare ws 8.23 echo server'),
    await measure('switchboard', 'Switchboard webchat (memory storage)'),
  ]

  console.log('webchat: memory per idle connection, and round trips under load, beside a bare ws echo server')
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
  console.log(
    `each server in its own process (tsx, sources), the clients in this one; ${IDLE_CONNECTIONS} connections, ` +
      `then ${ACTIVE_VISITORS} of them write ${MESSAGES_PER_VISITOR_PER_SECOND}/s each ` +
      `(${ACTIVE_VISITORS * MESSAGES_PER_VISITOR_PER_SECOND} msg/s offered, open loop) for ${MEASURED_SECONDS} s ` +
      `after ${WARM_UP_SECONDS} s of warm-up`,
  )
  console.log('Switchboard: a session per visitor in memory storage, an instant model, the memory event bus')
  console.log('')
  const widths = [38, 10, 11, 10, 9, 9, 9, 9, 12]
  console.log(
    formatRow(
      ['server', 'connect s', 'RSS KiB/c', 'heap KiB/c', 'p50 ms', 'p99 ms', 'max ms', 'msg/s', 'answered'],
      widths,
    ),
  )
  console.log(
    formatRow(
      widths.map((width) => '-'.repeat(width)),
      widths,
    ),
  )
  for (const row of rows) {
    const sorted = [...row.roundTrips.samplesMs].sort((left, right) => left - right)
    console.log(
      formatRow(
        [
          row.name,
          row.connectSeconds.toFixed(1),
          row.rssPerConnectionKiB.toFixed(1),
          row.heapPerConnectionKiB.toFixed(1),
          percentile(sorted, 0.5).toFixed(1),
          percentile(sorted, 0.99).toFixed(1),
          (sorted[sorted.length - 1] ?? Number.NaN).toFixed(1),
          (row.roundTrips.answered / MEASURED_SECONDS).toFixed(0),
          `${row.roundTrips.answered}/${row.roundTrips.sent}`,
        ],
        widths,
      ),
    )
  }
  console.log('')
  const [echo, switchboard] = rows as [Row, Row]
  console.log(
    `idle memory: Switchboard ${(switchboard.rssPerConnectionKiB / echo.rssPerConnectionKiB).toFixed(1)} × the bare server's RSS per connection`,
  )
  console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
  if (rows.some((row) => row.roundTrips.answered < row.roundTrips.sent)) process.exitCode = 1
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
