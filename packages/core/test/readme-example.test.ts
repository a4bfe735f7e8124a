import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const README = new URL('../README.md', import.meta.url)
const CORE_SOURCES = new URL('../src/index.ts', import.meta.url)
const WORKSPACE = new URL('../../../', import.meta.url)

/** The README's first example exactly as written, bar where `@switchboard/core` is found. */
async function readmeExample(): Promise<string> {
  return (await readmeExampleAsWritten()).replace(
    "from '@switchboard/core'",
    `from ${JSON.stringify(CORE_SOURCES.href)}`,
  )
}

async function readmeExampleAsWritten(): Promise<string> {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf('## Answer a customer in 30 lines')
  const code = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined) throw new Error('the README has no "Answer a customer" example')
  return code
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

// Strict apps often turn on exactOptionalPropertyTypes, under which a zod-parsed input (optional
// fields typed `T | undefined`) only fits types that say so. Core's own sources are not written
// for that setting, so only the example's own errors count.
it('type-checks the README first example under exactOptionalPropertyTypes', async () => {
  const folder = await mkdtemp(join(tmpdir(), 'switchboard-readme-types-'))
  try {
    await writeFile(join(folder, 'answer.mts'), await readmeExampleAsWritten())
    const workspace = fileURLToPath(WORKSPACE)
    const tsconfig = {
      extends: join(workspace, 'tsconfig.base.json'),
      compilerOptions: {
        exactOptionalPropertyTypes: true,
        typeRoots: [join(workspace, 'node_modules/@types')],
        paths: { '@switchboard/core': [fileURLToPath(CORE_SOURCES)] },
      },
      files: ['answer.mts'],
    }
    await writeFile(join(folder, 'tsconfig.json'), JSON.stringify(tsconfig))
    const tsc = join(workspace, 'node_modules/typescript/bin/tsc')
    const output = await promisify(execFile)(process.execPath, [
      tsc,
      '-p',
      join(folder, 'tsconfig.json'),
    ]).then(
      ({ stdout }) => stdout,
      (error: { stdout?: string }) => error.stdout ?? String(error),
    )
    // Every error must be in core's own sources: one in the example, or one naming no file (a
    // broken setup that checked nothing), fails the test.
    const coreSources = fileURLToPath(new URL('../src/', import.meta.url))
    const errorsOutsideCore = output
      .split('\n')
      .filter((line) => line.includes('error TS'))
      .filter((line) => {
        const file = /^(.+?)\(\d+,\d+\): error/.exec(line)?.[1]
        return file === undefined || !resolve(file).startsWith(coreSources)
      })
    expect(errorsOutsideCore).toEqual([])
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
}, 60_000)
