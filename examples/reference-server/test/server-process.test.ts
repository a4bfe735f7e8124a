import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { type ServerProcess, startServerProcess } from './support/server-process.js'

const servers: ServerProcess[] = []

afterEach(() => {
  for (const server of servers.splice(0)) server.child.kill('SIGKILL')
})

function startProcess(environment: Record<string, string>): ServerProcess {
  const server = startServerProcess(environment)
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
      await server.stop()
    } finally {
      await rm(dataDir, { recursive: true, force: true })
    }
  })
})
