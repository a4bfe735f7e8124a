/**
 * How long the reference server takes, from spawning `node dist/main.js` to printing `listening
 * on`, with each kind of storage; CONTRACT §1 asks for 5 s when built. The baseline is the
 * in-memory storage in the same run, which opens no database at all.
 *
 *   npm run bench:startup -w @switchboard/bench     builds what `npm start` would build first
 *
 * Rows: `memory`; PGlite in a `DATA_DIR` used before (opened); PGlite in a new `DATA_DIR` (created
 * from the template the adapter's build dumped); PGlite in a new `DATA_DIR` with that template
 * moved away (initialised and migrated, as before the template).
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rename, rm } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'

const ROUNDS = 5
const root = new URL('../../', import.meta.url).pathname
const serverMain = join(root, 'examples/reference-server/dist/main.js')
const template = join(root, 'packages/adapter-postgres/dist/pglite-template.tar.gz')

/** Milliseconds from spawn to the `listening on` line; the server is stopped after. */
async function timeStart(dataDir: string): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, [serverMain], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const elapsed = await new Promise<number>((resolve, reject) => {
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes('listening on')) resolve(performance.now() - started)
    })
    child.on('exit', (code) => reject(new Error(`the server exited with ${code} before listening`)))
  })
  child.kill('SIGTERM')
  await new Promise((resolve) => child.once('exit', resolve))
  return elapsed
}

function median(values: number[]): number {
  const sorted = [...values].sort((left, right) => left - right)
  return sorted[Math.floor(sorted.length / 2)]!
}

async function main(): Promise<void> {
  const built = spawnSync(process.execPath, [join(root, 'scripts/ensure-built.mjs')], { stdio: 'inherit' })
  if (built.status !== 0) throw new Error('the build failed')
  if (!existsSync(template))
    throw new Error(`no PGlite template at ${template}: build packages/adapter-postgres`)
  console.log(
    `startup: spawn to "listening on", median of ${ROUNDS} (node ${process.version}, ${cpus().length} cpus)`,
  )

  const folder = await mkdtemp(join(tmpdir(), 'switchboard-startup-'))
  const moved = `${template}.bench-moved`
  const rows: Array<[string, number[]]> = [
    ['memory (baseline)', []],
    ['PGlite, DATA_DIR used before', []],
    ['PGlite, new DATA_DIR (template)', []],
    ['PGlite, new DATA_DIR (no template)', []],
  ]
  try {
    const existing = join(folder, 'existing')
    await timeStart(existing)
    // Rounds interleave the rows, so a machine busy for a while slows them all alike.
    for (let round = 0; round < ROUNDS; round++) {
      rows[0]![1].push(await timeStart('memory'))
      rows[1]![1].push(await timeStart(existing))
      rows[2]![1].push(await timeStart(join(folder, `new-${round}`)))
      await rename(template, moved)
      try {
        rows[3]![1].push(await timeStart(join(folder, `bare-${round}`)))
      } finally {
        await rename(moved, template)
      }
    }
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
  const baseline = median(rows[0]![1])
  console.log(`${'storage'.padEnd(36)} ${'ms'.padStart(7)} ${'× memory'.padStart(9)}`)
  for (const [label, times] of rows) {
    const ms = median(times)
    console.log(`${label.padEnd(36)} ${ms.toFixed(0).padStart(7)} ${(ms / baseline).toFixed(2).padStart(9)}`)
  }
}

await main()
