import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One request the fake platform received, and what it answered. */
export interface PlatformCall {
  readonly method: string
  readonly path: string
  readonly headers: IncomingHttpHeaders
  /** The parsed JSON body, or the raw text when it is not JSON. */
  readonly body: unknown
  readonly status: number
}

export interface FakePlatform {
  /** `http://127.0.0.1:PORT`, to use as an integration's `apiBaseUrl`. */
  readonly url: string
  readonly calls: readonly PlatformCall[]
  callsTo(path: string): PlatformCall[]
  /** Calls to `path` that got a 2xx answer. */
  acceptedAt(path: string): PlatformCall[]
  /** The next `count` calls to `path` answer `status` with `body`. */
  failNext(path: string, count: number, status?: number, body?: string): void
  /** Every later call to `path` answers `status` with `body` (JSON when not a string). */
  answer(path: string, status: number, body: unknown): void
  /** Calls to `path` wait `ms` before answering. */
  delay(path: string, ms: number): void
  /** Resolves once `count` calls to `path` were answered; fails after `timeoutMs`. */
  waitForCalls(path: string, count: number, timeoutMs?: number): Promise<PlatformCall[]>
  close(): Promise<void>
}

/**
 * A stand-in for the messaging platform's API on a real socket (port 0): it records every
 * request and answers 200 `{ok:true}` unless told to fail, to answer otherwise, or to be slow.
 */
export async function startFakePlatform(): Promise<FakePlatform> {
  const calls: PlatformCall[] = []
  const failures = new Map<string, { count: number; status: number; body: string }>()
  const answers = new Map<string, { status: number; body: string }>()
  const delays = new Map<string, number>()
  const waiters = new Set<() => void>()

  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // Kept as text: a test may want to see what was not JSON.
      }
      const path = request.url ?? '/'
      let status = 200
      let reply = '{"ok":true}'
      const failure = failures.get(path)
      const configured = answers.get(path)
      if (failure !== undefined && failure.count > 0) {
        failure.count -= 1
        status = failure.status
        reply = failure.body
      } else if (configured !== undefined) {
        status = configured.status
        reply = configured.body
      }
      const finish = () => {
        if (response.destroyed) return
        calls.push({ method: request.method ?? '', path, headers: request.headers, body, status })
        response.writeHead(status, { 'content-type': 'application/json' })
        response.end(reply)
        for (const wake of [...waiters]) wake()
      }
      const wait = delays.get(path)
      if (wait === undefined) finish()
      else setTimeout(finish, wait)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  const callsTo = (path: string) => calls.filter((call) => call.path === path)
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    callsTo,
    acceptedAt: (path) => callsTo(path).filter((call) => call.status >= 200 && call.status < 300),
    failNext(path, count, status = 503, body = '{"error":"temporarily unavailable"}') {
      failures.set(path, { count, status, body })
    },
    answer(path, status, body) {
      answers.set(path, { status, body: typeof body === 'string' ? body : JSON.stringify(body) })
    },
    delay(path, ms) {
      delays.set(path, ms)
    },
    waitForCalls(path, count, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = callsTo(path)
          if (found.length < count) return false
          waiters.delete(check)
          clearTimeout(timer)
          resolve(found)
          return true
        }
        const timer = setTimeout(() => {
          waiters.delete(check)
          reject(new Error(`expected ${count} calls to ${path}, got ${callsTo(path).length}`))
        }, timeoutMs)
        if (!check()) waiters.add(check)
      })
    },
    async close() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
