import { expect, it } from 'vitest'
import { readmeBlock, startReadmeApp } from '../../../test-support/readme-app.js'

const PACKAGE = new URL('..', import.meta.url)
const README = new URL('../README.md', import.meta.url)

// The app of "Add Switchboard to your Express app" as a reader runs it (a file of their own, the
// packages from node_modules, JWT_SECRET in the environment), bar the port: the README listens on
// 3000, the test on any free port it prints. Then the README's curl commands, with fetch.
it('runs the README Express app as written: register, log in, list agents, the app its own routes', async () => {
  const code = await readmeBlock(README, '## Add Switchboard to your Express app', 'ts')
  const curls = await readmeBlock(README, 'Then, for example:', 'sh')
  expect(curls).toContain('localhost:3000/api/auth/register')
  expect(curls).toContain('localhost:3000/api/auth/login')
  expect(curls).toContain('localhost:3000/api/agents')

  const app = await startReadmeApp(PACKAGE, code)
  try {
    const base = app.base
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
    await app.stop()
  }
}, 60_000)
