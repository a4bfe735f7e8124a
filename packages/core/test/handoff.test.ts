import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  type ConversationHarness,
  createConversationHarness,
  type HarnessAgent,
  handoff,
  reply,
  toolCall,
} from '../src/testing/index.js'
import { humanTeam } from './support/human-team.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

async function team(agents: Record<string, HarnessAgent>, options: { humanTransfer?: boolean } = {}) {
  harness = await createConversationHarness({ agents, entry: 'reception', ...options })
  return harness
}

const systemPromptOf = (agentKey: string, index = 0) =>
  harness.model.requestsFor(harness.agent(agentKey), 'turn')[index]?.messages[0]?.content ?? ''

describe('handoff_to_agent', () => {
  it('transfers to an allowed target, which answers the same message with the SCC in its prompt', async () => {
    await team({
      reception: {
        handoff: {
          enabled: true,
          allowedTargets: ['sales'],
          handoffMessageTemplate: 'Connecting you to sales…',
        },
      },
      sales: { systemPrompt: 'You sell.' },
    })
    const reception = harness.agent('reception')
    const sales = harness.agent('sales')
    harness.model.script(
      reception,
      toolCall('save_fact', { key: 'customer_name', value: 'Ann' }),
      toolCall('append_journey', { step: 'asked about pricing' }),
      handoff(sales, 'pricing question'),
    )
    harness.model.script(sales, reply('Hi Ann, the pro plan is 20 USD.'))
    const changes: unknown[] = []
    harness.switchboard.events.on('agent-changed', (event) => changes.push(event))
    const customer = harness.customer()

    await customer.says('Hi, I am Ann. What does pro cost?')

    expect(await customer.activeAgent()).toBe('sales')
    expect(changes).toEqual([
      expect.objectContaining({ fromAgentId: reception, toAgentId: sales, via: 'handoff_tool' }),
    ])
    expect(customer.received().map((sent) => [sent.role, sent.text])).toEqual([
      ['system', 'Connecting you to sales…'],
      ['agent', 'Hi Ann, the pro plan is 20 USD.'],
    ])
    const session = await customer.session()
    expect(session.metadata.sharedContext.facts).toEqual({ customer_name: 'Ann' })
    expect(session.metadata.sharedContext.journey).toEqual([
      { step: 'asked about pricing', at: harness.clock.now().toISOString() },
    ])
    expect(session.metadata.agentPath.at(-1)).toMatchObject({
      agentId: sales,
      via: 'handoff_tool',
      reason: 'pricing question',
    })
    const prompt = systemPromptOf('sales')
    expect(prompt).toContain('You sell.')
    expect(prompt).toContain('## Shared context\ncustomer_name: Ann')
    expect(prompt).toContain(`- ${harness.clock.now().toISOString()} asked about pricing`)
    // The receiving agent answers the same customer message, without the caller's tool traffic.
    const salesMessages = harness.model.requestsFor(sales, 'turn')[0]!.messages
    expect(salesMessages.at(-1)).toEqual({ role: 'user', content: 'Hi, I am Ann. What does pro cost?' })
    expect(salesMessages.some((message) => message.role === 'tool')).toBe(false)
  })

  it('rejects a target outside allowedTargets: the caller keeps the turn and learns why', async () => {
    await team({
      reception: { handoff: { enabled: true, allowedTargets: ['sales'] } },
      sales: {},
      finance: {},
    })
    const reception = harness.agent('reception')
    harness.model.script(reception, handoff(harness.agent('finance')), reply('I can help you myself.'))
    const rejected: unknown[] = []
    harness.switchboard.events.on('handoff-rejected', (event) => rejected.push(event))
    const recorded: unknown[] = []
    harness.switchboard.events.on('session-error-recorded', (event) => recorded.push(event))
    const customer = harness.customer()

    await customer.says('refund?')

    expect(await customer.activeAgent()).toBe('reception')
    expect(customer.replies()).toEqual(['I can help you myself.'])
    const session = await customer.session()
    expect(session.metadata.errors).toEqual([
      expect.objectContaining({ code: 'HANDOFF_NOT_ALLOWED', agentId: reception }),
    ])
    expect(session.metadata.agentPath).toHaveLength(1)
    const second = harness.model.requestsFor(reception, 'turn')[1]!.messages
    expect(second.at(-1)).toMatchObject({
      role: 'tool',
      content: expect.stringContaining('not in allowedTargets'),
    })
    expect(rejected).toHaveLength(1)
    expect(recorded).toEqual([
      expect.objectContaining({ error: expect.objectContaining({ code: 'HANDOFF_NOT_ALLOWED' }) }),
    ])
  })

  it('rejects every handoff while handoff is disabled (the default)', async () => {
    await team({ reception: {}, sales: {} })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('sales')), reply('staying'))
    const customer = harness.customer()
    await customer.says('hi')
    expect(await customer.activeAgent()).toBe('reception')
    expect((await customer.session()).metadata.errors[0]?.code).toBe('HANDOFF_NOT_ALLOWED')
  })

  it.each([
    ['announce on with a template', true, 'One moment, please.', ['One moment, please.']],
    ['announce off', false, 'One moment, please.', []],
    ['an empty template', true, '', []],
  ])('%s', async (_name, announceHandoff, handoffMessageTemplate, expected) => {
    await team({
      reception: {
        handoff: { enabled: true, allowedTargets: ['sales'], announceHandoff, handoffMessageTemplate },
      },
      sales: {},
    })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('sales')))
    harness.model.script(harness.agent('sales'), reply('sales here'))
    const customer = harness.customer()
    await customer.says('hi')
    expect(
      customer
        .received()
        .filter((sent) => sent.role === 'system')
        .map((sent) => sent.text),
    ).toEqual(expected)
    expect(customer.replies()).toEqual(['sales here'])
  })

  it.each([5, 50])('gives the receiving agent the caller history window of %i', async (depth) => {
    await team({
      reception: { handoff: { enabled: true, allowedTargets: ['sales'], messageHistoryDepth: depth } },
      sales: { handoff: { messageHistoryDepth: 5 } },
    })
    const reception = harness.agent('reception')
    const customer = harness.customer()
    for (let index = 0; index < 30; index += 1) {
      harness.model.script(reception, reply(`answer ${index}`))
      await customer.says(`question ${index}`)
    }
    harness.model.script(reception, handoff(harness.agent('sales')))
    harness.model.script(harness.agent('sales'), reply('sales'))
    await customer.says('the current message')

    const [salesRequest] = harness.model.requestsFor(harness.agent('sales'), 'turn')
    const history = salesRequest!.messages.slice(1, -1)
    expect(history).toHaveLength(Math.min(depth, 60))
    expect(history.at(-1)).toEqual({ role: 'assistant', content: 'answer 29' })
    expect(salesRequest!.messages.at(-1)).toEqual({ role: 'user', content: 'the current message' })
    // An ordinary turn of the caller uses its own window too, the current message not counted.
    const lastReceptionTurn = harness.model.requestsFor(reception, 'turn').at(-1)!
    expect(lastReceptionTurn.messages.slice(1, -1)).toHaveLength(Math.min(depth, 60))
  })

  it('allows at most 5 handoffs per customer message; the 6th is rejected', async () => {
    const names = ['reception', 'b', 'c', 'd', 'e', 'f', 'g']
    const agents: Record<string, HarnessAgent> = {}
    for (const [index, name] of names.entries()) {
      agents[name] = { handoff: { enabled: true, allowedTargets: [names[index + 1] ?? 'reception'] } }
    }
    await team(agents)
    for (const [index, name] of names.slice(0, 5).entries()) {
      harness.model.script(harness.agent(name), handoff(harness.agent(names[index + 1]!)))
    }
    harness.model.script(harness.agent('f'), handoff(harness.agent('g')), reply('f answers'))
    const customer = harness.customer()
    await customer.says('pass it on')
    expect(await customer.activeAgent()).toBe('f')
    expect(customer.replies()).toEqual(['f answers'])
    const session = await customer.session()
    expect(session.metadata.agentPath.filter((entry) => entry.via === 'handoff_tool')).toHaveLength(5)
    expect(session.metadata.errors.map((error) => error.code)).toEqual(['HANDOFF_NOT_ALLOWED'])
  })
})

describe('transfer to a human', () => {
  it('announces, then transfers and pauses; the human agent is active', async () => {
    await team(humanTeam, { humanTransfer: true })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    const customer = harness.customer()
    await customer.says('I want to talk to a person')

    const session = await customer.session()
    expect(session.state).toBe('paused')
    expect(session.pauseState?.pausedAt).toBeDefined()
    expect(await customer.activeAgent()).toBe('humans')
    expect(customer.received().map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    expect(harness.connector.transfers).toEqual([
      { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 1 },
    ])

    // While a human is active and the session paused, nothing answers.
    await customer.says('hello?')
    expect(harness.model.requests).toHaveLength(1)
  })

  it('announces after the reply before it, still being sent, and only then transfers', async () => {
    await team(humanTeam, { humanTransfer: true })
    harness.model.script(
      harness.agent('reception'),
      reply('Let me see.'),
      handoff(harness.agent('humans'), 'wants a person'),
    )
    // The channel takes its time over the first reply, long enough for the next turn to commit.
    const recording = harness.connector
    let startedSending: () => void = () => {}
    const sending = new Promise<void>((resolve) => {
      startedSending = resolve
    })
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    let first = true
    // Wrapped in place: a second connector of the harness's type would be refused.
    const send = recording.send.bind(recording)
    recording.send = async (request) => {
      if (first) {
        first = false
        startedSending()
        await released
      }
      return send(request)
    }
    const customer = harness.customer()
    await customer.sends('hello')
    await sending
    await customer.sends('I want to talk to a person')
    await expect.poll(async () => (await customer.session()).state).toBe('paused')
    release()
    await harness.switchboard.idle()

    expect(customer.received().map((sent) => sent.text)).toEqual([
      'Let me see.',
      'A colleague will take over.',
    ])
    const session = await customer.session()
    expect(harness.connector.transfers).toEqual([
      { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 2 },
    ])
  })

  it('blocks a reply still waiting for its retry, and announces before the transfer all the same', async () => {
    await team(humanTeam, { humanTransfer: true })
    harness.model.script(
      harness.agent('reception'),
      reply('Let me see.'),
      handoff(harness.agent('humans'), 'wants a person'),
    )
    harness.connector.failNextSends(1)
    const customer = harness.customer()
    await customer.says('hello')
    await customer.says('I want to talk to a person')

    const session = await customer.session()
    expect(session.state).toBe('paused')
    expect(customer.received().map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    expect(harness.connector.transfers).toEqual([
      { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 1 },
    ])
    // Paused: the agent's reply that was waiting for its retry never leaves.
    await harness.clock.advance(60_000)
    await harness.switchboard.idle()
    expect(customer.received().map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    const replies = (await customer.messages()).filter((message) => message.role !== 'customer')
    expect(replies.map((message) => [message.text, message.delivery])).toEqual([
      ['Let me see.', 'blocked'],
      ['A colleague will take over.', 'sent'],
    ])
  })

  it('tries a failing announcement again, and transfers only once it was delivered', async () => {
    await team(humanTeam, { humanTransfer: true })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    harness.connector.failNextSends(1)
    const customer = harness.customer()
    await customer.sends('I want to talk to a person')
    // The first try fails; its retry waits a second on the manual clock.
    await vi.waitFor(async () => {
      const [announcement] = (await customer.messages()).filter((message) => message.role === 'system')
      expect(announcement?.delivery).toBe('pending')
      expect((await customer.session()).state).toBe('paused')
    })
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(harness.connector.transfers).toEqual([])
    for (let tick = 0; tick < 20 && harness.connector.transfers.length === 0; tick++) {
      await harness.clock.advance(1_000)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await harness.switchboard.idle()

    const session = await customer.session()
    expect(customer.received().map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    expect(harness.connector.transfers).toEqual([
      { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 1 },
    ])
  })

  // CONTRACT §8: the transfer is called even when the announcement before it cannot be delivered;
  // the transfer waits for it to leave the outbox, as failed, and is made once.
  for (const retryable of [true, false]) {
    it(`transfers once after an announcement that failed for good (${retryable ? 'after its retries' : 'at once'})`, async () => {
      await team(humanTeam, { humanTransfer: true })
      harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
      harness.connector.failNextSends(5, { retryable })
      const customer = harness.customer()
      await customer.sends('I want to talk to a person')
      for (let tick = 0; tick < 120 && harness.connector.transfers.length === 0; tick++) {
        await harness.clock.advance(1_000)
        await new Promise((resolve) => setTimeout(resolve, 3))
      }
      await harness.switchboard.idle()

      const session = await customer.session()
      expect((await customer.messages()).map((message) => message.delivery ?? message.role)).toEqual([
        'customer',
        'failed',
      ])
      expect(harness.connector.transfers).toEqual([
        { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 0 },
      ])
      await harness.clock.advance(120_000)
      await harness.switchboard.idle()
      expect(harness.connector.transfers).toHaveLength(1)
    })
  }

  it('pauses even when the transfer fails, recording why', async () => {
    await team(humanTeam, { humanTransfer: true })
    harness.connector.failNextTransfer('platform answered 503')
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans')))
    const customer = harness.customer()
    await customer.says('person please')
    const session = await customer.session()
    expect(session.state).toBe('paused')
    expect(session.pauseState?.reason).toContain('platform answered 503')
    // Recorded, so not tried again (CONTRACT §6 retries replies, not transfers).
    await harness.clock.advance(120_000)
    await harness.switchboard.idle()
    expect(harness.connector.transfers).toHaveLength(1)
  })

  it('records HUMAN_TRANSFER_UNSUPPORTED on a channel without human transfer; the caller keeps the turn', async () => {
    await team(humanTeam, { humanTransfer: false })
    harness.model.script(
      harness.agent('reception'),
      handoff(harness.agent('humans')),
      reply('I will stay with you.'),
    )
    const customer = harness.customer()
    await customer.says('person please')
    const session = await customer.session()
    expect(session.state).toBe('ongoing')
    expect(await customer.activeAgent()).toBe('reception')
    expect(session.metadata.errors.map((error) => error.code)).toEqual(['HUMAN_TRANSFER_UNSUPPORTED'])
    expect(customer.replies()).toEqual(['I will stay with you.'])
  })
})

describe('the handoff tool as the model sees it', () => {
  const handoffToolOf = (agentKey: string) =>
    harness.model
      .requestsFor(harness.agent(agentKey), 'turn')[0]
      ?.tools?.find((tool) => tool.name === 'handoff_to_agent')

  // A real model knows no agent ids; without them in the tool it can hand off only if the operator
  // wrote the ids into the system prompt.
  it("names the caller's allowed targets by id, with their names and roles", async () => {
    await team({
      reception: { handoff: { enabled: true, allowedTargets: ['sales', 'billing'] } },
      sales: { name: 'Sales', role: 'sells the pro plan' },
      billing: { name: 'Billing' },
    })
    harness.model.script(harness.agent('reception'), reply('Hello!'))
    await harness.customer().says('hi')

    const description = handoffToolOf('reception')?.description ?? ''
    expect(description).toContain(
      `targetAgentId is one of: ${harness.agent('sales')} (Sales, sells the pro plan); ${harness.agent('billing')} (Billing).`,
    )
  })

  it('names a human target only where the channel can transfer to a human', async () => {
    await team(
      {
        reception: { handoff: { enabled: true, allowedTargets: ['sales', 'desk'] } },
        sales: { name: 'Sales' },
        desk: { name: 'Desk', kind: 'human' },
      },
      { humanTransfer: true },
    )
    harness.model.script(harness.agent('reception'), reply('Hello!'))
    await harness.customer().says('hi')
    expect(handoffToolOf('reception')?.description).toContain(
      `targetAgentId is one of: ${harness.agent('sales')} (Sales); ${harness.agent('desk')} (Desk, a human operator).`,
    )
    await harness.finish()

    await team(
      {
        reception: { handoff: { enabled: true, allowedTargets: ['sales', 'desk'] } },
        sales: { name: 'Sales' },
        desk: { name: 'Desk', kind: 'human' },
      },
      { humanTransfer: false },
    )
    harness.model.script(harness.agent('reception'), reply('Hello!'))
    await harness.customer().says('hi')
    expect(handoffToolOf('reception')?.description).toContain(
      `targetAgentId is one of: ${harness.agent('sales')} (Sales).`,
    )
  })

  it('names no targets while handoff is off or none is allowed, and the target sees its own', async () => {
    await team({
      reception: { handoff: { enabled: true, allowedTargets: ['sales'] } },
      sales: { name: 'Sales', handoff: { enabled: false, allowedTargets: ['reception'] } },
    })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('sales')))
    harness.model.script(harness.agent('sales'), reply('Sales here.'))
    await harness.customer().says('hi')

    expect(handoffToolOf('reception')?.description).toContain('targetAgentId is one of:')
    const sales = handoffToolOf('sales')
    expect(sales?.description).not.toContain('targetAgentId is one of')
    expect(sales?.description).toMatch(/^Transfer the conversation/)
    expect(sales?.parameters).toEqual(handoffToolOf('reception')?.parameters)
  })
})
