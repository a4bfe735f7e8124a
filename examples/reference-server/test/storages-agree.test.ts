import { createHmac } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createFakePasswordHasher } from '@switchboard/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'

const servers: ReferenceServer[] = []
const directories: string[] = []

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
  await Promise.all(directories.splice(0).map((directory) => rm(directory, { recursive: true, force: true })))
})

async function start(dataDir: string): Promise<ReferenceServer> {
  const config = readConfig({ PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'silent', JWT_SECRET: 'x'.repeat(40) })
  const server = await startReferenceServer(config, { passwordHasher: createFakePasswordHasher() })
  servers.push(server)
  return server
}

/**
 * The same requests against one server, answered as raw JSON text: key order included, times and
 * UUIDs (which differ from run to run) replaced by placeholders.
 */
async function transcript(url: string): Promise<string[]> {
  const answers: string[] = []
  const call = async (method: string, path: string, options: { token?: string; body?: unknown } = {}) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        'content-type': 'application/json',
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    })
    const text = await response.text()
    answers.push(
      `${method} ${path.replace(/[0-9a-f-]{36}/g, 'UUID')} ${response.status} ${text
        .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, 'TIME')
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'UUID')}`,
    )
    return JSON.parse(text === '' ? 'null' : text) as Record<string, unknown>
  }
  const credentials = { email: 'owner@shop.test', password: 'correct horse' }
  await call('POST', '/api/auth/register', { body: { ...credentials, companyName: 'Shop' } })
  const login = (await call('POST', '/api/auth/login', { body: credentials })) as {
    session: { access_token: string }
  }
  const token = login.session.access_token
  answers.length = 0
  const sales = await call('POST', '/api/agents', { token, body: { name: 'Sales' } })
  const reception = await call('POST', '/api/agents', {
    token,
    body: {
      name: 'Reception',
      routingConfig: { enabled: true, routes: [{ id: 'sales', agentId: sales.id, description: 'buying' }] },
      handoff: { enabled: true, allowedTargets: [sales.id], msgplatform: { sendSystemMessage: false } },
    },
  })
  await call('PATCH', `/api/agents/${reception.id}`, {
    token,
    body: { handoff: { msgplatform: { targetGroupId: 7 } }, routingConfig: { confidenceThreshold: 0.7 } },
  })
  await call('GET', `/api/agents/${reception.id}`, { token })
  await call('GET', '/api/agents', { token })
  const integration = (await call('POST', '/api/integrations', {
    token,
    body: {
      type: 'msgplatform',
      name: 'Platform',
      entryAgentId: sales.id,
      // Nothing listens there: the reply fails, which this test does not look at.
      config: { apiBaseUrl: 'http://127.0.0.1:9', apiToken: 'platform-token' },
    },
  })) as { id: string; webhookSecret: string }
  // Its secret is random and its URL names the port.
  answers.pop()
  const body = '{"text":"hello","client_id":"c-1","channel_id":"ch","transport":"wa"}'
  await fetch(`${url}/api/webhook/msgplatform/${integration.id}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-webhook-signature': `sha256=${createHmac('sha256', integration.webhookSecret).update(body).digest('hex')}`,
    },
    body,
  })
  const [session] = ((await call('GET', '/api/sessions', { token })) as { sessions: { id: string }[] })
    .sessions
  answers.pop()
  await call('POST', `/api/sessions/${session!.id}/pause`, {
    token,
    body: { externalReference: 'T-1', reason: 'an operator takes over' },
  })
  await call('GET', `/api/sessions/${session!.id}/status`, { token })
  const full = (await call('GET', `/api/sessions/${session!.id}`, { token })) as { pauseState: unknown }
  answers.pop()
  answers.push(JSON.stringify(full.pauseState).replace(/\d{4}-[^"]*Z/g, 'TIME'))
  return answers
}

describe('the reference server on each storage', () => {
  // jsonb keeps an object's keys in an order of its own (shorter keys first): an agent's handoff
  // and routing settings and a session's pauseState were answered with their keys in another
  // order on PGlite and PostgreSQL than on the memory storage.
  it('answers the same JSON, key order included, on the memory storage and on PGlite', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'switchboard-agree-'))
    directories.push(dataDir)
    const memory = await transcript((await start('memory')).url)
    const pglite = await transcript((await start(join(dataDir, 'data'))).url)

    expect(pglite).toEqual(memory)
    expect(memory.join('\n')).toContain(
      '"handoff":{"enabled":true,"allowedTargets":[1],"announceHandoff":true,"handoffMessageTemplate":"","messageHistoryDepth":15,"msgplatform":{"targetGroupId":7,"sendSystemMessage":false}}',
    )
    expect(memory.join('\n')).toContain(
      '"routingConfig":{"enabled":true,"routes":[{"id":"sales","agentId":1,"description":"buying"}],"confidenceThreshold":0.7}',
    )
    expect(memory.join('\n')).toContain(
      '"pauseState":{"pausedAt":"TIME","reason":"an operator takes over","externalReference":"T-1"}',
    )
  }, 30_000)
})
