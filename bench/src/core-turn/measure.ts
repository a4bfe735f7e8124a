import { PerformanceObserver, performance } from 'node:perf_hooks'
import type { Contender } from './contender.js'

export interface MeasureOptions {
  /** Time spent running turns before anything is measured, so every contender is compiled. */
  readonly warmUpMs: number
  /** How long one measured round runs turns; a round ends at the first step past it. */
  readonly roundMs: number
  readonly rounds: number
  /** The most turns one opened instance runs, which bounds the rows its storage holds. */
  readonly maxTurnsPerRound: number
}

export interface Measurement {
  /** Median over the rounds of the turns one round ran. */
  readonly turnsPerRound: number
  /** Median over the rounds of elapsed time / turns. */
  readonly microsecondsPerTurn: number
  /**
   * Median over the rounds of the process's CPU time (every thread, GC helpers included) / turns.
   * Well below `microsecondsPerTurn` means the process waited for a CPU: other load on the machine.
   */
  readonly cpuMicrosecondsPerTurn: number
  readonly roundMicroseconds: readonly number[]
  readonly allocation: AllocationMeasurement | null
}

export interface AllocationMeasurement {
  /** Heap growth over a batch with no garbage collection in it: garbage and kept data alike. */
  readonly allocatedBytesPerTurn: number
  /** Heap growth over a larger batch, a full collection before and after: what turns leave behind. */
  readonly retainedBytesPerTurn: number
  readonly turns: number
}

const collectGarbage = (globalThis as { gc?: () => void }).gc

export const canMeasureAllocation = collectGarbage !== undefined

/** Rounds are cut into about this many steps, so a round ends close to `roundMs`. */
const STEPS_PER_ROUND = 10

export async function measure(contender: Contender, options: MeasureOptions): Promise<Measurement> {
  // The previous contender's garbage is collected here, not during this one's rounds.
  collectGarbage?.()
  const millisecondsPerTurn = await warmUp(contender, options)
  const step = stepSize(contender, options.roundMs / STEPS_PER_ROUND / millisecondsPerTurn)
  const roundMicroseconds: number[] = []
  const roundTurns: number[] = []
  const roundCpuMicroseconds: number[] = []
  for (let round = 0; round < options.rounds; round++) {
    // No forced gc before a round: a full collection shrinks the young generation, and the round
    // after it pays for many more scavenges than a long-running server does (2.5× slower for
    // Switchboard when tried). Rounds run back to back, as turns do in a server.
    const instance = await contender.open()
    let turns = 0
    const cpuStart = process.cpuUsage()
    const start = performance.now()
    while (performance.now() - start < options.roundMs && turns + step <= options.maxTurnsPerRound) {
      await instance.run(turns, step)
      turns += step
    }
    const elapsed = performance.now() - start
    const cpu = process.cpuUsage(cpuStart)
    await instance.verify(turns)
    await instance.close()
    roundMicroseconds.push((elapsed * 1000) / turns)
    roundTurns.push(turns)
    roundCpuMicroseconds.push((cpu.user + cpu.system) / turns)
  }
  return {
    turnsPerRound: median(roundTurns),
    microsecondsPerTurn: median(roundMicroseconds),
    cpuMicrosecondsPerTurn: median(roundCpuMicroseconds),
    roundMicroseconds,
    allocation: canMeasureAllocation ? await measureAllocation(contender) : null,
  }
}

/** Turns per step: at least one, and whole batches for a contender that runs them at once. */
function stepSize(contender: Contender, wanted: number): number {
  const granularity = contender.turnsPerStep ?? 1
  return Math.max(1, Math.round(wanted / granularity)) * granularity
}

/** Runs turns on fresh instances until `warmUpMs` passed; returns the last milliseconds per turn seen. */
async function warmUp(contender: Contender, options: MeasureOptions): Promise<number> {
  const start = performance.now()
  let batch = stepSize(contender, 20)
  let millisecondsPerTurn = Number.POSITIVE_INFINITY
  while (performance.now() - start < options.warmUpMs) {
    const instance = await contender.open()
    const batchStart = performance.now()
    await instance.run(0, batch)
    millisecondsPerTurn = (performance.now() - batchStart) / batch
    await instance.verify(batch)
    await instance.close()
    // Batches grow while they are short, so the last one times warm code over many turns.
    if (millisecondsPerTurn * batch < options.roundMs / 2)
      batch = Math.min(batch * 2, options.maxTurnsPerRound)
  }
  return millisecondsPerTurn
}

/** Turns in the batch that measures what turns leave behind; large, so noise spreads thin. */
const RETAINED_BATCH = 400

/**
 * Heap growth per turn, from `process.memoryUsage().heapUsed`. Allocated: right after a full
 * collection and right after a batch; it counts every allocated byte only if no collection ran
 * during the batch, so a `gc` performance observer watches, and the batch halves until one ran
 * clean. Retained: before and after a larger batch, each right after a full collection.
 */
async function measureAllocation(contender: Contender): Promise<AllocationMeasurement | null> {
  if (collectGarbage === undefined) return null
  let collections = 0
  const observer = new PerformanceObserver((list) => {
    collections += list.getEntries().length
  })
  observer.observe({ entryTypes: ['gc'] })
  try {
    for (let turns = 256; turns >= 4; turns = Math.floor(turns / 2)) {
      const instance = await contender.open()
      // The instance's first turns create what it keeps for every later turn (caches, maps).
      await instance.run(0, 8)
      collectGarbage()
      // gc entries reach the observer a few milliseconds late; let the forced one arrive first.
      await settle()
      collections = 0
      const before = process.memoryUsage().heapUsed
      await instance.run(8, turns)
      const after = process.memoryUsage().heapUsed
      await settle()
      const clean = collections === 0
      await instance.verify(8 + turns)
      await instance.close()
      if (clean) {
        return {
          allocatedBytesPerTurn: (after - before) / turns,
          retainedBytesPerTurn: await measureRetained(contender),
          turns,
        }
      }
    }
    return null
  } finally {
    observer.disconnect()
  }
}

async function measureRetained(contender: Contender): Promise<number> {
  const instance = await contender.open()
  await instance.run(0, 8)
  collectGarbage?.()
  const before = process.memoryUsage().heapUsed
  await instance.run(8, RETAINED_BATCH)
  collectGarbage?.()
  const after = process.memoryUsage().heapUsed
  await instance.verify(8 + RETAINED_BATCH)
  await instance.close()
  return (after - before) / RETAINED_BATCH
}

function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 20))
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((left, right) => left - right)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
