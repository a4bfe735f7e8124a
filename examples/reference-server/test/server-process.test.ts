import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'

const main = new URL('../src/main.ts', import.meta.url).pathname
const children: ChildProcess[] = []

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL')
})

/** The server as `npm start` runs it, from sources, in its own process. */
function startProcess(environment: Record<string, string>) {
  // The test's own environment may point at a database (CI exports DATABASE_URL); each test says
  // which storage it wants.
  const { DATABASE_URL: _database, JWT_SECRET: _secret, ...inherited } = process.env
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main], {
    env: { ...inherited, LOG_LEVEL: 'silent', HOST: '127.0.0.1', PORT: '0', ...environment },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const listening = new Promise<string>((resolve, reject) => {
    const check = () => {
      const match = /listening on (https?:\/\/\S+)/.exec(stdout)
      if (match) resolve(match[1]!)
    }
    child.stdout!.on('data', check)
    child.once('exit', (code) => reject(new Error(`exited with ${code}: ${stderr}`)))
  })
  return { child, listening, output: () => ({ stdout, stderr }) }
}

describe('the reference server process', () => {
  it('prints where it listens, answers health, and exits 0 on SIGTERM', async () => {
    const server = startProcess({ DATA_DIR: 'memory' })
    const url = await server.listening
    const health = await fetch(`${url}/api/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toEqual({ ok: true, storage: 'memory' })

    const started = Date.now()
    server.child.kill('SIGTERM')
    const [code] = await once(server.child, 'exit')
    expect(code).toBe(0)
    expect(Date.now() - started).toBeLessThan(15_000)
  })

  it('refuses to start without JWT_SECRET when DATABASE_URL is set, saying what to fix', async () => {
    const server = startProcess({
      DATABASE_URL: 'postgres://localhost/none',
      DATA_DIR: 'memory',
      JWT_SECRET: '',
    })
    await expect(server.listening).rejects.toThrow(/JWT_SECRET is required/)
  })

  it('keeps a generated JWT secret in DATA_DIR', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'switchboard-'))
    try {
      const server = startProcess({ DATA_DIR: dataDir })
      await server.listening
      const secret = (await readFile(join(dataDir, 'jwt-secret'), 'utf8')).trim()
      expect(secret.length).toBeGreaterThanOrEqual(32)
      server.child.kill('SIGTERM')
      await once(server.child, 'exit')
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })
})
