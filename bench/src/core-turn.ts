/**
 * How much a turn of the Switchboard runtime costs when the model answers instantly, next to the
 * least a turn can cost (a hand-written loop) and to @openai/agents doing the same conversation.
 *
 *   npm run bench:core-turn -w @switchboard/bench          core from its TypeScript sources
 *   npm run bench:core-turn:built -w @switchboard/bench    core built by tsup, as it ships
 */
import { cpus } from 'node:os'
import type { Contender } from './core-turn/contender.js'
import { createFloorContender } from './core-turn/floor-contender.js'
import { canMeasureAllocation, type Measurement, measure } from './core-turn/measure.js'
import { createOpenAiAgentsContender } from './core-turn/openai-agents-contender.js'
import { SCENARIOS } from './core-turn/scenario.js'
import { createSwitchboardContender } from './core-turn/switchboard-contender.js'
import { textTable } from './text-table.js'

const OPTIONS = { warmUpMs: 800, roundMs: 200, rounds: 7, maxTurnsPerRound: 500_000 }
const CONCURRENT_BATCH = 100
/** Switchboard should answer at least this many times faster than @openai/agents. */
const TARGET_SPEEDUP = 10

interface Row {
  readonly contender: Contender
  readonly measurement: Measurement
}

async function main(): Promise<void> {
  const startedAt = performance.now()
  console.log('core-turn: one customer message answered, with a model that answers instantly')
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'}, ${cpus().length} cpus`)
  console.log(
    `${OPTIONS.rounds} rounds of ~${OPTIONS.roundMs} ms after ${OPTIONS.warmUpMs} ms of warm-up; median shown; ` +
      'sequential turns unless the row says otherwise',
  )
  const core = import.meta.resolve('@switchboard/core')
  console.log(
    core.endsWith('.ts')
      ? '@switchboard/core from TypeScript sources through tsx (esbuild keepNames: every closure pays a __name call)'
      : `@switchboard/core built: ${core}`,
  )
  if (!canMeasureAllocation) console.log('(run node with --expose-gc to measure allocations)')

  const contenders: Contender[] = SCENARIOS.flatMap((scenario) => [
    createFloorContender(scenario),
    createSwitchboardContender(scenario, { kind: 'new-session' }),
    // After the handoff the session stays with agent 2, so B cannot repeat in one session.
    ...(scenario.delegates ? [] : [createSwitchboardContender(scenario, { kind: 'same-session' })]),
    createSwitchboardContender(scenario, { kind: 'concurrent', batchSize: CONCURRENT_BATCH }),
    createOpenAiAgentsContender(scenario),
  ])
  // @openai/agents' first run enables an AsyncLocalStorage, which on Node 20 installs promise
  // hooks that slow every later promise in the process; its rows go last so no other row pays.
  const order = [
    ...contenders.filter((contender) => contender.role !== 'openai-agents'),
    ...contenders.filter((contender) => contender.role === 'openai-agents'),
  ]
  const measurements = new Map<Contender, Measurement>()
  for (const contender of order) {
    // Progress goes to stderr so stdout holds only the report.
    process.stderr.write(`measuring scenario ${contender.scenario}: ${contender.label}\n`)
    measurements.set(contender, await measure(contender, OPTIONS))
  }

  const verdicts: string[] = []
  for (const scenario of SCENARIOS) {
    const rows = contenders
      .filter((contender) => contender.scenario === scenario.name)
      .map((contender) => ({ contender, measurement: measurements.get(contender)! }))
    console.log(`\nScenario ${scenario.name}: ${scenario.description}`)
    console.log(formatTable(rows))
    verdicts.push(verdict(scenario.name, rows))
  }

  console.log('')
  for (const line of verdicts) console.log(line)
  console.log(
    [
      '',
      'µs/turn: median over the rounds of round wall time / its turns; a turn ends when its reply is delivered.',
      'cpu µs/turn: the same with process CPU time (all threads, GC helpers too); far below µs/turn means',
      '  the process waited for a CPU (other load on the machine) and the row is noisier than usual.',
      '× floor: this row µs / floor µs. × faster than agents: @openai/agents µs / this row µs.',
      'alloc B/turn: process.memoryUsage().heapUsed growth over a batch that starts right after a full gc,',
      '  kept only if a gc observer saw no collection in it: garbage and kept data alike, JS heap only.',
      'retained B/turn: heapUsed growth over 400 turns, full gc before and after: the sessions, messages and',
      '  sent log the in-memory storage and the recording connector keep. Within ±1 KB of 0 is noise.',
    ].join('\n'),
  )
  console.log(`\ntotal ${((performance.now() - startedAt) / 1000).toFixed(1)} s`)
}

function verdict(scenario: string, rows: readonly Row[]): string {
  const agents = rows.find((row) => row.contender.role === 'openai-agents')
  const switchboard = rows.find((row) => row.contender.role === 'switchboard')
  if (agents === undefined || switchboard === undefined) return `Scenario ${scenario}: incomplete`
  const speedup = agents.measurement.microsecondsPerTurn / switchboard.measurement.microsecondsPerTurn
  const met = speedup >= TARGET_SPEEDUP ? 'meets' : 'MISSES'
  return `Scenario ${scenario}: Switchboard (new session per turn) is ${speedup.toFixed(1)}× faster than @openai/agents; ${met} the ${TARGET_SPEEDUP}× target`
}

function formatTable(rows: readonly Row[]): string {
  const floor = rows.find((row) => row.contender.role === 'floor')?.measurement.microsecondsPerTurn
  const agents = rows.find((row) => row.contender.role === 'openai-agents')?.measurement.microsecondsPerTurn
  const header = [
    'implementation',
    'µs/turn',
    'cpu µs/turn',
    'turns/s',
    '× floor',
    '× faster than agents',
    'alloc B/turn',
    'retained B/turn',
    'turns/round',
  ]
  const body = rows.map(({ contender, measurement }) => {
    const microseconds = measurement.microsecondsPerTurn
    return [
      contender.label,
      formatNumber(microseconds, microseconds < 10 ? 2 : 1),
      formatNumber(measurement.cpuMicrosecondsPerTurn, measurement.cpuMicrosecondsPerTurn < 10 ? 2 : 1),
      formatNumber(1_000_000 / microseconds, 0),
      floor === undefined ? '' : formatNumber(microseconds / floor, 1),
      agents === undefined ? '' : formatNumber(agents / microseconds, 1),
      measurement.allocation === null ? 'n/a' : formatNumber(measurement.allocation.allocatedBytesPerTurn, 0),
      measurement.allocation === null ? 'n/a' : formatNumber(measurement.allocation.retainedBytesPerTurn, 0),
      formatNumber(measurement.turnsPerRound, 0),
    ]
  })
  return textTable(header, body)
}

function formatNumber(value: number, decimals: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals })
}

await main()
