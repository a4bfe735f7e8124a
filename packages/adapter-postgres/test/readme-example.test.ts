import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

const PACKAGE = fileURLToPath(new URL('..', import.meta.url))
const README = new URL('../README.md', import.meta.url)

// "Wire it up" as a reader runs it: a file of their own, the packages found by name, no
// DATABASE_URL, so PGlite in ./.switchboard/pglite of the folder it runs in. It must end by itself:
// a Db, bus or storage left open would keep the process alive.
it('runs the README example as written: PGlite in ./.switchboard/pglite, then everything closed', async () => {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf('## Wire it up')
  const code = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined) throw new Error('the README has no "Wire it up" example')

  // Inside the package, so that its imports resolve as they would in an app's node_modules.
  const folder = await mkdtemp(join(PACKAGE, '.readme-'))
  try {
    const file = join(folder, 'wire.mts')
    await writeFile(file, `${code}\nconsole.log(storage.kind)\n`)
    const { DATABASE_URL: _unset, ...environment } = process.env
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', file],
      { cwd: folder, env: environment, timeout: 60_000 },
    )
    expect(stdout.trim()).toBe('pglite')
    expect((await stat(join(folder, '.switchboard', 'pglite'))).isDirectory()).toBe(true)
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
}, 60_000)
