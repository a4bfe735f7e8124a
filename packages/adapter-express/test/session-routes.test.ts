import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestCompany, type TestServer } from './support/start-test-server.js'

let server: TestServer
let company: TestCompany
let agentId: number
let integrationId: string
let clients = 0

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
  agentId = await server.createAgent(company.jwt, { name: 'Reception', role: 'reception' })
  integrationId = await server.createIntegration(company.jwt, agentId)
})
afterAll(async () => {
  await server.close()
})

const errorOf = (body: unknown) =>
  (body as { error: { code: string; message: string; details?: unknown } }).error
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/
const OFFLINE_REPLY = "I don't have information about that yet."

/** A fresh customer's session, answered once by the offline model. */
const newSession = () => server.openSession(integrationId, `customer-${++clients}`)

const post = (path: string, body?: unknown) =>
  server.request('POST', path, { token: company.jwt, ...(body === undefined ? {} : { body }) })

async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    if (check()) return
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe('reading sessions over HTTP', () => {
  it('shows a session with exactly the contract fields', async () => {
    const id = await newSession()
    const answer = await server.request('GET', `/api/sessions/${id}`, { token: company.apiToken })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      id,
      state: 'ongoing',
      activeAgentId: agentId,
      integrationId,
      customer: { clientId: `customer-${clients}`, channelId: 'channel-1', transport: 'telegram' },
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
      metadata: {
        agentPath: [
          {
            agentId,
            agentName: 'Reception',
            role: 'reception',
            timestamp: expect.stringMatching(ISO),
            via: 'initial',
          },
        ],
        sharedContext: { facts: {}, journey: [] },
        errors: [],
      },
    })
    const upper = await server.request('GET', `/api/sessions/${id.toUpperCase()}`, { token: company.jwt })
    expect(upper.status).toBe(200)
  })

  it('shows null for the channel and transport of a customer whose channel has none, as webchat', async () => {
    const ingested = await server.switchboard.ingest({
      integrationId,
      clientId: `visitor-${++clients}`,
      text: 'hi',
    })
    const id = ingested._unsafeUnwrap().session.id
    const answer = await server.request('GET', `/api/sessions/${id}`, { token: company.jwt })
    expect((answer.body as { customer: unknown }).customer).toEqual({
      clientId: `visitor-${clients}`,
      channelId: null,
      transport: null,
    })
  })

  it('shows the status and the context', async () => {
    const id = await newSession()
    const status = await server.request('GET', `/api/sessions/${id}/status`, { token: company.jwt })
    expect(status.status).toBe(200)
    expect(status.body).toEqual({ id, state: 'ongoing', activeAgentId: agentId })
    const context = await server.request('GET', `/api/sessions/${id}/context`, { token: company.jwt })
    expect(context.status).toBe(200)
    expect(context.body).toEqual({
      sharedContext: { facts: {}, journey: [] },
      agentPath: [expect.objectContaining({ agentId, via: 'initial' })],
    })
  })

  it('lists messages in arrival order, page by page', async () => {
    const id = await newSession()
    await server.openSession(integrationId, `customer-${clients}`, 'second message')
    const all = await server.request('GET', `/api/sessions/${id}/messages`, { token: company.jwt })
    expect(all.status).toBe(200)
    const { messages, nextCursor } = all.body as { messages: Record<string, unknown>[]; nextCursor: null }
    expect(nextCursor).toBeNull()
    expect(messages).toEqual([
      { id: expect.any(String), role: 'customer', text: 'hello there', at: expect.stringMatching(ISO) },
      {
        id: expect.any(String),
        role: 'agent',
        text: OFFLINE_REPLY,
        agentId,
        at: expect.stringMatching(ISO),
        delivery: 'sent',
      },
      { id: expect.any(String), role: 'customer', text: 'second message', at: expect.stringMatching(ISO) },
      expect.objectContaining({ role: 'agent', delivery: 'sent' }),
    ])

    const seen: unknown[] = []
    let cursor: string | null = null
    do {
      const query: string = cursor === null ? '?limit=3' : `?limit=3&cursor=${cursor}`
      const page = await server.request('GET', `/api/sessions/${id}/messages${query}`, { token: company.jwt })
      expect(page.status).toBe(200)
      const body = page.body as { messages: unknown[]; nextCursor: string | null }
      seen.push(...body.messages)
      cursor = body.nextCursor
    } while (cursor !== null)
    expect(seen).toEqual(messages)

    for (const query of ['?cursor=garbage', '?limit=0', '?limit=101', '?cursor=']) {
      const bad = await server.request('GET', `/api/sessions/${id}/messages${query}`, { token: company.jwt })
      expect(bad.status, query).toBe(400)
      expect(errorOf(bad.body).code).toBe('VALIDATION_ERROR')
    }
  })

  it('lists sessions newest first, filtered by state and integration', async () => {
    const owner = await server.registerCompany()
    const entry = await server.createAgent(owner.jwt)
    const first = await server.createIntegration(owner.jwt, entry)
    const second = await server.createIntegration(owner.jwt, entry)
    const a = await server.openSession(first, 'a')
    const b = await server.openSession(first, 'b')
    const c = await server.openSession(second, 'c')
    await server.request('POST', `/api/sessions/${b}/pause`, { token: owner.jwt })

    const list = async (query: string) => {
      const answer = await server.request('GET', `/api/sessions${query}`, { token: owner.apiToken })
      expect(answer.status, query).toBe(200)
      const body = answer.body as { sessions: { id: string }[]; nextCursor: string | null }
      return { ids: body.sessions.map((session) => session.id), nextCursor: body.nextCursor }
    }
    expect((await list('')).ids).toEqual([c, b, a])
    expect((await list('?state=paused')).ids).toEqual([b])
    expect((await list('?state=ongoing')).ids).toEqual([c, a])
    expect((await list(`?integrationId=${first}`)).ids).toEqual([b, a])
    expect((await list(`?integrationId=${first}&state=ongoing`)).ids).toEqual([a])
    expect((await list('?integrationId=999999')).ids).toEqual([])
    const page = await list('?limit=2')
    expect(page.ids).toEqual([c, b])
    expect((await list(`?limit=2&cursor=${page.nextCursor}`)).ids).toEqual([a])
    const full = await server.request('GET', '/api/sessions', { token: owner.jwt })
    expect((full.body as { sessions: unknown[] }).sessions[0]).not.toHaveProperty('companyId')

    for (const query of ['?state=open', '?limit=0', '?limit=1000', '?integrationId=abc']) {
      const bad = await server.request('GET', `/api/sessions${query}`, { token: owner.jwt })
      expect(bad.status, query).toBe(400)
      expect(errorOf(bad.body).code).toBe('VALIDATION_ERROR')
    }
  })

  it('answers 404 for unknown and malformed session ids on every route', async () => {
    const routes: [string, string][] = [
      ['GET', ''],
      ['GET', '/status'],
      ['GET', '/context'],
      ['GET', '/messages'],
      ['POST', '/messages'],
      ['POST', '/pause'],
      ['POST', '/resume'],
      ['POST', '/close'],
      ['POST', '/reassign'],
    ]
    const bodies: Record<string, unknown> = { '/messages': { text: 'hi' }, '/reassign': { agentId } }
    for (const [method, suffix] of routes) {
      for (const id of [
        '6f1c2b8e-9a4d-4c3b-8e2f-1a2b3c4d5e6f',
        'not-a-uuid',
        '123',
        'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz',
      ]) {
        const answer = await server.request(method, `/api/sessions/${id}${suffix}`, {
          token: company.jwt,
          ...(method === 'POST' ? { body: bodies[suffix] ?? {} } : {}),
        })
        expect(answer.status, `${method} ${id}${suffix}`).toBe(404)
        expect(errorOf(answer.body).code).toBe('NOT_FOUND')
      }
    }
  })

  // The session is looked up before its body is read: a path id names a resource that is not
  // there whatever is sent to it (CONTRACT §2), as on the agents and integrations routes.
  it('answers 404 for an unknown or malformed session id whatever the body', async () => {
    const badBodies: Record<string, unknown> = {
      '/messages': { text: '' },
      '/pause': { reason: 1 },
      '/resume': { unknown: true },
      '/close': { reason: 'x'.repeat(501) },
      '/reassign': {},
    }
    for (const [suffix, body] of Object.entries(badBodies)) {
      for (const id of ['6f1c2b8e-9a4d-4c3b-8e2f-1a2b3c4d5e6f', 'not-a-uuid']) {
        const answer = await server.request('POST', `/api/sessions/${id}${suffix}`, {
          token: company.jwt,
          body,
        })
        expect(answer.status, `POST ${id}${suffix}`).toBe(404)
        expect(errorOf(answer.body).code).toBe('NOT_FOUND')
      }
    }
    const other = await newSession()
    const invalid = await post(`/api/sessions/${other}/reassign`, {})
    expect(invalid.status).toBe(400)
    expect(errorOf(invalid.body).code).toBe('VALIDATION_ERROR')
  })
})

describe('operating sessions over HTTP', () => {
  it('pauses, refuses a second pause, and resumes with a note', async () => {
    const id = await newSession()
    const paused = await post(`/api/sessions/${id}/pause`, {
      reason: 'operator takes over',
      externalReference: 'T-1',
    })
    expect(paused.status).toBe(200)
    expect(paused.body).toEqual({
      id,
      state: 'paused',
      activeAgentId: agentId,
      pauseState: {
        pausedAt: expect.stringMatching(ISO),
        reason: 'operator takes over',
        externalReference: 'T-1',
      },
    })
    const status = await server.request('GET', `/api/sessions/${id}/status`, { token: company.jwt })
    expect(status.body).toEqual(paused.body)

    const again = await post(`/api/sessions/${id}/pause`)
    expect(again.status).toBe(400)
    expect(errorOf(again.body).code).toBe('INVALID_STATE')

    const resumed = await post(`/api/sessions/${id}/resume`, { note: 'refund approved' })
    expect(resumed.status).toBe(200)
    expect(resumed.body).toEqual({ id, state: 'ongoing', activeAgentId: agentId })
    const context = await server.request('GET', `/api/sessions/${id}/context`, { token: company.jwt })
    expect(
      (context.body as { sharedContext: { journey: { step: string }[] } }).sharedContext.journey,
    ).toEqual([{ step: 'Operator note: refund approved', at: expect.stringMatching(ISO) }])
  })

  it('answers 400 INVALID_STATE to a resume of a session that is not paused', async () => {
    const id = await newSession()
    const answer = await post(`/api/sessions/${id}/resume`)
    expect(answer.status).toBe(400)
    expect(errorOf(answer.body).code).toBe('INVALID_STATE')
  })

  it('accepts no body, an empty body and {} where every field is optional', async () => {
    const id = await newSession()
    const noBody = await server.request('POST', `/api/sessions/${id}/pause`, { token: company.jwt })
    expect(noBody.status).toBe(200)
    const emptyBody = await server.request('POST', `/api/sessions/${id}/resume`, {
      token: company.jwt,
      rawBody: '',
    })
    expect(emptyBody.status).toBe(200)
    const emptyObject = await post(`/api/sessions/${id}/close`, {})
    expect(emptyObject.status).toBe(200)
  })

  it('answers 400 VALIDATION_ERROR to bodies out of bounds', async () => {
    const id = await newSession()
    const cases: [string, unknown, string][] = [
      ['pause', { reason: 'x'.repeat(501) }, 'reason'],
      ['pause', { externalReference: 'x'.repeat(201) }, 'externalReference'],
      ['pause', { reason: 42 }, 'reason'],
      ['resume', { note: 'x'.repeat(501) }, 'note'],
      ['close', { reason: ['x'] }, 'reason'],
      ['reassign', {}, 'agentId'],
      ['reassign', { agentId: '1' }, 'agentId'],
      ['reassign', { agentId, operatorId: 1.5 }, 'operatorId'],
      ['messages', { text: '' }, 'text'],
      ['messages', { text: 'x'.repeat(4001) }, 'text'],
      ['messages', {}, 'text'],
      ['pause', { unexpected: true }, 'unexpected'],
      ['pause', [], '(root)'],
      ['pause', null, '(root)'],
    ]
    for (const [action, body, path] of cases) {
      const answer = await server.request('POST', `/api/sessions/${id}/${action}`, {
        token: company.jwt,
        rawBody: JSON.stringify(body),
      })
      expect(answer.status, `${action} ${JSON.stringify(body).slice(0, 40)}`).toBe(400)
      expect(errorOf(answer.body)).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path }] })
    }
    const status = await server.request('GET', `/api/sessions/${id}/status`, { token: company.jwt })
    expect(status.body).toMatchObject({ state: 'ongoing' })
  })

  it('closes, then refuses close, reassign and operator messages with INVALID_STATE', async () => {
    const id = await newSession()
    const closed = await post(`/api/sessions/${id}/close`, { reason: 'done' })
    expect(closed.status).toBe(200)
    expect(closed.body).toEqual({ id, state: 'closed', activeAgentId: agentId })
    for (const [action, body] of [
      ['close', {}],
      ['pause', {}],
      ['resume', {}],
      ['reassign', { agentId }],
      ['messages', { text: 'still there?' }],
    ] as const) {
      const answer = await post(`/api/sessions/${id}/${action}`, body)
      expect(answer.status, action).toBe(400)
      expect(errorOf(answer.body).code).toBe('INVALID_STATE')
    }
  })

  it('reassigns to another AI agent', async () => {
    const sales = await server.createAgent(company.jwt, { name: 'Sales', role: 'sales' })
    const id = await newSession()
    const answer = await post(`/api/sessions/${id}/reassign`, { agentId: sales })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({ id, state: 'ongoing', activeAgentId: sales })
    const context = await server.request('GET', `/api/sessions/${id}/context`, { token: company.jwt })
    expect((context.body as { agentPath: unknown[] }).agentPath.at(-1)).toMatchObject({
      agentId: sales,
      agentName: 'Sales',
      via: 'manual',
    })
  })

  it('reassigns to a human agent: transferred on the platform and paused', async () => {
    const human = await server.createAgent(company.jwt, { name: 'Human desk', kind: 'human' })
    const id = await newSession()
    const answer = await post(`/api/sessions/${id}/reassign`, { agentId: human, operatorId: 7, groupId: 3 })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      id,
      state: 'paused',
      activeAgentId: human,
      pauseState: { pausedAt: expect.stringMatching(ISO) },
    })
    expect(server.connector.transfers.at(-1)).toMatchObject({
      sessionId: id,
      operatorId: 7,
      groupId: 3,
      systemMessage: true,
    })
  })

  it('answers 400 VALIDATION_ERROR to a reassign to an unknown or foreign agent', async () => {
    const other = await server.registerCompany()
    const foreign = await server.createAgent(other.jwt)
    const id = await newSession()
    for (const target of [foreign, 777777]) {
      const answer = await post(`/api/sessions/${id}/reassign`, { agentId: target })
      expect(answer.status).toBe(400)
      expect(errorOf(answer.body)).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: 'agentId' }] })
    }
    const status = await server.request('GET', `/api/sessions/${id}/status`, { token: company.jwt })
    expect(status.body).toMatchObject({ activeAgentId: agentId })
  })

  it('sends an operator message through the channel, even while paused', async () => {
    const id = await newSession()
    await post(`/api/sessions/${id}/pause`)
    const answer = await post(`/api/sessions/${id}/messages`, { text: 'Hello, this is Anna from support' })
    expect(answer.status).toBe(201)
    expect(answer.body).toEqual({
      id: expect.any(String),
      role: 'operator',
      text: 'Hello, this is Anna from support',
      at: expect.stringMatching(ISO),
      delivery: 'pending',
    })
    const messageId = (answer.body as { id: string }).id
    await eventually(
      () => server.connector.sent.some((sent) => sent.messageId === messageId),
      'the operator message to be sent',
    )
    expect(server.connector.sent.find((sent) => sent.messageId === messageId)).toMatchObject({
      sessionId: id,
      role: 'operator',
      text: 'Hello, this is Anna from support',
    })
    await server.switchboard.idle()
    const messages = await server.request('GET', `/api/sessions/${id}/messages`, { token: company.jwt })
    expect((messages.body as { messages: unknown[] }).messages.at(-1)).toMatchObject({
      id: messageId,
      role: 'operator',
      delivery: 'sent',
    })
  })
})
