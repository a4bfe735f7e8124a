import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import {
  replyAnswer,
  startFakeOpenAiServer,
} from '../../../packages/provider-openai/test/support/fake-openai-server.js'
import { startFakePlatform } from './support/fake-platform.js'
import { sendWebhook, setUpTenant } from './support/http-client.js'
import { main, type ServerProcess, startServerProcess } from './support/server-process.js'

const servers: ServerProcess[] = []

afterEach(() => {
  for (const server of servers.splice(0)) server.child.kill('SIGKILL')
})

function startProcess(
  environment: Record<string, string>,
  command?: Parameters<typeof startServerProcess>[1],
): ServerProcess {
  const server = startServerProcess(environment, command)
  servers.push(server)
  return server
}

describe('the reference server process', () => {
  it('prints where it listens, answers health, and exits 0 on SIGTERM', async () => {
    const server = startProcess({ DATA_DIR: 'memory' })
    const url = await server.listening
    const health = await fetch(`${url}/api/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ ok: true, storage: 'memory' })

    const started = Date.now()
    expect(await server.stop()).toBe(0)
    expect(Date.now() - started).toBeLessThan(15_000)
  })

  it('exits 0 on a SIGTERM sent the moment it says it listens', async () => {
    // A supervisor may stop the process as soon as it reads the line: the handlers must be in
    // place by then, or the signal's default action kills it (exit code null) without a drain.
    // Five starts from the sources, one after another: about 5 s on an idle machine, past the
    // default 20 s on a loaded one, hence the timeout of its siblings that start processes.
    for (let attempt = 0; attempt < 5; attempt++) {
      const server = startProcess({ DATA_DIR: 'memory' })
      await server.listening
      expect(await server.stop()).toBe(0)
    }
  }, 60_000)

  it('exits 0 within 15 s of SIGTERM while a model call hangs, and the message is answered after a restart', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'switchboard-'))
    const model = await startFakeOpenAiServer()
    const platform = await startFakePlatform()
    try {
      // The model takes a minute: longer than the drain, longer than the whole shutdown may take.
      model.otherwise(replyAnswer('too late', { delayMs: 60_000 }))
      const environment = { DATA_DIR: dataDir, OPENAI_API_KEY: 'test-key', OPENAI_BASE_URL: model.url }
      const first = startProcess(environment)
      const url = await first.listening
      const tenant = await setUpTenant(url, {
        email: 'owner@shop.test',
        password: 'correct horse battery',
        knowledge: 'We ship within 3 days.',
        platformUrl: platform.url,
      })
      const sent = await sendWebhook(url, tenant, {
        clientId: 'ann',
        text: 'where is my parcel?',
        messageId: 'm-1',
      })
      expect(sent.status).toBe(200)
      const deadline = Date.now() + 10_000
      while (model.requests.length === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20))
      expect(model.requests).toHaveLength(1)

      const stopping = Date.now()
      expect(await first.stop()).toBe(0)
      expect(Date.now() - stopping).toBeLessThan(15_000)
      expect(platform.replies).toEqual([])

      // The acknowledged message was not lost with the turn that was cut short.
      model.reset()
      model.otherwise(replyAnswer('Your parcel left on Monday.'))
      const restarted = startProcess(environment)
      await restarted.listening
      const replies = await platform.waitForReplies(1, 20_000)
      expect(replies).toEqual([{ clientId: 'ann', text: 'Your parcel left on Monday.' }])
      expect(await restarted.stop()).toBe(0)
    } finally {
      await Promise.all([model.close(), platform.close()])
      await rm(dataDir, { recursive: true, force: true })
    }
  }, 60_000)

  it('stops on a SIGTERM sent to `npm start`, which hands it to the server', async () => {
    // The root's start script, run by npm as a user runs it, on a dist/main.js that loads the
    // sources: between npm and node no shell may be left that would die of the signal alone.
    const root = new URL('../../../', import.meta.url).pathname
    const { scripts } = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
      scripts: { start: string }
    }
    const folder = await mkdtemp(join(tmpdir(), 'switchboard-npm-start-'))
    try {
      await writeFile(
        join(folder, 'package.json'),
        JSON.stringify({
          name: 'start-script',
          private: true,
          type: 'module',
          scripts: { start: scripts.start },
        }),
      )
      await mkdir(join(folder, 'examples/reference-server/dist'), { recursive: true })
      await writeFile(
        join(folder, 'examples/reference-server/dist/main.js'),
        `import ${JSON.stringify(main)}\n`,
      )
      const server = startProcess(
        { DATA_DIR: 'memory', NODE_OPTIONS: `--conditions=source --import ${import.meta.resolve('tsx')}` },
        { file: 'npm', args: ['start', '--silent'], cwd: folder },
      )
      const url = await server.listening
      expect((await fetch(`${url}/api/health`)).status).toBe(200)

      expect(await server.stop()).toBe(0)
      await expect(fetch(`${url}/api/health`)).rejects.toThrow()
    } finally {
      await rm(folder, { recursive: true, force: true })
    }
  }, 30_000)

  it('refuses to start without JWT_SECRET when DATABASE_URL is set, saying what to fix', async () => {
    const server = startProcess({
      DATABASE_URL: 'postgres://localhost/none',
      DATA_DIR: 'memory',
      JWT_SECRET: '',
    })
    await expect(server.listening).rejects.toThrow(/JWT_SECRET is required/)
  })

  it('refuses an OPENAI_BASE_URL holding credentials, and writes them nowhere', async () => {
    // fetch refuses a URL with credentials, so no call could use them; logged at start, they leaked.
    const server = startProcess({
      DATA_DIR: 'memory',
      LOG_LEVEL: 'info',
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: 'https://proxy-user:proxy-password-0451@llm.internal.example/v1',
    })
    await expect(server.listening).rejects.toThrow(/OPENAI_BASE_URL/)
    const { stdout, stderr } = server.output()
    expect(`${stdout}${stderr}`).not.toContain('proxy-password-0451')
  })

  // A PGlite start in a process of its own: 2 s on an idle machine, 9 s seen on a loaded one.
  it('keeps a generated JWT secret in DATA_DIR', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'switchboard-'))
    try {
      const server = startProcess({ DATA_DIR: dataDir })
      await server.listening
      const secret = (await readFile(join(dataDir, 'jwt-secret'), 'utf8')).trim()
      expect(secret.length).toBeGreaterThanOrEqual(32)
      await server.stop()
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  }, 60_000)
})
