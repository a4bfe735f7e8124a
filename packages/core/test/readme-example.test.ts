import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const README = new URL('../README.md', import.meta.url)
const CORE_SOURCES = new URL('../src/index.ts', import.meta.url)

/** The README's first example exactly as written, bar where `@switchboard/core` is found. */
async function readmeExample(): Promise<string> {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf('## Answer a customer in 30 lines')
  const code = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined) throw new Error('the README has no "Answer a customer" example')
  return code.replace("from '@switchboard/core'", `from ${JSON.stringify(CORE_SOURCES.href)}`)
}

// Run in a process of its own, as a reader would run it: anything the example imports besides
// core (the testing kit, which needs vitest, say) would have to be there.
it('runs the README first example as written: the customer is answered from the knowledge base', async () => {
  const folder = await mkdtemp(join(tmpdir(), 'switchboard-readme-'))
  try {
    const code = await readmeExample()
    expect(code).not.toMatch(/@switchboard\/core\/testing/)
    const file = join(folder, 'answer.mts')
    await writeFile(file, code)
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file], {
      cwd: fileURLToPath(new URL('..', import.meta.url)),
      timeout: 60_000,
    })
    expect(stdout.trim()).toBe("[ 'Returns are free within 30 days.' ]")
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
}, 60_000)
