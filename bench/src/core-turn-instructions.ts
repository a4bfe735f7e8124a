/**
 * The core-turn comparison counted in instructions instead of seconds: each contender's turns run
 * alone in a process under `valgrind --tool=callgrind`, which counts every instruction the process
 * executes, whatever else the machine is doing. Time on a shared 2-vCPU machine moves by a third
 * from run to run; Switchboard's count of scenario A repeated to within 0.3k of 115k a turn over
 * four runs, so a change of a thousand can be seen (other rows wander more, see `REPEATS`). Instructions are not time (a cache miss costs far more than an
 * add, and a collection's cost depends on what is alive), so this complements `bench:core-turn`,
 * whose verdict stays the one in seconds.
 *
 *   npm run bench:core-turn:instructions -w @switchboard/bench     builds packages/core first
 *
 * Needs valgrind (`apt-get install valgrind`); about 20 to 30 minutes on 2 CPUs.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import type { ContenderKind } from './core-turn/count-turns.js'
import { SCENARIOS, type ScenarioName } from './core-turn/scenario.js'
import { textTable } from './text-table.js'

/**
 * Turns per run: a short and a long run after the same warm-up, so that start-up, loading and
 * most compilation cancel out in the difference. Sized so each run takes about a minute.
 */
const TURNS: Readonly<Record<ContenderKind, { warmUp: number; short: number; long: number }>> = {
  switchboard: { warmUp: 3_000, short: 2_000, long: 10_000 },
  'openai-agents': { warmUp: 300, short: 200, long: 1_000 },
  floor: { warmUp: 30_000, short: 20_000, long: 100_000 },
}
const LABELS: Readonly<Record<ContenderKind, string>> = {
  floor: 'floor (plain objects, no storage)',
  switchboard: 'Switchboard, new session per turn',
  'openai-agents': '@openai/agents 0.14.3',
}
/**
 * Node's flags for counts that repeat: no concurrent compiler or GC threads whose timing varies,
 * fixed seeds, and young and old generations large enough that no run's count depends on when a
 * mark-compact happened to fall.
 */
const NODE_FLAGS = [
  '--predictable',
  '--hash-seed=1',
  '--random-seed=1',
  '--min-semi-space-size=16',
  '--max-semi-space-size=16',
  '--initial-old-space-size=512',
]
/**
 * Each run is counted this many times and the smallest count kept. Counts of one run still
 * differ by up to a tenth at times: V8 compiled more (TurboFan's work doubled in one of three
 * runs of the floor, for the same program and flags, ASLR off too). Compiling only ever adds, so
 * the smallest count is the turns' own.
 */
const REPEATS = 2
const BENCH_DIRECTORY = fileURLToPath(new URL('..', import.meta.url))

interface Counted {
  readonly kind: ContenderKind
  readonly perTurn: number
  /** How far apart the repeats of its runs were (see `REPEATS`). */
  readonly spread: number
}

function requireValgrind(): void {
  const found = spawnSync('valgrind', ['--version'], { encoding: 'utf8' })
  if (found.error !== undefined || found.status !== 0) {
    console.error(
      'bench:core-turn:instructions needs valgrind on the PATH (Debian: apt-get install valgrind)',
    )
    process.exit(1)
  }
}

/**
 * The child is bundled into one plain module first: run through tsx it would load its loader's
 * worker thread, whose own timers add instructions that depend on how long the run lasted.
 */
async function bundleChild(directory: string): Promise<string> {
  const outfile = join(directory, 'count-turns.mjs')
  await build({
    entryPoints: [fileURLToPath(new URL('./core-turn/count-turns.ts', import.meta.url))],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    // Packages load from node_modules as they ship: @switchboard/core from its build.
    packages: 'external',
    outfile,
    logLevel: 'error',
  })
  return outfile
}

/** Instructions of one whole process, as callgrind reports them on stderr. */
function countInstructions(
  child: string,
  kind: ContenderKind,
  scenario: ScenarioName,
  warmUp: number,
  turns: number,
) {
  return new Promise<number>((resolve, reject) => {
    const args = [
      '--tool=callgrind',
      '--callgrind-out-file=/dev/null',
      process.execPath,
      ...NODE_FLAGS,
      child,
      kind,
      scenario,
      String(warmUp),
      String(turns),
    ]
    // Only stderr, where callgrind reports its count; an unread stdout pipe could fill and block.
    const run = spawn('valgrind', args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    run.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    run.on('error', reject)
    run.on('close', (code) => {
      const collected = /Collected : (\d+)/.exec(stderr)
      if (code !== 0 || collected === null) {
        reject(new Error(`${kind} ${scenario} (${turns} turns) failed with ${code}:\n${stderr.slice(-2000)}`))
      } else {
        resolve(Number(collected[1]))
      }
    })
  })
}

/** Largest minus smallest count of one run, as a share of the smallest. */
function spreadOf(counts: readonly number[]): number {
  return (Math.max(...counts) - Math.min(...counts)) / Math.min(...counts)
}

interface Run {
  readonly kind: ContenderKind
  readonly scenario: ScenarioName
  readonly turns: number
}

/**
 * Every count of every run, `REPEATS` times, as many at once as there are CPUs: a count does not
 * depend on the load.
 */
async function countAll(child: string, runs: readonly Run[]): Promise<Map<Run, number[]>> {
  const counts = new Map<Run, number[]>(runs.map((run) => [run, []]))
  const queue = Array.from({ length: REPEATS }, () => runs).flat()
  let next = 0
  const worker = async () => {
    while (next < queue.length) {
      const run = queue[next++]!
      process.stderr.write(`counting scenario ${run.scenario}: ${LABELS[run.kind]}, ${run.turns} turns\n`)
      const { warmUp } = TURNS[run.kind]
      counts.get(run)!.push(await countInstructions(child, run.kind, run.scenario, warmUp, run.turns))
    }
  }
  await Promise.all(Array.from({ length: Math.min(availableParallelism(), queue.length) }, worker))
  return counts
}

function formatTable(rows: readonly Counted[]): string {
  const of = (kind: ContenderKind) => rows.find((row) => row.kind === kind)!.perTurn
  const header = ['implementation', 'instructions/turn', '× floor', '× fewer than agents', 'repeats apart']
  const lines = rows.map((row) => [
    LABELS[row.kind],
    Math.round(row.perTurn).toLocaleString('en-US'),
    (row.perTurn / of('floor')).toFixed(1),
    (of('openai-agents') / row.perTurn).toFixed(1),
    `${(100 * row.spread).toFixed(1)} %`,
  ])
  return textTable(header, lines)
}

async function main(): Promise<void> {
  requireValgrind()
  const startedAt = performance.now()
  // Inside the bench folder: the bundle's bare imports resolve from where it lies.
  const directory = mkdtempSync(join(BENCH_DIRECTORY, '.count-turns-'))
  try {
    const child = await bundleChild(directory)
    console.log('core-turn, counted: instructions per turn under valgrind --tool=callgrind, whole process')
    console.log(
      `node ${process.version} ${NODE_FLAGS.join(' ')}; @switchboard/core from ${import.meta.resolve('@switchboard/core')}`,
    )
    console.log(
      'per turn = (instructions of the long run - those of the short run) / (their difference in turns)',
    )
    const kinds = ['floor', 'switchboard', 'openai-agents'] as const
    const pairs = SCENARIOS.flatMap((scenario) =>
      kinds.map((kind) => ({
        kind,
        scenario: scenario.name,
        short: { kind, scenario: scenario.name, turns: TURNS[kind].short },
        long: { kind, scenario: scenario.name, turns: TURNS[kind].long },
      })),
    )
    const counts = await countAll(
      child,
      pairs.flatMap((pair) => [pair.long, pair.short]),
    )
    const notes: string[] = []
    for (const scenario of SCENARIOS) {
      const rows: Counted[] = pairs
        .filter((pair) => pair.scenario === scenario.name)
        .map((pair) => ({
          kind: pair.kind,
          perTurn:
            (Math.min(...counts.get(pair.long)!) - Math.min(...counts.get(pair.short)!)) /
            (pair.long.turns - pair.short.turns),
          spread: Math.max(...[pair.long, pair.short].map((run) => spreadOf(counts.get(run)!))),
        }))
      console.log(`\nScenario ${scenario.name}: ${scenario.description}`)
      console.log(formatTable(rows))
      const ratio =
        rows.find((row) => row.kind === 'openai-agents')!.perTurn /
        rows.find((row) => row.kind === 'switchboard')!.perTurn
      notes.push(
        `Scenario ${scenario.name}: Switchboard runs ${ratio.toFixed(1)}× fewer instructions a turn than @openai/agents`,
      )
    }
    console.log('')
    for (const line of notes) console.log(line)
    // The two ratios have differed by about two: a count says which code runs, not how long.
    console.log("Instructions are not time: the issue's 10× is judged in seconds, by bench:core-turn.")
    console.log(`total ${((performance.now() - startedAt) / 1000).toFixed(0)} s`)
  } finally {
    rmSync(directory, { recursive: true, force: true })
  }
}

await main()
