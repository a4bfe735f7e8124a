import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const PACKAGE = fileURLToPath(new URL('..', import.meta.url))
const README = new URL('../README.md', import.meta.url)
const LISTEN = 'app.listen(3000)'

/** A README code block of the given language under a heading, exactly as written. */
async function readmeBlock(heading: string, language: string): Promise<string> {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf(heading)
  const code = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined)
    throw new Error(`the README has no ${language} block under "${heading}"`)
  return code
}

/** Runs `file` with node and resolves with the first line it prints. */
async function firstLine(child: ChildProcess): Promise<string> {
  let output = ''
  let errors = ''
  child.stderr?.on('data', (chunk) => {
    errors += chunk
  })
  for await (const chunk of child.stdout!) {
    output += chunk
    if (output.includes('\n')) return output.slice(0, output.indexOf('\n'))
  }
  throw new Error(`the example printed nothing and ended: ${errors}`)
}

// The app of "Add Switchboard to your Express app" as a reader runs it (a file of their own, the
// packages from node_modules, JWT_SECRET in the environment), bar the port: the README listens on
// 3000, the test on any free port it prints. Then the README's curl commands, with fetch.
it('runs the README Express app as written: register, log in, list agents, the app its own routes', async () => {
  const code = await readmeBlock('## Add Switchboard to your Express app', 'ts')
  expect(code).toContain(LISTEN)
  const curls = await readmeBlock('Then, for example:', 'sh')
  expect(curls).toContain('localhost:3000/api/auth/register')
  expect(curls).toContain('localhost:3000/api/auth/login')
  expect(curls).toContain('localhost:3000/api/agents')

  // Inside the package, so that its imports resolve as they would in an app's node_modules.
  const folder = await mkdtemp(join(PACKAGE, '.readme-'))
  let child: ChildProcess | undefined
  try {
    const file = join(folder, 'app.mts')
    await writeFile(
      file,
      code.replace(
        LISTEN,
        'const server = app.listen(0, () => console.log((server.address() as { port: number }).port))',
      ),
    )
    child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', file], {
      cwd: PACKAGE,
      env: { ...process.env, JWT_SECRET: 'a-secret-of-at-least-thirty-two-characters' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const base = `http://127.0.0.1:${await firstLine(child)}`
    const json = { 'content-type': 'application/json' }

    expect(await (await fetch(`${base}/`)).text()).toBe('my app')
    const registered = await fetch(`${base}/api/auth/register`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ email: 'me@shop.test', password: 'correct horse', companyName: 'Shop' }),
    })
    expect(registered.status).toBe(201)
    const login = await fetch(`${base}/api/auth/login`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ email: 'me@shop.test', password: 'correct horse' }),
    })
    const { session } = (await login.json()) as { session: { access_token: string } }
    const agents = await fetch(`${base}/api/agents`, {
      headers: { authorization: `Bearer ${session.access_token}` },
    })
    expect(agents.status).toBe(200)
    expect(await agents.json()).toEqual({ agents: [], nextCursor: null })
  } finally {
    if (child?.exitCode === null) {
      child.kill()
      await once(child, 'exit')
    }
    await rm(folder, { recursive: true, force: true })
  }
}, 60_000)
