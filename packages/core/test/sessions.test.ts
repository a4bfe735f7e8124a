import { afterEach, describe, expect, it } from 'vitest'
import { type ConversationHarness, createConversationHarness, reply, toolCall } from '../src/testing/index.js'
import { lookupWithOperator } from './support/lookup-with-operator.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

describe('operators and the session lifecycle', () => {
  it('stores 100 messages to a paused session without a single model call, then resumes with the same agent', async () => {
    harness = await createConversationHarness({
      agents: { reception: { handoff: { enabled: true, allowedTargets: ['sales'] } }, sales: {} },
      entry: 'reception',
    })
    harness.model.script(
      harness.agent('reception'),
      toolCall('handoff_to_agent', { targetAgentId: harness.agent('sales') }),
    )
    harness.model.script(harness.agent('sales'), reply('sales here'))
    const customer = harness.customer()
    await customer.says('hello')
    const { id: sessionId } = await customer.session()
    const target = { companyId: harness.companyId, sessionId }

    const paused = await harness.switchboard.sessions.pause({ ...target, reason: 'operator takes over' })
    expect(paused._unsafeUnwrap()).toMatchObject({
      state: 'paused',
      pauseState: { reason: 'operator takes over' },
    })
    for (let index = 0; index < 100; index += 1) await customer.says(`message ${index}`)
    expect(harness.model.requests).toHaveLength(2)
    expect((await customer.messages()).filter((message) => message.role === 'customer')).toHaveLength(101)

    const resumed = await harness.switchboard.sessions.resume({ ...target, note: 'refund approved' })
    expect(resumed._unsafeUnwrap()).toMatchObject({ state: 'ongoing', activeAgentId: harness.agent('sales') })
    expect(resumed._unsafeUnwrap()).not.toHaveProperty('pauseState')
    expect((await customer.session()).metadata.sharedContext.journey.at(-1)?.step).toBe(
      'Operator note: refund approved',
    )

    // Resuming answers nothing by itself; the next message is answered by the same agent, with
    // the messages that arrived meanwhile in its history.
    await harness.switchboard.idle()
    expect(harness.model.requests).toHaveLength(2)
    harness.model.script(harness.agent('sales'), reply('back'))
    await customer.says('anyone?')
    const last = harness.model.requests.at(-1)!
    expect(last.agentId).toBe(harness.agent('sales'))
    expect(last.messages.at(-2)).toEqual({ role: 'user', content: 'message 99' })
    expect(last.messages[0]?.content).toContain('- 2026-01-01T00:00:00.000Z Operator note: refund approved')
  })

  it('answers INVALID_STATE for transitions the state table lacks', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi'))
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
    const sessions = harness.switchboard.sessions
    expect((await sessions.resume(target))._unsafeUnwrapErr().code).toBe('INVALID_STATE')
    expect((await sessions.pause(target)).isOk()).toBe(true)
    expect((await sessions.pause(target))._unsafeUnwrapErr().code).toBe('INVALID_STATE')
    expect((await sessions.close(target)).isOk()).toBe(true)
    expect((await sessions.close(target))._unsafeUnwrapErr().code).toBe('INVALID_STATE')
    expect((await sessions.resume(target))._unsafeUnwrapErr().code).toBe('INVALID_STATE')
    expect(
      (await sessions.reassign({ ...target, agentId: harness.agent('solo') }))._unsafeUnwrapErr().code,
    ).toBe('INVALID_STATE')
    expect((await sessions.sendOperatorMessage({ ...target, text: 'hi' }))._unsafeUnwrapErr().code).toBe(
      'INVALID_STATE',
    )
    expect((await sessions.pause({ ...target, companyId: 999 }))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
  })

  it('opens a new session after a close; the closed one is never reused', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('one'), reply('two'))
    const customer = harness.customer()
    const first = await customer.says('hello')
    await harness.switchboard.sessions.close({ companyId: harness.companyId, sessionId: first.session.id })
    const second = await customer.says('hello again')
    expect(second.session.id).not.toBe(first.session.id)
    expect(second.session.metadata.agentPath).toEqual([expect.objectContaining({ via: 'initial' })])
    expect((await harness.storage.sessions.get({ id: first.session.id }))?.state).toBe('closed')
  })

  it('blocks the replies of a turn when someone else pauses mid-turn', async () => {
    const lookup = lookupWithOperator()
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', tools: [lookup.tool] })
    harness.model.script(harness.agent('solo'), toolCall('slow_lookup', {}), reply('Here is what I found.'))
    const customer = harness.customer()
    lookup.whileLooking(async () => {
      const session = await customer.session()
      await harness.switchboard.sessions.pause({ companyId: harness.companyId, sessionId: session.id })
    })
    await customer.says('look it up')
    expect(customer.received()).toEqual([])
    const messages = await customer.messages()
    expect(messages.map((message) => [message.role, message.delivery])).toEqual([
      ['customer', undefined],
      ['agent', 'blocked'],
    ])
    expect((await customer.session()).state).toBe('paused')
  })

  // CONTRACT §8: a pause made while an agent is mid-turn blocks that turn's replies, even when
  // the operator resumed before the turn ended; the next message is answered as usual.
  it('blocks the replies of a turn paused and resumed by someone else mid-turn', async () => {
    const lookup = lookupWithOperator()
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', tools: [lookup.tool] })
    const solo = harness.agent('solo')
    harness.model.script(
      solo,
      toolCall('slow_lookup', {}),
      reply('Here is what I found.'),
      reply('Hello again.'),
    )
    const customer = harness.customer()
    lookup.whileLooking(async () => {
      lookup.whileLooking(async () => undefined)
      const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
      await harness.switchboard.sessions.pause(target)
      await harness.switchboard.sessions.resume(target)
    })
    await customer.says('look it up')
    expect(customer.received()).toEqual([])
    expect((await customer.session()).state).toBe('ongoing')

    await customer.says('are you there?')

    expect(customer.replies()).toEqual(['Hello again.'])
    const messages = await customer.messages()
    expect(messages.map((message) => [message.role, message.delivery])).toEqual([
      ['customer', undefined],
      ['agent', 'blocked'],
      ['customer', undefined],
      ['agent', 'sent'],
    ])
  })

  // The pause mid-turn reads the same instant as one before the turn (the harness's clock stands
  // still; in production, two pauses in one millisecond): its reply is blocked all the same.
  it('blocks the replies of a turn paused and resumed mid-turn at the instant of an earlier pause', async () => {
    const lookup = lookupWithOperator()
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', tools: [lookup.tool] })
    harness.model.script(
      harness.agent('solo'),
      reply('Hello.'),
      toolCall('slow_lookup', {}),
      reply('Here is what I found.'),
    )
    const customer = harness.customer()
    await customer.says('hi')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
    await harness.switchboard.sessions.pause(target)
    await harness.switchboard.sessions.resume(target)
    lookup.whileLooking(async () => {
      lookup.whileLooking(async () => undefined)
      await harness.switchboard.sessions.pause(target)
      await harness.switchboard.sessions.resume(target)
    })

    await customer.says('look it up')

    expect(customer.replies()).toEqual(['Hello.'])
    expect((await customer.messages()).at(-1)).toMatchObject({ role: 'agent', delivery: 'blocked' })
  })

  it('reassigns manually, recording a manual path entry; a human agent pauses and transfers', async () => {
    harness = await createConversationHarness({
      agents: { solo: {}, billing: {}, humans: { kind: 'human' } },
      entry: 'solo',
      humanTransfer: true,
    })
    harness.model.script(harness.agent('solo'), reply('hi'))
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }

    const unknown = await harness.switchboard.sessions.reassign({ ...target, agentId: 4242 })
    expect(unknown._unsafeUnwrapErr().code).toBe('VALIDATION_ERROR')

    const moved = (
      await harness.switchboard.sessions.reassign({ ...target, agentId: harness.agent('billing') })
    )._unsafeUnwrap()
    expect(moved.activeAgentId).toBe(harness.agent('billing'))
    expect(moved.metadata.agentPath.at(-1)).toMatchObject({ via: 'manual', agentName: 'billing' })

    const human = (
      await harness.switchboard.sessions.reassign({
        ...target,
        agentId: harness.agent('humans'),
        operatorId: 12,
      })
    )._unsafeUnwrap()
    expect(human.state).toBe('paused')
    expect(harness.connector.transfers).toEqual([
      expect.objectContaining({ sessionId: target.sessionId, operatorId: 12, systemMessage: true }),
    ])
  })

  // The operator's reassign lands mid-turn and ends on the agent the turn started with: the
  // turn's handoff must not overrule it.
  it('keeps the agent an operator reassigned to mid-turn, even the one the turn started with', async () => {
    const lookup = lookupWithOperator()
    harness = await createConversationHarness({
      agents: {
        reception: { handoff: { enabled: true, allowedTargets: ['sales'] } },
        billing: {},
        sales: {},
      },
      entry: 'reception',
      tools: [lookup.tool],
    })
    harness.model.script(
      harness.agent('reception'),
      toolCall('slow_lookup', {}),
      toolCall('handoff_to_agent', { targetAgentId: harness.agent('sales') }),
    )
    harness.model.script(harness.agent('sales'), reply('Sales here.'))
    const customer = harness.customer()
    lookup.whileLooking(async () => {
      const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
      await harness.switchboard.sessions.reassign({ ...target, agentId: harness.agent('billing') })
      await harness.switchboard.sessions.reassign({ ...target, agentId: harness.agent('reception') })
    })

    await customer.says('I want to buy')

    expect(await customer.activeAgent()).toBe('reception')
    expect(
      (await customer.session()).metadata.agentPath.map((entry) => [entry.agentName, entry.via]),
    ).toEqual([
      ['reception', 'initial'],
      ['billing', 'manual'],
      ['reception', 'manual'],
    ])
  })

  it("hands the conversation of a deleted agent to the integration's entry agent, which answers", async () => {
    harness = await createConversationHarness({ agents: { solo: {}, billing: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi'), reply('solo again'))
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
    await harness.switchboard.sessions.reassign({ ...target, agentId: harness.agent('billing') })
    expect(
      await harness.storage.agents.delete({ companyId: harness.companyId, id: harness.agent('billing') }),
    ).toBe(true)

    const received = await customer.sends('are you there?')

    expect(received.queued).toBe(true)
    await harness.switchboard.idle()
    expect(customer.replies()).toEqual(['hi', 'solo again'])
    const session = await customer.session()
    expect(session.activeAgentId).toBe(harness.agent('solo'))
    expect(session.metadata.agentPath.at(-1)).toMatchObject({
      agentName: 'solo',
      via: 'manual',
      reason: `agent ${harness.agent('billing')} was deleted`,
    })
  })

  it('blocks the replies still waiting to be sent when a reassign to a human pauses the session', async () => {
    harness = await createConversationHarness({
      agents: { solo: {}, humans: { kind: 'human' } },
      entry: 'solo',
      humanTransfer: true,
    })
    harness.model.script(harness.agent('solo'), reply('hi'))
    harness.connector.failNextSends(1)
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }

    const paused = await harness.switchboard.sessions.reassign({
      ...target,
      agentId: harness.agent('humans'),
    })

    expect(paused._unsafeUnwrap().state).toBe('paused')
    await harness.clock.advance(60_000)
    await harness.switchboard.idle()
    expect(customer.replies()).toEqual([])
    const [, agentReply] = await customer.messages()
    expect(agentReply?.delivery).toBe('blocked')
  })

  it('sends an operator message through the channel, also while paused', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi'))
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
    await harness.switchboard.sessions.pause(target)
    const message = (
      await harness.switchboard.sessions.sendOperatorMessage({ ...target, text: 'A human here.' })
    )._unsafeUnwrap()
    expect(message.role).toBe('operator')
    await harness.switchboard.idle()
    expect(customer.received().at(-1)).toMatchObject({ role: 'operator', text: 'A human here.' })
    expect((await harness.storage.messages.get({ id: message.id }))?.delivery).toBe('sent')
  })

  it('records the platform moving a dialog as a journey step, leaving the state alone', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi'))
    const customer = harness.customer()
    await customer.says('hello')
    const target = { companyId: harness.companyId, sessionId: (await customer.session()).id }
    await harness.switchboard.sessions.pause(target)
    const session = (
      await harness.switchboard.sessions.recordExternalTransfer({
        ...target,
        step: 'Transferred to operator 5',
      })
    )._unsafeUnwrap()
    expect(session.state).toBe('paused')
    expect(session.metadata.sharedContext.journey.at(-1)?.step).toBe('Transferred to operator 5')
  })
})
