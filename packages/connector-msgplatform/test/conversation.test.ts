import { handoff, reply, route } from '@switchboard/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { eventually, PLATFORM_TOKEN, type Stack, startStack } from './support/start-stack.js'

const stacks: Stack[] = []
afterEach(async () => {
  for (const stack of stacks.splice(0)) {
    await stack.server.switchboard.idle()
    stack.model.assertDone()
    await stack.close()
  }
})

async function open() {
  const stack = await startStack()
  stacks.push(stack)
  return stack
}

async function sessionOf(stack: Stack, integrationId: string, clientId: string) {
  const [session] = await stack.sessionsOf(integrationId, clientId)
  if (session === undefined) throw new Error(`no session for ${clientId}`)
  return session as { id: string; state: string }
}

async function statusOf(stack: Stack, sessionId: string) {
  return (await stack.api('GET', `/api/sessions/${sessionId}`)).body
}

describe('a conversation over msgplatform', () => {
  it('answers a signed webhook through the agent, on the channel and transport it came from', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.model.script(helper, reply('Hi Alice, how can I help?'))

    const received = await stack.message(integrationId, 'alice', 'hello', { message_id: 'p-1' }, {})
    expect(received).toEqual({ status: 200, body: { ok: true } })

    const [sent] = await stack.platform.waitForCalls('/v1/messages', 1)
    expect(sent?.method).toBe('POST')
    expect(sent?.headers.authorization).toBe(PLATFORM_TOKEN)
    expect(sent?.headers['content-type']).toMatch(/^application\/json/)
    expect(sent?.body).toEqual({
      client_id: 'alice',
      channel_id: 'channel-alice',
      transport: 'telegram',
      text: 'Hi Alice, how can I help?',
      type: 'to_client',
    })
    const session = await sessionOf(stack, integrationId, 'alice')
    await eventually(
      () => stack.api('GET', `/api/sessions/${session.id}/messages`),
      (answer) => answer.body.messages.at(-1)?.delivery === 'sent',
    )
    expect(await statusOf(stack, session.id)).toMatchObject({
      customer: { clientId: 'alice', channelId: 'channel-alice', transport: 'telegram' },
    })
  })

  it('routes on entry, hands off, and shows both in the session context', async () => {
    const stack = await open()
    const refunds = await stack.createAgent({ name: 'Refunds', role: 'support' })
    const billing = await stack.createAgent({
      name: 'Billing',
      handoff: {
        enabled: true,
        allowedTargets: [refunds],
        handoffMessageTemplate: 'Passing you to our refunds team.',
      },
    })
    const reception = await stack.createAgent({
      name: 'Reception',
      routingConfig: {
        enabled: true,
        routes: [{ id: 'billing', agentId: billing, description: 'invoices and payments' }],
      },
    })
    const integrationId = await stack.createIntegration(reception)
    stack.model.script(reception, route('billing', 0.92))
    stack.model.script(billing, handoff(refunds, 'customer wants money back'))
    stack.model.script(refunds, reply('Your refund is on its way.'))

    await stack.message(integrationId, 'bob', 'I was charged twice, I want a refund')

    const calls = await stack.platform.waitForCalls('/v1/messages', 2)
    expect(calls.map((call) => (call.body as { text: string }).text)).toEqual([
      'Passing you to our refunds team.',
      'Your refund is on its way.',
    ])
    const session = await sessionOf(stack, integrationId, 'bob')
    const context = await stack.api('GET', `/api/sessions/${session.id}/context`)
    expect(context.status).toBe(200)
    expect(context.body.routing).toMatchObject({ reason: 'resolved', depth: 1 })
    expect(context.body.agentPath).toEqual([
      expect.objectContaining({ agentId: reception, via: 'initial' }),
      expect.objectContaining({ agentId: billing, via: 'entry_routing', routeId: 'billing', depth: 1 }),
      expect.objectContaining({ agentId: refunds, via: 'handoff_tool', reason: 'customer wants money back' }),
    ])
    expect((await statusOf(stack, session.id)).activeAgentId).toBe(refunds)
  })

  it('closes the session on close_dialog and close_request; the next message opens a new one', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.model.script(helper, reply('first answer'), reply('second answer'), reply('third answer'))

    await stack.message(integrationId, 'carol', 'hello')
    await stack.platform.waitForCalls('/v1/messages', 1)
    const first = await sessionOf(stack, integrationId, 'carol')
    const closed = await stack.webhook(integrationId, {
      hook_type: 'close_dialog',
      client_id: 'carol',
      dialog_id: 'd-1',
    })
    expect(closed).toEqual({ status: 200, body: { ok: true } })
    expect((await statusOf(stack, first.id)).state).toBe('closed')

    await stack.message(integrationId, 'carol', 'me again')
    await stack.platform.waitForCalls('/v1/messages', 2)
    const second = await sessionOf(stack, integrationId, 'carol')
    expect(second.id).not.toBe(first.id)
    expect(second.state).toBe('ongoing')

    expect(await stack.webhook(integrationId, { hook_type: 'close_request', client_id: 'carol' })).toEqual({
      status: 200,
      body: { ok: true },
    })
    expect((await statusOf(stack, second.id)).state).toBe('closed')
    expect(await stack.webhook(integrationId, { hook_type: 'close_dialog', client_id: 'carol' })).toEqual({
      status: 200,
      body: { ok: true, ignored: 'no open session' },
    })

    await stack.message(integrationId, 'carol', 'and again')
    await stack.platform.waitForCalls('/v1/messages', 3)
    expect(await stack.sessionsOf(integrationId, 'carol')).toHaveLength(3)
  })

  it('transfers to a human operator: the platform request id becomes the external reference', async () => {
    const stack = await open()
    const person = await stack.createAgent({
      name: 'Operators',
      kind: 'human',
      handoff: { msgplatform: { targetOperatorId: 7, sendSystemMessage: true } },
    })
    const bot = await stack.createAgent({
      name: 'Bot',
      handoff: {
        enabled: true,
        allowedTargets: [person],
        handoffMessageTemplate: 'A colleague will take over.',
      },
    })
    const integrationId = await stack.createIntegration(bot)
    stack.platform.answer('/v1/dialogs/transfer', 200, { success: true, data: { request_id: 'req-77' } })
    stack.model.script(bot, handoff(person, 'asked for a person'))

    await stack.message(integrationId, 'dave', 'I want to talk to a human')
    const [transfer] = await stack.platform.waitForCalls('/v1/dialogs/transfer', 1)
    expect(transfer?.headers.authorization).toBe(PLATFORM_TOKEN)
    expect(transfer?.body).toEqual({ client_id: 'dave', operator_id: 7, system_message: true })
    // The announcement went out before the transfer call.
    expect(stack.platform.calls.map((call) => call.path)).toEqual(['/v1/messages', '/v1/dialogs/transfer'])

    const session = await sessionOf(stack, integrationId, 'dave')
    const status = await eventually(
      () => stack.api('GET', `/api/sessions/${session.id}/status`),
      (answer) => answer.body.pauseState?.externalReference !== undefined,
    )
    expect(status.body).toMatchObject({
      state: 'paused',
      activeAgentId: person,
      pauseState: { externalReference: 'req-77' },
    })

    // While paused, the customer is heard (stored) but no agent answers.
    expect(await stack.message(integrationId, 'dave', 'hello?')).toEqual({ status: 200, body: { ok: true } })
    const transferred = await stack.webhook(integrationId, {
      hook_type: 'dialog_transferred',
      client_id: 'dave',
      operator_id: 12,
      dialog_id: 'd-9',
    })
    expect(transferred).toEqual({ status: 200, body: { ok: true } })
    const context = await stack.api('GET', `/api/sessions/${session.id}/context`)
    expect(context.body.sharedContext.journey).toEqual([
      expect.objectContaining({ step: expect.stringMatching(/transferred .*operator 12/) }),
    ])
    expect((await statusOf(stack, session.id)).state).toBe('paused')
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(1)
  })

  it('pauses even when the transfer fails, with the failure in pauseState.reason', async () => {
    const stack = await open()
    const person = await stack.createAgent({ name: 'Operators', kind: 'human' })
    const bot = await stack.createAgent({ name: 'Bot' })
    const integrationId = await stack.createIntegration(bot)
    stack.platform.answer('/v1/dialogs/transfer', 500, 'operator queue is down')
    stack.model.script(bot, reply('Let me check.'))

    await stack.message(integrationId, 'erin', 'hi')
    await stack.platform.waitForCalls('/v1/messages', 1)
    const session = await sessionOf(stack, integrationId, 'erin')
    const reassigned = await stack.api('POST', `/api/sessions/${session.id}/reassign`, {
      agentId: person,
      groupId: 3,
    })
    expect(reassigned.status).toBe(200)
    const [transfer] = await stack.platform.waitForCalls('/v1/dialogs/transfer', 1)
    expect(transfer?.body).toEqual({ client_id: 'erin', group_id: 3, system_message: true })
    const status = await stack.api('GET', `/api/sessions/${session.id}/status`)
    expect(status.body.state).toBe('paused')
    expect(status.body.pauseState.reason).toMatch(/msgplatform answered 500: operator queue is down/)
    expect(status.body.pauseState.reason.length).toBeLessThanOrEqual(500)
  })

  // CONTRACT §6: the failure text, cut to 500 chars, goes to pauseState.reason; a long answer
  // from the platform fills it rather than being cut shorter first.
  it('keeps a long failure of the transfer in pauseState.reason up to 500 chars', async () => {
    const stack = await open()
    const person = await stack.createAgent({ name: 'Operators', kind: 'human' })
    const bot = await stack.createAgent({ name: 'Bot' })
    const integrationId = await stack.createIntegration(bot)
    const answer = `operator queue is down: ${'every operator is busy; '.repeat(80)}`
    stack.platform.answer('/v1/dialogs/transfer', 503, answer)
    stack.model.script(bot, reply('Let me check.'))

    await stack.message(integrationId, 'fred', 'hi')
    await stack.platform.waitForCalls('/v1/messages', 1)
    const session = await sessionOf(stack, integrationId, 'fred')
    expect(
      (await stack.api('POST', `/api/sessions/${session.id}/reassign`, { agentId: person })).status,
    ).toBe(200)
    await stack.platform.waitForCalls('/v1/dialogs/transfer', 1)
    const { reason } = (await stack.api('GET', `/api/sessions/${session.id}/status`)).body.pauseState
    const expected = `transfer to a human failed: msgplatform answered 503: ${answer}`.slice(0, 500)
    expect(reason).toBe(expected)
  })

  it('retries a reply the platform refused twice, and delivers it exactly once', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.platform.failNext('/v1/messages', 2, 503)
    stack.model.script(helper, reply('worth the wait'))

    await stack.message(integrationId, 'frank', 'hello')
    // The outbox tries again after 1 s and then 2 s (CONTRACT §6): about 3 s of real time.
    const calls = await stack.platform.waitForCalls('/v1/messages', 3, 8000)
    expect(calls.map((call) => call.status)).toEqual([503, 503, 200])
    expect(stack.platform.acceptedAt('/v1/messages')).toHaveLength(1)
    const session = await sessionOf(stack, integrationId, 'frank')
    const messages = await eventually(
      () => stack.api('GET', `/api/sessions/${session.id}/messages`),
      (answer) => answer.body.messages.at(-1)?.delivery === 'sent',
    )
    expect(messages.body.messages.map((message: { role: string }) => message.role)).toEqual([
      'customer',
      'agent',
    ])
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(3)
  })

  it('answers each message on the channel it came from, even when the customer moved before the reply left', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.platform.failNext('/v1/messages', 1, 503)
    stack.model.script(helper, reply('answer on telegram'), reply('answer on whatsapp'))

    await stack.message(integrationId, 'iris', 'hello from telegram', {
      channel_id: 'tg-chat',
      transport: 'telegram',
    })
    // The first reply failed and waits for its retry when the customer writes from another channel.
    await stack.platform.waitForCalls('/v1/messages', 1)
    await stack.message(integrationId, 'iris', 'hello from whatsapp', {
      channel_id: 'wa-chat',
      transport: 'whatsapp',
    })

    await stack.platform.waitForCalls('/v1/messages', 3, 8000)
    const accepted = stack.platform.acceptedAt('/v1/messages').map((call) => call.body)
    // CONTRACT §6: replies use the channel_id and transport of the message they answer.
    expect(accepted).toEqual([
      expect.objectContaining({ text: 'answer on telegram', channel_id: 'tg-chat', transport: 'telegram' }),
      expect.objectContaining({ text: 'answer on whatsapp', channel_id: 'wa-chat', transport: 'whatsapp' }),
    ])
  })

  it('does not retry a reply the platform rejects with a 4xx: it is failed at once', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.platform.failNext('/v1/messages', 1, 400, '{"error":"unknown client"}')
    stack.model.script(helper, reply('you will not see this'))
    const failures: string[] = []
    stack.server.switchboard.events.on('delivery-failed', (event) => failures.push(event.error))

    await stack.message(integrationId, 'gina', 'hello')
    await stack.platform.waitForCalls('/v1/messages', 1)
    const session = await sessionOf(stack, integrationId, 'gina')
    await eventually(
      () => stack.api('GET', `/api/sessions/${session.id}/messages`),
      (answer) => answer.body.messages.at(-1)?.delivery === 'failed',
    )
    expect(failures).toEqual([expect.stringMatching(/answered 400: .*unknown client/)])
    await new Promise((resolve) => setTimeout(resolve, 1300))
    expect(stack.platform.callsTo('/v1/messages')).toHaveLength(1)
  })

  it('sends an operator message through the platform to the customer channel', async () => {
    const stack = await open()
    const person = await stack.createAgent({ name: 'Operators', kind: 'human' })
    const integrationId = await stack.createIntegration(person)
    await stack.message(integrationId, 'hank', 'hello', {}, {})
    const session = await sessionOf(stack, integrationId, 'hank')
    // Stored for the human, not queued: the log says why, as the session is not paused.
    const logs = await stack.api('GET', `/api/integrations/${integrationId}/webhook-logs`)
    expect(logs.body.logs[0]).toMatchObject({ outcome: 'stored_paused', reason: 'a human agent is active' })
    const sent = await stack.api('POST', `/api/sessions/${session.id}/messages`, {
      text: 'An operator here.',
    })
    expect(sent.status).toBe(201)
    const [call] = await stack.platform.waitForCalls('/v1/messages', 1)
    expect(call?.body).toEqual({
      client_id: 'hank',
      channel_id: 'channel-hank',
      transport: 'telegram',
      text: 'An operator here.',
      type: 'to_client',
    })
  })
})

describe('the status-hooks helper', () => {
  it('registers the webhook URL for the three status events on the platform', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    const answer = await stack.api('POST', `/api/integrations/${integrationId}/status-hooks`)
    expect(answer).toEqual({
      status: 200,
      body: { registered: ['close_dialog', 'close_request', 'dialog_transferred'] },
    })
    const [call] = stack.platform.callsTo('/v1/webhooks')
    expect(call?.headers.authorization).toBe(PLATFORM_TOKEN)
    expect(call?.body).toEqual({
      url: `${stack.server.url}/api/webhook/msgplatform/${integrationId}`,
      events: ['close_dialog', 'close_request', 'dialog_transferred'],
    })
  })

  it('answers 500 with the platform refusal when registration fails', async () => {
    const stack = await open()
    const helper = await stack.createAgent({ name: 'Helper' })
    const integrationId = await stack.createIntegration(helper)
    stack.platform.answer('/v1/webhooks', 403, '{"error":"token lacks scope"}')
    const answer = await stack.api('POST', `/api/integrations/${integrationId}/status-hooks`)
    expect(answer.status).toBe(500)
    expect(answer.body.error.message).toMatch(/answered 403: .*token lacks scope/)
  })
})
