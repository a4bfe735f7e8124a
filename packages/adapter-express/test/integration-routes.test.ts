import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  PUBLIC_URL,
  startTestServer,
  type TestCompany,
  type TestServer,
} from './support/start-test-server.js'

let server: TestServer
let company: TestCompany
let agentId: number

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
  agentId = await server.createAgent(company.jwt, { name: 'Reception' })
})
afterAll(async () => {
  await server.close()
})

const errorOf = (body: unknown) =>
  (body as { error: { code: string; message: string; details?: unknown } }).error

const msgplatformBody = (entryAgentId: number) => ({
  type: 'msgplatform',
  name: 'Support line',
  entryAgentId,
  config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'platform-token' },
})

describe('integrations over HTTP', () => {
  it('creates a msgplatform integration: 201 with the secret, shown only then', async () => {
    const answer = await server.request('POST', '/api/integrations', {
      token: company.jwt,
      body: msgplatformBody(agentId),
    })
    expect(answer.status).toBe(201)
    const created = answer.body as { id: string; webhookSecret: string }
    expect(answer.body).toEqual({
      id: expect.stringMatching(/^[0-9]+$/),
      type: 'msgplatform',
      name: 'Support line',
      active: true,
      entryAgentId: agentId,
      webhookUrl: `${PUBLIC_URL}/api/webhook/msgplatform/${created.id}`,
      webhookSecret: expect.stringMatching(/^[0-9a-f]{64}$/),
    })

    const read = await server.request('GET', `/api/integrations/${created.id}`, { token: company.apiToken })
    expect(read.status).toBe(200)
    expect(read.body).toEqual({
      id: created.id,
      type: 'msgplatform',
      name: 'Support line',
      active: true,
      entryAgentId: agentId,
      webhookUrl: `${PUBLIC_URL}/api/webhook/msgplatform/${created.id}`,
      config: { apiBaseUrl: 'https://platform.example.com' },
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    })
    const list = await server.request('GET', '/api/integrations', { token: company.jwt })
    expect(list.status).toBe(200)
    expect(list.body).toMatchObject({ integrations: expect.any(Array), nextCursor: null })
    expect(list.text).not.toContain(created.webhookSecret)
    expect(list.text).not.toContain('platform-token')
    expect(read.text).not.toContain('platform-token')
  })

  it('keeps a given webhook secret and refuses one under 16 characters', async () => {
    const given = 'sixteen-chars-ok'
    const kept = await server.request('POST', '/api/integrations', {
      token: company.jwt,
      body: { ...msgplatformBody(agentId), webhookSecret: given },
    })
    expect(kept.status).toBe(201)
    expect(kept.body).toMatchObject({ webhookSecret: given })
    const short = await server.request('POST', '/api/integrations', {
      token: company.jwt,
      body: { ...msgplatformBody(agentId), webhookSecret: 'too-short' },
    })
    expect(short.status).toBe(400)
    expect(errorOf(short.body)).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [{ path: 'webhookSecret' }],
    })
  })

  it('creates a webchat integration whose URL is its WebSocket', async () => {
    const answer = await server.request('POST', '/api/integrations', {
      token: company.jwt,
      body: {
        type: 'webchat',
        name: 'Widget',
        entryAgentId: agentId,
        config: { allowedOrigins: ['https://shop.example.com'] },
      },
    })
    expect(answer.status).toBe(201)
    const { id } = answer.body as { id: string }
    expect(answer.body).toMatchObject({
      type: 'webchat',
      webhookUrl: `wss://switchboard.test/api/webchat/${id}`,
    })
    const read = await server.request('GET', `/api/integrations/${id}`, { token: company.jwt })
    expect(read.body).toMatchObject({ config: { allowedOrigins: ['https://shop.example.com'] } })
  })

  it('answers 400 naming the field for bad types, configs and entry agents', async () => {
    const other = await server.registerCompany()
    const foreignAgent = await server.createAgent(other.jwt)
    const cases: [unknown, string][] = [
      [{ ...msgplatformBody(agentId), type: 'fax' }, 'type'],
      [
        { ...msgplatformBody(agentId), config: { apiBaseUrl: 'not a url', apiToken: 't' } },
        'config.apiBaseUrl',
      ],
      [{ ...msgplatformBody(agentId), config: { apiBaseUrl: 'https://x.example' } }, 'config.apiToken'],
      [msgplatformBody(foreignAgent), 'entryAgentId'],
      [msgplatformBody(987654), 'entryAgentId'],
      [{ ...msgplatformBody(agentId), name: '' }, 'name'],
    ]
    for (const [body, path] of cases) {
      const answer = await server.request('POST', '/api/integrations', { token: company.jwt, body })
      expect(answer.status, path).toBe(400)
      expect(errorOf(answer.body)).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path }] })
    }
  })

  it('patches and answers 200 with the integration', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const second = await server.createAgent(company.jwt, { name: 'Second' })
    const answer = await server.request('PATCH', `/api/integrations/${id}`, {
      token: company.jwt,
      body: {
        name: 'Renamed',
        active: false,
        entryAgentId: second,
        config: { apiBaseUrl: 'http://other.example.com' },
      },
    })
    expect(answer.status).toBe(200)
    expect(answer.body).toMatchObject({
      id,
      name: 'Renamed',
      active: false,
      entryAgentId: second,
      config: { apiBaseUrl: 'http://other.example.com' },
    })
    expect(answer.body).not.toHaveProperty('webhookSecret')
    const stored = await server.storage.integrations.get({ id })
    expect(stored?.config).toEqual({ apiBaseUrl: 'http://other.example.com', apiToken: 'platform-token' })

    const badAgent = await server.request('PATCH', `/api/integrations/${id}`, {
      token: company.jwt,
      body: { entryAgentId: 424242 },
    })
    expect(badAgent.status).toBe(400)
    expect(errorOf(badAgent.body).details).toEqual([{ path: 'entryAgentId', message: expect.any(String) }])
    const badConfig = await server.request('PATCH', `/api/integrations/${id}`, {
      token: company.jwt,
      body: { config: { apiBaseUrl: 42 } },
    })
    expect(badConfig.status).toBe(400)
    expect(errorOf(badConfig.body).details).toEqual([
      { path: 'config.apiBaseUrl', message: expect.any(String) },
    ])
    const badField = await server.request('PATCH', `/api/integrations/${id}`, {
      token: company.jwt,
      body: { type: 'webchat' },
    })
    expect(badField.status).toBe(400)
  })

  it('answers 400 naming a config key __proto__ in a patch, as it does on creation, and stores nothing', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const before = await server.storage.integrations.get({ id })
    for (const rawBody of [
      '{"config":{"__proto__":{"apiToken":"replaced"}}}',
      '{"name":"Renamed","config":{"apiBaseUrl":"http://other.example.com","__proto__":{}}}',
    ]) {
      const answer = await server.request('PATCH', `/api/integrations/${id}`, {
        token: company.jwt,
        rawBody,
      })
      expect(answer.status, rawBody).toBe(400)
      expect(errorOf(answer.body)).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: [{ path: 'config.__proto__', message: 'unknown field' }],
      })
    }
    expect(await server.storage.integrations.get({ id })).toEqual(before)
  })

  it('rotates the secret: the new one is returned and stored at once', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const before = (await server.storage.integrations.get({ id }))?.webhookSecret
    const answer = await server.request('POST', `/api/integrations/${id}/rotate-secret`, {
      token: company.jwt,
    })
    expect(answer.status).toBe(200)
    const { webhookSecret } = answer.body as { webhookSecret: string }
    expect(Object.keys(answer.body as object)).toEqual(['webhookSecret'])
    expect(webhookSecret).toMatch(/^[0-9a-f]{64}$/)
    expect(webhookSecret).not.toBe(before)
    expect((await server.storage.integrations.get({ id }))?.webhookSecret).toBe(webhookSecret)
  })

  it('registers status hooks on the platform', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const answer = await server.request('POST', `/api/integrations/${id}/status-hooks`, {
      token: company.jwt,
    })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({ registered: ['close_dialog', 'close_request', 'dialog_transferred'] })
    expect(server.connector.statusHooks.at(-1)).toEqual({
      integrationId: id,
      url: `${PUBLIC_URL}/api/webhook/msgplatform/${id}`,
      events: ['close_dialog', 'close_request', 'dialog_transferred'],
    })
  })

  it('answers 500 INTERNAL_ERROR when the platform refuses the status hooks', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    server.connector.failNextStatusHooks('HTTP 401 from the platform')
    const answer = await server.request('POST', `/api/integrations/${id}/status-hooks`, {
      token: company.jwt,
    })
    expect(answer.status).toBe(500)
    expect(errorOf(answer.body).code).toBe('INTERNAL_ERROR')
    expect(errorOf(answer.body).message).toMatch(/platform refused/)
  })

  it('answers 400 for status hooks on webchat', async () => {
    const created = await server.request('POST', '/api/integrations', {
      token: company.jwt,
      body: { type: 'webchat', name: 'Widget', entryAgentId: agentId },
    })
    const { id } = created.body as { id: string }
    const answer = await server.request('POST', `/api/integrations/${id}/status-hooks`, {
      token: company.jwt,
    })
    expect(answer.status).toBe(400)
    expect(errorOf(answer.body).code).toBe('VALIDATION_ERROR')
  })

  it('answers 400 for status hooks when no connector can register them', async () => {
    const plain = await startTestServer({ statusHooks: false })
    try {
      const owner = await plain.registerCompany()
      const id = await plain.createIntegration(owner.jwt, await plain.createAgent(owner.jwt))
      const answer = await plain.request('POST', `/api/integrations/${id}/status-hooks`, { token: owner.jwt })
      expect(answer.status).toBe(400)
      expect(errorOf(answer.body).code).toBe('VALIDATION_ERROR')
    } finally {
      await plain.close()
    }
  })

  it('lists webhook logs newest first, page by page', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const base = Date.parse('2026-03-01T00:00:00.000Z')
    const outcomes = ['queued', 'duplicate', 'rejected'] as const
    for (const [index, outcome] of outcomes.entries()) {
      await server.storage.webhookLogs.add({
        id: randomUUID(),
        companyId: company.id,
        integrationId: id,
        receivedAt: new Date(base + index * 1000),
        httpStatus: outcome === 'rejected' ? 401 : 200,
        outcome,
        ...(outcome === 'rejected' ? { reason: 'bad signature' } : { sessionId: randomUUID() }),
      })
    }
    const first = await server.request('GET', `/api/integrations/${id}/webhook-logs?limit=2`, {
      token: company.jwt,
    })
    expect(first.status).toBe(200)
    const page = first.body as { logs: { outcome: string }[]; nextCursor: string }
    expect(page.logs).toEqual([
      {
        id: expect.any(String),
        receivedAt: '2026-03-01T00:00:02.000Z',
        httpStatus: 401,
        outcome: 'rejected',
        reason: 'bad signature',
      },
      {
        id: expect.any(String),
        receivedAt: '2026-03-01T00:00:01.000Z',
        httpStatus: 200,
        outcome: 'duplicate',
        sessionId: expect.any(String),
      },
    ])
    const second = await server.request(
      'GET',
      `/api/integrations/${id}/webhook-logs?limit=2&cursor=${encodeURIComponent(page.nextCursor)}`,
      { token: company.jwt },
    )
    expect(second.body).toMatchObject({ logs: [{ outcome: 'queued' }], nextCursor: null })
    const badLimit = await server.request('GET', `/api/integrations/${id}/webhook-logs?limit=500`, {
      token: company.jwt,
    })
    expect(badLimit.status).toBe(400)
  })

  it('deletes with 204, then answers 404 on every route of the id', async () => {
    const id = await server.createIntegration(company.jwt, agentId)
    const deleted = await server.request('DELETE', `/api/integrations/${id}`, { token: company.jwt })
    expect(deleted.status).toBe(204)
    const routes: [string, string][] = [
      ['GET', ''],
      ['PATCH', ''],
      ['DELETE', ''],
      ['POST', '/rotate-secret'],
      ['POST', '/status-hooks'],
      ['GET', '/webhook-logs'],
    ]
    for (const [method, suffix] of routes) {
      for (const path of [id, 'abc', '0', '01', '1e3', '99999999999999999999']) {
        const answer = await server.request(method, `/api/integrations/${path}${suffix}`, {
          token: company.jwt,
          ...(method === 'PATCH' ? { body: { name: 'x' } } : {}),
        })
        expect(answer.status, `${method} ${path}${suffix}`).toBe(404)
        expect(errorOf(answer.body).code).toBe('NOT_FOUND')
      }
    }
  })
})
