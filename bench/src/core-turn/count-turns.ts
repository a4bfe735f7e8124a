/**
 * One contender of the core-turn bench, run for a fixed number of turns and nothing else, so
 * that `valgrind --tool=callgrind` can count the instructions of the whole process
 * (`core-turn-instructions.ts` starts it twice with different turn counts and divides the
 * difference).
 *
 *   node count-turns.mjs <switchboard|openai-agents|floor> <A|B> <warm-up turns> <turns>
 *
 * `new Date()` and `Date.now()` answer one fixed instant: under valgrind a turn lasts about a
 * millisecond, so the runtime's timestamp memo would miss several times a turn, and each miss
 * would be counted as the turn's cost although at full speed it almost never happens.
 */
import type { Contender } from './contender.js'
import type { ScenarioName } from './scenario.js'

const FROZEN_AT = Date.UTC(2026, 0, 1)
const SystemDate = Date
class FrozenDate extends SystemDate {
  constructor(...args: ConstructorParameters<DateConstructor> | []) {
    if (args.length === 0) super(FROZEN_AT)
    else super(...(args as [string | number | Date]))
  }
  static override now(): number {
    return FROZEN_AT
  }
}
globalThis.Date = FrozenDate as DateConstructor

export const CONTENDER_KINDS = ['switchboard', 'openai-agents', 'floor'] as const
export type ContenderKind = (typeof CONTENDER_KINDS)[number]

// Imported only after Date is frozen, so that nothing they set up at load time saw the real clock.
async function contenderOf(kind: ContenderKind, scenarioName: ScenarioName): Promise<Contender> {
  const { SCENARIOS } = await import('./scenario.js')
  const scenario = SCENARIOS.find((candidate) => candidate.name === scenarioName)!
  switch (kind) {
    case 'switchboard': {
      const { createSwitchboardContender } = await import('./switchboard-contender.js')
      return createSwitchboardContender(scenario, { kind: 'new-session' })
    }
    case 'openai-agents': {
      const { createOpenAiAgentsContender } = await import('./openai-agents-contender.js')
      return createOpenAiAgentsContender(scenario)
    }
    case 'floor': {
      const { createFloorContender } = await import('./floor-contender.js')
      return createFloorContender(scenario)
    }
  }
}

function parseArguments(argv: readonly string[]) {
  const [kind, scenario, warmUp, turns] = argv
  const count = (text: string | undefined) => {
    const value = Number(text)
    if (!Number.isInteger(value) || value < 0) throw new Error(`not a turn count: ${text}`)
    return value
  }
  if (!CONTENDER_KINDS.includes(kind as ContenderKind)) {
    throw new Error(`contender must be one of ${CONTENDER_KINDS.join(', ')}, got ${kind}`)
  }
  if (scenario !== 'A' && scenario !== 'B') throw new Error(`scenario must be A or B, got ${scenario}`)
  return {
    kind: kind as ContenderKind,
    scenario: scenario as ScenarioName,
    warmUp: count(warmUp),
    turns: count(turns),
  }
}

const { kind, scenario, warmUp, turns } = parseArguments(process.argv.slice(2))
const instance = await (await contenderOf(kind, scenario)).open()
await instance.run(0, warmUp)
await instance.run(warmUp, turns)
await instance.verify(warmUp + turns)
await instance.close()
