import { createFakePasswordHasher } from '@switchboard/core/testing'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
// The provider package's own test double: a real OpenAI-compatible HTTP server on port 0.
import {
  type FakeOpenAiServer,
  replyAnswer,
  startFakeOpenAiServer,
  toolCallsAnswer,
} from '../../../packages/provider-openai/test/support/fake-openai-server.js'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import { call, sendWebhook, setUpTenant } from './support/http-client.js'

interface SessionView {
  id: string
  state: string
  activeAgentId: number
  metadata: { agentPath: { agentId: number; via: string }[] }
}

interface MessagesView {
  messages: { role: string; text: string; delivery?: string }[]
}

let fakeOpenAi: FakeOpenAiServer
let platform: FakePlatform
let service: ReferenceServer

beforeAll(async () => {
  fakeOpenAi = await startFakeOpenAiServer()
})

afterAll(async () => {
  await fakeOpenAi.close()
})

beforeEach(async () => {
  fakeOpenAi.reset()
  platform = await startFakePlatform()
  service = await startReferenceServer(
    readConfig({
      PORT: '0',
      DATA_DIR: 'memory',
      LOG_LEVEL: 'silent',
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: fakeOpenAi.url,
    }),
    { passwordHasher: createFakePasswordHasher() },
  )
})

afterEach(async () => {
  await service.close()
  await platform.close()
  expect(fakeOpenAi.unexpected).toEqual([])
})

/**
 * Reception hands every customer to Sales, whose answer takes a while: long enough for an operator
 * to act while the turn is under way.
 */
async function receptionHandingOffToSales() {
  const tenant = await setUpTenant(service.url, {
    email: 'owner@velo.test',
    password: 'correct horse battery',
    knowledge: 'We sell bikes.',
    platformUrl: platform.url,
  })
  const api = <Body = Record<string, unknown>>(path: string, body?: unknown) =>
    call<Body>(`${service.url}${path}`, { token: tenant.token, body })
  const sales = await api<{ id: number }>('/api/agents', { name: 'Sales' })
  expect(sales.status).toBe(201)
  const salesId = sales.body.id
  const patched = await call(`${service.url}/api/agents/${tenant.agentId}`, {
    method: 'PATCH',
    token: tenant.token,
    body: {
      handoff: { enabled: true, allowedTargets: [salesId], handoffMessageTemplate: 'Passing you to sales.' },
    },
  })
  expect(patched.status).toBe(200)
  fakeOpenAi.enqueue(
    toolCallsAnswer([{ name: 'handoff_to_agent', arguments: JSON.stringify({ targetAgentId: salesId }) }]),
    replyAnswer('Sales here, what bike do you want?', { delayMs: 1500 }),
  )
  const received = await sendWebhook(service.url, tenant, {
    clientId: 'ada',
    text: 'I want a bike',
    messageId: 'm-1',
  })
  expect(received).toEqual({ status: 200, body: { ok: true } })
  // Sales is answering: the handoff is decided, nothing is committed yet.
  const deadline = Date.now() + 5000
  while (fakeOpenAi.requests.length < 2) {
    if (Date.now() > deadline) throw new Error('sales was never asked')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  const listed = await api<{ sessions: SessionView[] }>('/api/sessions')
  const [session] = listed.body.sessions
  return { tenant, api, receptionId: tenant.agentId, salesId, sessionId: session!.id }
}

describe('a session an operator pauses or closes while its turn hands off (spec: activeAgentId is kept while paused)', () => {
  it('keeps the agent it was paused with: the handoff of the cut-off turn does not land, nor its replies', async () => {
    const { api, receptionId, sessionId } = await receptionHandingOffToSales()

    const paused = await api(`/api/sessions/${sessionId}/pause`, {})
    expect(paused.body).toMatchObject({ state: 'paused', activeAgentId: receptionId })
    await service.switchboard.idle()

    const session = (await api<SessionView>(`/api/sessions/${sessionId}`)).body
    expect(session).toMatchObject({ state: 'paused', activeAgentId: receptionId })
    expect(session.metadata.agentPath.map((entry) => [entry.agentId, entry.via])).toEqual([
      [receptionId, 'initial'],
    ])
    const { messages } = (await api<MessagesView>(`/api/sessions/${sessionId}/messages`)).body
    expect(messages.map((message) => [message.role, message.delivery])).toEqual([
      ['customer', undefined],
      ['system', 'blocked'],
      ['agent', 'blocked'],
    ])
    expect(platform.replies).toEqual([])

    // The resume returns to the agent the session was paused with.
    const resumed = await api(`/api/sessions/${sessionId}/resume`, {})
    expect(resumed.body).toMatchObject({ state: 'ongoing', activeAgentId: receptionId })
  })

  it('keeps the agent it was closed with: no transition of a closed session', async () => {
    const { api, receptionId, sessionId } = await receptionHandingOffToSales()

    const closed = await api(`/api/sessions/${sessionId}/close`, {})
    expect(closed.body).toMatchObject({ state: 'closed', activeAgentId: receptionId })
    await service.switchboard.idle()

    const session = (await api<SessionView>(`/api/sessions/${sessionId}`)).body
    expect(session).toMatchObject({ state: 'closed', activeAgentId: receptionId })
    expect(session.metadata.agentPath).toHaveLength(1)
    expect(platform.replies).toEqual([])
  })
})
