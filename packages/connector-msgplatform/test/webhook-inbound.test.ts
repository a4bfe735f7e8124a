import { reply } from '@switchboard/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type Stack, startStack } from './support/start-stack.js'

const stacks: Stack[] = []
afterEach(async () => {
  for (const stack of stacks.splice(0)) {
    await stack.server.switchboard.idle()
    stack.model.assertDone()
    await stack.close()
  }
})

async function setUp() {
  const stack = await startStack()
  stacks.push(stack)
  const agentId = await stack.createAgent({ name: 'Helper' })
  const integrationId = await stack.createIntegration(agentId)
  return { stack, agentId, integrationId }
}

async function messagesOf(stack: Stack, sessionId: string) {
  const listed = await stack.api('GET', `/api/sessions/${sessionId}/messages?limit=100`)
  return listed.body.messages as { role: string; text: string; delivery?: string }[]
}

/** The customer message each agent turn answered: the last `user` message of its request. */
function answeredTexts(stack: Stack, agentId: number): string[] {
  return stack.model.requestsFor(agentId, 'turn').map((request) => {
    const last = request.messages.at(-1)
    return last?.role === 'user' ? last.content : '(none)'
  })
}

describe('idempotency', () => {
  it.each([
    ['message_id', (id: string) => ({ extra: { message_id: id }, headers: {} })],
    ['webhook-id', (id: string) => ({ extra: {}, headers: { 'webhook-id': id } })],
  ])('stores and answers a repeated %s once, sent one after the other', async (_key, delivery) => {
    const { stack, agentId, integrationId } = await setUp()
    stack.model.script(agentId, reply('Hello there'))
    const { extra, headers } = delivery('msg-1')
    const first = await stack.message(integrationId, 'c-1', 'hi', extra, { headers })
    const second = await stack.message(integrationId, 'c-1', 'hi', extra, { headers })
    expect(first).toEqual({ status: 200, body: { ok: true } })
    expect(second).toEqual({ status: 200, body: { ok: true, duplicate: true } })

    await stack.platform.waitForCalls('/v1/messages', 1)
    await stack.server.switchboard.idle()
    const [session] = await stack.sessionsOf(integrationId, 'c-1')
    expect((await messagesOf(stack, String(session?.id))).map((message) => message.role)).toEqual([
      'customer',
      'agent',
    ])
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(1)
  })

  it.each([
    ['message_id', (id: string) => ({ extra: { message_id: id }, headers: {} })],
    ['webhook-id', (id: string) => ({ extra: {}, headers: { 'webhook-id': id } })],
  ])('stores and answers a repeated %s once, sent concurrently', async (_key, delivery) => {
    const { stack, agentId, integrationId } = await setUp()
    stack.model.script(agentId, reply('Hello there'))
    const { extra, headers } = delivery('msg-2')
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => stack.message(integrationId, 'c-2', 'hi', extra, { headers })),
    )
    expect(answers.every((answer) => answer.status === 200)).toBe(true)
    expect(answers.filter((answer) => answer.body.duplicate !== true)).toHaveLength(1)
    expect(answers.filter((answer) => answer.body.duplicate === true)).toHaveLength(7)

    await stack.platform.waitForCalls('/v1/messages', 1)
    await stack.server.switchboard.idle()
    const sessions = await stack.sessionsOf(integrationId, 'c-2')
    expect(sessions).toHaveLength(1)
    expect(await messagesOf(stack, String(sessions[0]?.id))).toHaveLength(2)
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(1)
  })

  it.each([
    ['message_id', (id: string) => ({ extra: { message_id: id }, headers: {} })],
    ['webhook-id', (id: string) => ({ extra: {}, headers: { 'webhook-id': id } })],
  ])('repeats of a %s after a close are duplicates: no new session', async (_key, delivery) => {
    const { stack, agentId, integrationId } = await setUp()
    stack.model.script(agentId, reply('Hello there'))
    const { extra, headers } = delivery('msg-4')
    expect(await stack.message(integrationId, 'c-4', 'hi', extra, { headers })).toEqual({
      status: 200,
      body: { ok: true },
    })
    await stack.platform.waitForCalls('/v1/messages', 1)
    const closing = { hook_type: 'close_dialog', client_id: 'c-4' }
    expect((await stack.webhook(integrationId, closing)).body).toEqual({ ok: true })

    // The platform retries the delivery it sent before the close: the key is the integration's,
    // not the session's, so the retry neither opens a new session nor gets a second answer.
    expect(await stack.message(integrationId, 'c-4', 'hi', extra, { headers })).toEqual({
      status: 200,
      body: { ok: true, duplicate: true },
    })
    await stack.server.switchboard.idle()
    const sessions = await stack.sessionsOf(integrationId, 'c-4')
    expect(sessions.map((session) => session.state)).toEqual(['closed'])
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(1)
  })

  it('prefers webhook-id: the same message_id under two deliveries of different ids is stored twice', async () => {
    const { stack, agentId, integrationId } = await setUp()
    stack.model.script(agentId, reply('one'), reply('two'))
    const extra = { message_id: 'same' }
    await stack.message(integrationId, 'c-3', 'hi', extra, { headers: { 'webhook-id': 'delivery-a' } })
    const second = await stack.message(integrationId, 'c-3', 'hi again', extra, {
      headers: { 'webhook-id': 'delivery-b' },
    })
    expect(second.body).toEqual({ ok: true })
    await stack.platform.waitForCalls('/v1/messages', 2)
  })
})

describe('idempotency of status hooks', () => {
  /** A human entry agent: the customer's message opens a session and no model is asked. */
  async function withOpenSession(clientId: string) {
    const { stack, integrationId } = await setUp()
    const frontDesk = await stack.createAgent({ name: 'Front desk', kind: 'human' })
    const humanIntegrationId = await stack.createIntegration(frontDesk)
    expect((await stack.message(humanIntegrationId, clientId, 'hi')).status).toBe(200)
    const [session] = await stack.sessionsOf(humanIntegrationId, clientId)
    return {
      stack,
      otherIntegrationId: integrationId,
      integrationId: humanIntegrationId,
      sessionId: String(session?.id),
    }
  }

  async function logsOf(stack: Stack, integrationId: string) {
    const listed = await stack.api('GET', `/api/integrations/${integrationId}/webhook-logs`)
    return listed.body.logs as { outcome: string; reason?: string; sessionId?: string }[]
  }

  it('records a dialog_transferred repeated under one webhook-id once', async () => {
    const { stack, integrationId, sessionId } = await withOpenSession('c-t')
    const hook = { hook_type: 'dialog_transferred', client_id: 'c-t', operator_id: 4 }
    const headers = { 'webhook-id': 'status-1' }
    expect(await stack.webhook(integrationId, hook, { headers })).toEqual({ status: 200, body: { ok: true } })
    expect(await stack.webhook(integrationId, hook, { headers })).toEqual({
      status: 200,
      body: { ok: true, duplicate: true },
    })

    const context = await stack.api('GET', `/api/sessions/${sessionId}/context`)
    const steps = (context.body.sharedContext.journey as { step: string }[]).map((entry) => entry.step)
    expect(steps.filter((step) => /transferred .*operator 4/.test(step))).toHaveLength(1)
    const [repeated, processed] = await logsOf(stack, integrationId)
    expect(repeated).toMatchObject({ outcome: 'duplicate', httpStatus: 200, reason: 'repeated webhook-id' })
    expect(processed).toMatchObject({ outcome: 'session_transfer_external', sessionId })
  })

  it('answers a close repeated under one webhook-id as a duplicate, not as ignored', async () => {
    const { stack, integrationId, sessionId } = await withOpenSession('c-c')
    const hook = { hook_type: 'close_dialog', client_id: 'c-c' }
    const headers = { 'webhook-id': 'status-2' }
    expect(await stack.webhook(integrationId, hook, { headers })).toEqual({ status: 200, body: { ok: true } })
    expect(await stack.webhook(integrationId, hook, { headers })).toEqual({
      status: 200,
      body: { ok: true, duplicate: true },
    })
    const [repeated, processed] = await logsOf(stack, integrationId)
    expect(repeated).toMatchObject({ outcome: 'duplicate', httpStatus: 200, reason: 'repeated webhook-id' })
    expect(processed).toMatchObject({ outcome: 'session_close', sessionId })
  })

  it('processes a status hook without webhook-id every time it comes', async () => {
    const { stack, integrationId } = await withOpenSession('c-n')
    const hook = { hook_type: 'close_request', client_id: 'c-n' }
    expect(await stack.webhook(integrationId, hook)).toEqual({ status: 200, body: { ok: true } })
    expect(await stack.webhook(integrationId, hook)).toEqual({
      status: 200,
      body: { ok: true, ignored: 'no open session' },
    })
  })

  it('keeps the webhook-ids of each integration apart', async () => {
    const { stack, integrationId, otherIntegrationId } = await withOpenSession('c-i')
    const headers = { 'webhook-id': 'status-3' }
    const answers = [
      await stack.webhook(integrationId, { hook_type: 'close_dialog', client_id: 'c-i' }, { headers }),
      await stack.webhook(otherIntegrationId, { hook_type: 'close_dialog', client_id: 'c-i' }, { headers }),
    ]
    expect(answers).toEqual([
      { status: 200, body: { ok: true } },
      { status: 200, body: { ok: true, ignored: 'no open session' } },
    ])
  })
})

describe('ordering under load', () => {
  it('stores 50 concurrent webhooks of one customer and answers them one at a time, in arrival order', async () => {
    const { stack, agentId, integrationId } = await setUp()
    const count = 50
    stack.model.script(agentId, ...Array.from({ length: count }, (_, index) => reply(`answer ${index + 1}`)))
    const answers = await Promise.all(
      Array.from({ length: count }, (_, index) =>
        stack.message(integrationId, 'busy', `question ${index + 1}`, { message_id: `q-${index + 1}` }),
      ),
    )
    expect(answers.map((answer) => answer.status)).toEqual(Array(count).fill(200))

    await stack.platform.waitForCalls('/v1/messages', count, 15_000)
    await stack.server.switchboard.idle()
    const sessions = await stack.sessionsOf(integrationId, 'busy')
    expect(sessions).toHaveLength(1)
    const stored = await messagesOf(stack, String(sessions[0]?.id))
    const arrival = stored.filter((message) => message.role === 'customer').map((message) => message.text)
    expect(new Set(arrival).size).toBe(count)
    // Each turn answered the next customer message in the order they were stored.
    expect(answeredTexts(stack, agentId)).toEqual(arrival)
    // Every reply reached the platform once, in the order the turns wrote them: a session's
    // outbox lets a reply go only after the one before it.
    const delivered = stack.platform
      .callsTo('/v1/messages')
      .map((call) => (call.body as { text: string }).text)
    expect(delivered).toEqual(Array.from({ length: count }, (_, index) => `answer ${index + 1}`))
    const replies = stored.filter((message) => message.role === 'agent')
    expect(replies.map((message) => message.delivery)).toEqual(Array(count).fill('sent'))
  })
})

describe('signed bodies that cannot be used', () => {
  it.each([
    ['not JSON', '{"text": "hi", oops', 'body is not JSON'],
    ['a JSON array', '[1,2,3]', 'body is not a JSON object'],
    ['JSON null', 'null', 'body is not a JSON object'],
    [
      'missing fields',
      JSON.stringify({ text: 'hi', client_id: 'c' }),
      'missing or invalid fields: channel_id, transport',
    ],
    [
      'a number as client_id',
      JSON.stringify({ text: 'hi', client_id: 7, channel_id: 'x', transport: 't' }),
      'missing or invalid fields: client_id',
    ],
    [
      'empty text',
      JSON.stringify({ text: '  ', client_id: 'c', channel_id: 'x', transport: 't' }),
      'text is empty',
    ],
    [
      'another hook_type',
      JSON.stringify({ hook_type: 'typing', client_id: 'c' }),
      'unsupported hook_type "typing"',
    ],
    [
      'a status hook without client_id',
      JSON.stringify({ hook_type: 'close_dialog' }),
      'missing or invalid fields: client_id',
    ],
  ])('answers 200 ignored for %s', async (_name, raw, reason) => {
    const { stack, integrationId } = await setUp()
    expect(await stack.webhook(integrationId, raw)).toEqual({
      status: 200,
      body: { ok: true, ignored: reason },
    })
  })
})

describe('the webhook log', () => {
  it('lists every outcome, newest first, with session and message ids', async () => {
    const { stack, agentId, integrationId } = await setUp()
    stack.model.script(agentId, reply('Hi!'))
    await stack.message(integrationId, 'c-log', 'first', { message_id: 'log-1' })
    await stack.platform.waitForCalls('/v1/messages', 1)
    await stack.server.switchboard.idle()
    await stack.message(integrationId, 'c-log', 'first', { message_id: 'log-1' })
    await stack.webhook(integrationId, 'not json')
    const [session] = await stack.sessionsOf(integrationId, 'c-log')
    await stack.api('POST', `/api/sessions/${session?.id}/pause`, { reason: 'operator looks' })
    await stack.message(integrationId, 'c-log', 'are you there?')
    await stack.webhook(integrationId, {
      hook_type: 'dialog_transferred',
      client_id: 'c-log',
      operator_id: 9,
    })
    await stack.webhook(integrationId, { hook_type: 'close_dialog', client_id: 'c-log' })
    await stack.webhook(integrationId, { hook_type: 'close_request', client_id: 'c-log' })
    await stack.message(integrationId, 'c-log', 'unsigned', {}, { unsigned: true })

    const logs = await stack.api('GET', `/api/integrations/${integrationId}/webhook-logs`)
    expect(logs.status).toBe(200)
    const sessionId = session?.id
    expect(logs.body.logs).toEqual([
      expect.objectContaining({ outcome: 'rejected', httpStatus: 401 }),
      expect.objectContaining({ outcome: 'ignored', httpStatus: 200, reason: 'no open session' }),
      expect.objectContaining({ outcome: 'session_close', httpStatus: 200, sessionId }),
      expect.objectContaining({ outcome: 'session_transfer_external', httpStatus: 200, sessionId }),
      expect.objectContaining({
        outcome: 'stored_paused',
        httpStatus: 200,
        reason: 'session paused',
        sessionId,
        messageId: expect.any(String),
      }),
      expect.objectContaining({ outcome: 'ignored', httpStatus: 200, reason: 'body is not JSON' }),
      expect.objectContaining({ outcome: 'duplicate', httpStatus: 200, sessionId }),
      expect.objectContaining({
        outcome: 'queued',
        httpStatus: 200,
        sessionId,
        messageId: expect.any(String),
        receivedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      }),
    ])
    const [duplicate, queued] = [logs.body.logs[6], logs.body.logs[7]]
    expect(duplicate.messageId).toBe(queued.messageId)
  })
})
