import { performance } from 'node:perf_hooks'
import autocannon from 'autocannon'

export interface LoadTarget {
  readonly name: string
  readonly url: string
  readonly method?: 'GET' | 'POST'
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
}

export interface LoadOptions {
  readonly connections: number
  readonly warmUpSeconds: number
  readonly seconds: number
}

export interface LoadResult {
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly completed: number
  /**
   * Time this process's main thread was busy, per completed request: what a request costs the
   * servers, less sensitive than req/s to other processes competing for the CPUs.
   */
  readonly mainThreadMicrosecondsPerRequest: number
  /** Answers outside 2xx, connection errors and timeouts: any of them spoils the row. */
  readonly failures: number
  readonly statusCounts: Readonly<Record<string, number>>
}

const run = (target: LoadTarget, connections: number, seconds: number) =>
  autocannon({
    url: target.url,
    method: target.method ?? 'GET',
    connections,
    duration: seconds,
    ...(target.headers === undefined ? {} : { headers: target.headers }),
    ...(target.body === undefined ? {} : { body: target.body }),
    // The load generator gets its own thread: in the main thread it would take event-loop time
    // from the servers it measures, which run in this process too.
    workers: 1,
  })

/** A warm-up run whose numbers are dropped (JIT, caches, connection setup), then the measured one. */
export async function runLoad(target: LoadTarget, options: LoadOptions): Promise<LoadResult> {
  await run(target, options.connections, options.warmUpSeconds)
  const before = performance.eventLoopUtilization()
  const result = await run(target, options.connections, options.seconds)
  const busy = performance.eventLoopUtilization(before)
  const statusCounts = Object.fromEntries(
    Object.entries(result.statusCodeStats).map(([status, stats]) => [status, stats.count]),
  )
  return {
    requestsPerSecond: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    completed: result.requests.total,
    mainThreadMicrosecondsPerRequest: (busy.active * 1000) / Math.max(1, result.requests.total),
    failures: result.non2xx + result.errors + result.timeouts,
    statusCounts,
  }
}
