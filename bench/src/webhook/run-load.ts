import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { type DatabaseCpu, databaseCpuBetween } from './storages.js'

const SETUP_REQUEST = fileURLToPath(new URL('./sign-request.cjs', import.meta.url))

/** Signed webhooks posted to one URL; `sign-request.cjs` makes each a new customer message. */
export interface WebhookTarget {
  readonly name: string
  readonly baseUrl: string
  readonly path: string
  /** CPU of the database server's processes, where it can be read. */
  readonly sampleDatabaseCpu?: () => Promise<DatabaseCpu | undefined>
}

/** One autocannon run against one target. */
export interface Round {
  readonly requestsPerSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  /** Event-loop busy time per request: includes the time the thread waited for a CPU. */
  readonly mainThreadMicrosecondsPerRequest: number
  /** Time the main thread ran on a CPU per request; `undefined` off Linux. */
  readonly mainThreadCpuMicrosecondsPerRequest: number | undefined
  readonly databaseCpuMicrosecondsPerRequest: number | undefined
  readonly completed: number
  /** Answers outside 2xx, connection errors and timeouts. */
  readonly failures: number
}

/** Several rounds of one target, summed up. */
export interface Measured extends Omit<Round, 'completed' | 'failures'> {
  readonly slowestRoundRequestsPerSecond: number
  readonly fastestRoundRequestsPerSecond: number
  /** Completed requests, warm-up included, and failures, over every run. */
  readonly completed: number
  readonly failures: number
}

/**
 * µs the main thread has run on a CPU so far, from Linux's schedstat; `undefined` elsewhere. Unlike
 * the event loop's busy time, this leaves out the time the thread was ready to run while another
 * process (the database server, the load generator, anything else on the machine) had the CPU.
 */
function mainThreadCpuMicroseconds(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]) / 1000
  } catch {
    return undefined
  }
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((left, right) => left - right)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

const medianOrUndefined = (values: readonly (number | undefined)[]): number | undefined =>
  values.some((value) => value === undefined) ? undefined : median(values as number[])

async function runOnce(target: WebhookTarget, connections: number, seconds: number): Promise<Round> {
  const databaseBefore = await target.sampleDatabaseCpu?.()
  const cpuBefore = mainThreadCpuMicroseconds()
  const before = performance.eventLoopUtilization()
  const result = await autocannon({
    url: target.baseUrl,
    connections,
    duration: seconds,
    requests: [{ method: 'POST', path: target.path, setupRequest: SETUP_REQUEST }],
    // The load generator gets its own thread; the servers measured run in this one.
    workers: 1,
  })
  const busy = performance.eventLoopUtilization(before)
  const cpuAfter = mainThreadCpuMicroseconds()
  const databaseAfter = await target.sampleDatabaseCpu?.()
  const completed = Math.max(1, result.requests.total)
  return {
    requestsPerSecond: result.requests.total / result.duration,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    mainThreadMicrosecondsPerRequest: (busy.active * 1000) / completed,
    mainThreadCpuMicrosecondsPerRequest:
      cpuBefore === undefined || cpuAfter === undefined ? undefined : (cpuAfter - cpuBefore) / completed,
    databaseCpuMicrosecondsPerRequest:
      databaseBefore === undefined || databaseAfter === undefined
        ? undefined
        : databaseCpuBetween(databaseBefore, databaseAfter) / completed,
    completed: result.requests.total,
    failures: result.non2xx + result.errors + result.timeouts,
  }
}

function summarise(warmUp: Round, rounds: readonly Round[]): Measured {
  const rates = rounds.map((round) => round.requestsPerSecond)
  return {
    requestsPerSecond: median(rates),
    slowestRoundRequestsPerSecond: Math.min(...rates),
    fastestRoundRequestsPerSecond: Math.max(...rates),
    p50Ms: median(rounds.map((round) => round.p50Ms)),
    p99Ms: median(rounds.map((round) => round.p99Ms)),
    mainThreadMicrosecondsPerRequest: median(rounds.map((round) => round.mainThreadMicrosecondsPerRequest)),
    mainThreadCpuMicrosecondsPerRequest: medianOrUndefined(
      rounds.map((round) => round.mainThreadCpuMicrosecondsPerRequest),
    ),
    databaseCpuMicrosecondsPerRequest: medianOrUndefined(
      rounds.map((round) => round.databaseCpuMicrosecondsPerRequest),
    ),
    completed: [warmUp, ...rounds].reduce((sum, round) => sum + round.completed, 0),
    failures: [warmUp, ...rounds].reduce((sum, round) => sum + round.failures, 0),
  }
}

export interface RoundsOptions {
  readonly connections: number
  readonly warmUpSeconds: number
  readonly rounds: number
  readonly roundSeconds: number
}

/**
 * Each target warmed up once (numbers dropped), then rounds that take the targets in turn, so a
 * burst of other load on the machine falls on one round of each instead of on one whole row.
 * Every figure is the median over the rounds.
 */
export async function measureInterleaved(
  targets: readonly WebhookTarget[],
  options: RoundsOptions,
): Promise<Measured[]> {
  const warmUps: Round[] = []
  for (const target of targets)
    warmUps.push(await runOnce(target, options.connections, options.warmUpSeconds))
  const rounds: Round[][] = targets.map(() => [])
  for (let round = 0; round < options.rounds; round += 1) {
    for (const [index, target] of targets.entries()) {
      rounds[index]!.push(await runOnce(target, options.connections, options.roundSeconds))
    }
  }
  return targets.map((_, index) => summarise(warmUps[index]!, rounds[index]!))
}

/** A warm-up, then one run: for a target whose work outlasts its requests (agent turns). */
export async function measureOnce(
  target: WebhookTarget,
  options: { readonly connections: number; readonly warmUpSeconds: number; readonly seconds: number },
): Promise<Measured> {
  const warmUp = await runOnce(target, options.connections, options.warmUpSeconds)
  const round = await runOnce(target, options.connections, options.seconds)
  return summarise(warmUp, [round])
}
