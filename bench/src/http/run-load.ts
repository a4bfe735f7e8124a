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
  /** Per target, once, before its first round; its numbers are dropped (JIT, caches, connections). */
  readonly warmUpSeconds: number
  readonly rounds: number
  readonly roundSeconds: number
}

export interface LoadResult {
  /** Median over the rounds. */
  readonly requestsPerSecond: number
  readonly slowestRoundRequestsPerSecond: number
  readonly fastestRoundRequestsPerSecond: number
  /** Medians over the rounds of each round's percentile. */
  readonly p50Ms: number
  readonly p99Ms: number
  /**
   * Median over the rounds of the time this process's main thread was busy per completed request:
   * what a request costs the servers. Time the thread lost to other processes is counted too.
   */
  readonly mainThreadMicrosecondsPerRequest: number
  readonly completed: number
  /** Answers outside 2xx, connection errors and timeouts, over every round: any spoils the row. */
  readonly failures: number
  readonly statusCounts: Readonly<Record<string, number>>
}

interface Round {
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly mainThreadMicrosecondsPerRequest: number
  readonly completed: number
  readonly failures: number
  readonly statusCounts: Readonly<Record<string, number>>
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((left, right) => left - right)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

async function runOnce(target: LoadTarget, connections: number, seconds: number): Promise<Round> {
  const before = performance.eventLoopUtilization()
  const result = await autocannon({
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
  const busy = performance.eventLoopUtilization(before)
  return {
    requestsPerSecond: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    mainThreadMicrosecondsPerRequest: (busy.active * 1000) / Math.max(1, result.requests.total),
    completed: result.requests.total,
    failures: result.non2xx + result.errors + result.timeouts,
    statusCounts: Object.fromEntries(
      Object.entries(result.statusCodeStats).map(([status, stats]) => [status, stats.count]),
    ),
  }
}

/**
 * Each target warmed up once, then rounds that take the targets in turn, so that a burst of other
 * load on the machine falls on one round of each rather than on the whole of one target.
 */
export async function measureInterleaved(
  targets: readonly LoadTarget[],
  options: LoadOptions,
  progress: (message: string) => void = () => undefined,
): Promise<Map<LoadTarget, LoadResult>> {
  for (const target of targets) {
    progress(`warming up ${target.name}`)
    await runOnce(target, options.connections, options.warmUpSeconds)
  }
  const rounds = new Map<LoadTarget, Round[]>(targets.map((target) => [target, []]))
  for (let round = 1; round <= options.rounds; round += 1) {
    progress(`round ${round} of ${options.rounds}`)
    for (const target of targets) {
      rounds.get(target)!.push(await runOnce(target, options.connections, options.roundSeconds))
    }
  }
  return new Map(
    targets.map((target) => {
      const measured = rounds.get(target)!
      const rates = measured.map((each) => each.requestsPerSecond)
      const statusCounts: Record<string, number> = {}
      for (const each of measured) {
        for (const [status, count] of Object.entries(each.statusCounts)) {
          statusCounts[status] = (statusCounts[status] ?? 0) + count
        }
      }
      const result: LoadResult = {
        requestsPerSecond: median(rates),
        slowestRoundRequestsPerSecond: Math.min(...rates),
        fastestRoundRequestsPerSecond: Math.max(...rates),
        p50Ms: median(measured.map((each) => each.p50Ms)),
        p99Ms: median(measured.map((each) => each.p99Ms)),
        mainThreadMicrosecondsPerRequest: median(
          measured.map((each) => each.mainThreadMicrosecondsPerRequest),
        ),
        completed: measured.reduce((sum, each) => sum + each.completed, 0),
        failures: measured.reduce((sum, each) => sum + each.failures, 0),
        statusCounts,
      }
      return [target, result]
    }),
  )
}
