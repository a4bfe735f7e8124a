import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { refusal } from './support/visitor.js'

const PACKAGE = fileURLToPath(new URL('..', import.meta.url))
const README = new URL('../README.md', import.meta.url)
const LISTEN = 'server.listen(3000)'

// "Attach the WebSocket server to any Node HTTP server" as a reader runs it (a file of their own,
// the packages found by name), bar the port: the README listens on 3000, the test on any free port
// it prints. Then its shutdown: SIGTERM ends the process, nothing left open.
it('runs the README example as written: sockets on the HTTP server, and a clean SIGTERM', async () => {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf('## Attach the WebSocket server')
  const code = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined) throw new Error('the README has no "Attach" example')
  expect(code).toContain(LISTEN)

  // Inside the package, so that its imports resolve as they would in an app's node_modules.
  const folder = await mkdtemp(join(PACKAGE, '.readme-'))
  let child: ChildProcess | undefined
  try {
    const file = join(folder, 'webchat.mts')
    await writeFile(
      file,
      code.replace(
        LISTEN,
        'server.listen(0, () => console.log((server.address() as { port: number }).port))',
      ),
    )
    child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', file], {
      cwd: PACKAGE,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let errors = ''
    child.stderr?.on('data', (chunk) => {
      errors += chunk
    })
    let output = ''
    for await (const chunk of child.stdout!) {
      output += chunk
      if (output.includes('\n')) break
    }
    const port = Number.parseInt(output, 10)
    expect(port, errors).toBeGreaterThan(0)

    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404)
    // The socket path answers for integrations (none here); other upgrades are not its own.
    expect((await refusal(`ws://127.0.0.1:${port}/api/webchat/1`)).status).toBe(404)
    expect((await refusal(`ws://127.0.0.1:${port}/elsewhere`)).status).toBe(404)

    const exited = once(child, 'exit')
    child.kill('SIGTERM')
    const [exitCode] = await exited
    expect(exitCode, errors).toBe(0)
  } finally {
    if (child?.exitCode === null && child.signalCode === null) {
      child.kill()
      await once(child, 'exit')
    }
    await rm(folder, { recursive: true, force: true })
  }
}, 60_000)
