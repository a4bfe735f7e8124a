import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestCompany, type TestServer } from './support/start-test-server.js'

let server: TestServer
let company: TestCompany

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
})
afterAll(async () => {
  await server.close()
})

const errorCode = (body: unknown) => (body as { error: { code: string } }).error.code

describe('agents over HTTP', () => {
  it('creates an agent with the defaults and answers 201 without the company id', async () => {
    const answer = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: 'Reception', role: 'reception' },
    })
    expect(answer.status).toBe(201)
    expect(answer.body).toEqual({
      id: expect.any(Number),
      name: 'Reception',
      role: 'reception',
      kind: 'ai',
      systemPrompt: '',
      llmModel: 'gpt-4o-mini',
      maxDepth: 3,
      handoff: {
        enabled: false,
        allowedTargets: [],
        announceHandoff: true,
        handoffMessageTemplate: '',
        messageHistoryDepth: 15,
        msgplatform: { sendSystemMessage: true },
      },
      fallbackReply: "Sorry, I can't answer right now. Please try again shortly.",
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: expect.any(String),
    })
  })

  it('works with an API token too', async () => {
    const answer = await server.request('POST', '/api/agents', {
      token: company.apiToken,
      body: { name: 'Via token', kind: 'human' },
    })
    expect(answer.status).toBe(201)
    expect(answer.body).toMatchObject({ kind: 'human' })
  })

  it('answers 400 VALIDATION_ERROR naming the fields', async () => {
    const answer = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: '', maxDepth: 0, handoff: { messageHistoryDepth: 4 } },
    })
    expect(answer.status).toBe(400)
    const { error } = answer.body as { error: { code: string; details: { path: string }[] } }
    expect(error.code).toBe('VALIDATION_ERROR')
    expect(error.details.map((detail) => detail.path)).toEqual(
      expect.arrayContaining(['name', 'maxDepth', 'handoff.messageHistoryDepth']),
    )
  })

  it('answers 400 for malformed JSON and 413 for a body over 1 MiB', async () => {
    const malformed = await server.request('POST', '/api/agents', { token: company.jwt, rawBody: '{"name":' })
    expect(malformed.status).toBe(400)
    expect(errorCode(malformed.body)).toBe('VALIDATION_ERROR')
    const huge = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: 'x', systemPrompt: 'x'.repeat(1024 * 1024 + 10) },
    })
    expect(huge.status).toBe(413)
    expect(errorCode(huge.body)).toBe('PAYLOAD_TOO_LARGE')
  })

  it('answers 400 when a target or route names an unknown or foreign agent', async () => {
    const other = await server.registerCompany()
    const foreign = await server.createAgent(other.jwt)
    const answer = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: {
        name: 'Reception',
        handoff: { enabled: true, allowedTargets: [foreign] },
        routingConfig: { enabled: true, routes: [{ id: 'sales', agentId: 99999, description: 'buy' }] },
      },
    })
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({
      error: {
        code: 'VALIDATION_ERROR',
        details: [{ path: 'handoff.allowedTargets.0' }, { path: 'routingConfig.routes.0.agentId' }],
      },
    })
  })

  it('answers 401 without a valid bearer', async () => {
    for (const token of [undefined, 'nonsense', `${company.jwt}x`]) {
      const answer = await server.request('GET', '/api/agents', { token })
      expect(answer.status).toBe(401)
      expect(errorCode(answer.body)).toBe('UNAUTHORIZED')
    }
  })

  it('lists agents page by page and refuses a limit outside 1..100', async () => {
    const fresh = await server.registerCompany()
    const ids = [] as number[]
    for (const name of ['a', 'b', 'c']) ids.push(await server.createAgent(fresh.jwt, { name }))
    const first = await server.request('GET', '/api/agents?limit=2', { token: fresh.apiToken })
    expect(first.status).toBe(200)
    const page = first.body as { agents: { id: number }[]; nextCursor: string | null }
    expect(page.agents.map((agent) => agent.id)).toEqual(ids.slice(0, 2))
    expect(page.nextCursor).toEqual(expect.any(String))
    const second = await server.request('GET', `/api/agents?limit=2&cursor=${page.nextCursor}`, {
      token: fresh.apiToken,
    })
    expect(second.body).toMatchObject({ agents: [{ id: ids[2] }], nextCursor: null })
    const all = await server.request('GET', '/api/agents', { token: fresh.jwt })
    expect((all.body as { agents: unknown[] }).agents).toHaveLength(3)
    for (const limit of ['0', '101', 'abc', '1.5', '-1']) {
      const answer = await server.request('GET', `/api/agents?limit=${limit}`, { token: fresh.jwt })
      expect(answer.status, limit).toBe(400)
      expect(errorCode(answer.body)).toBe('VALIDATION_ERROR')
    }
  })

  it('reads, patches and deletes one agent', async () => {
    const id = await server.createAgent(company.jwt, { name: 'Sales', routingModel: 'gpt-4o' })
    const read = await server.request('GET', `/api/agents/${id}`, { token: company.jwt })
    expect(read.status).toBe(200)
    expect(read.body).toMatchObject({ id, name: 'Sales', routingModel: 'gpt-4o' })

    const patched = await server.request('PATCH', `/api/agents/${id}`, {
      token: company.jwt,
      body: { name: 'Sales team', routingModel: null, maxDepth: 9 },
    })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ id, name: 'Sales team', maxDepth: 9 })
    expect(patched.body).not.toHaveProperty('routingModel')

    const badPatch = await server.request('PATCH', `/api/agents/${id}`, {
      token: company.jwt,
      body: { unknownField: true },
    })
    expect(badPatch.status).toBe(400)

    const deleted = await server.request('DELETE', `/api/agents/${id}`, { token: company.jwt })
    expect(deleted.status).toBe(204)
    expect(deleted.text).toBe('')
    const gone = await server.request('GET', `/api/agents/${id}`, { token: company.jwt })
    expect(gone.status).toBe(404)
    expect(errorCode(gone.body)).toBe('NOT_FOUND')
  })

  it('answers 404 for unknown and malformed path ids', async () => {
    for (const id of ['999999', 'abc', '0', '-1', '1.5', '99999999999', '%20']) {
      for (const method of ['GET', 'PATCH', 'DELETE']) {
        const answer = await server.request(method, `/api/agents/${id}`, {
          token: company.jwt,
          ...(method === 'PATCH' ? { body: { name: 'x' } } : {}),
        })
        expect(answer.status, `${method} ${id}`).toBe(404)
        expect(errorCode(answer.body)).toBe('NOT_FOUND')
      }
    }
  })

  it('answers 409 CONFLICT when deleting an entry agent or a target', async () => {
    const entry = await server.createAgent(company.jwt, { name: 'Entry' })
    await server.createIntegration(company.jwt, entry)
    const target = await server.createAgent(company.jwt, { name: 'Target' })
    await server.createAgent(company.jwt, {
      name: 'Caller',
      handoff: { enabled: true, allowedTargets: [target] },
    })
    for (const id of [entry, target]) {
      const answer = await server.request('DELETE', `/api/agents/${id}`, { token: company.jwt })
      expect(answer.status).toBe(409)
      expect(errorCode(answer.body)).toBe('CONFLICT')
    }
  })

  it('ignores a companyId in the body', async () => {
    const other = await server.registerCompany()
    const answer = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: 'Smuggled', companyId: other.id },
    })
    expect(answer.status).toBe(201)
    const id = (answer.body as { id: number }).id
    expect((await server.request('GET', `/api/agents/${id}`, { token: company.jwt })).status).toBe(200)
    expect((await server.request('GET', `/api/agents/${id}`, { token: other.jwt })).status).toBe(404)
  })
})
