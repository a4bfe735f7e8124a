import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { defineTool } from '../src/index.js'
import {
  type ConversationHarness,
  createConversationHarness,
  fail,
  reply,
  toolCall,
} from '../src/testing/index.js'
import { lookupWithOperator } from './support/lookup-with-operator.js'
import { recordRoundTrips, recordStorageTrips } from './support/round-trips.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

describe('an agent turn', () => {
  /**
   * The storage calls made outside transactions while one customer message is answered: the
   * first of a new session, or, `returning`, the customer's second.
   */
  async function tripsOfOneAnswer(options: { returning?: boolean } = {}): Promise<string[][]> {
    harness = await createConversationHarness({ agents: { support: {} }, entry: 'support' })
    const ann = harness.customer('ann')
    harness.model.script(
      harness.agent('support'),
      ...(options.returning ? [reply('Welcome')] : []),
      reply('Hello'),
    )
    if (options.returning) await ann.says('Before')
    const trips = recordStorageTrips(harness.storage)
    // Not `idle()`, which looks for work itself.
    const delivered = new Promise((resolve) => harness.switchboard.events.once('message-delivered', resolve))
    await ann.sends('Hi')
    await delivered
    // Time for any call the finished turn or delivery would still make.
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(ann.replies().at(-1)).toBe('Hello')
    return trips
  }

  // PostgreSQL text cannot hold U+0000 and UTF-8 cannot hold a lone surrogate; a storage may keep
  // them or write U+FFFD (the conformance suite allows both), so core hands over neither.
  it('stores and sends U+0000 and lone surrogates in any message as U+FFFD, whatever the storage keeps', async () => {
    harness = await createConversationHarness({ agents: { support: {} }, entry: 'support' })
    harness.model.script(harness.agent('support'), reply('x\u0000y\uDC00z\uD83D\uDE00'))
    const ann = harness.customer('ann')

    const received = await ann.sends('a\u0000b\uD800c\uD83D\uDE00')
    await harness.switchboard.idle()
    const { id: sessionId } = await ann.session()
    const sent = await harness.switchboard.sessions.sendOperatorMessage({
      companyId: harness.companyId,
      sessionId,
      text: 'o\uD800\u0000',
    })
    await harness.switchboard.idle()

    expect(received.message.text).toBe('a\uFFFDb\uFFFDc\uD83D\uDE00')
    expect(sent._unsafeUnwrap().text).toBe('o\uFFFD\uFFFD')
    expect((await ann.messages()).map((message) => message.text)).toEqual([
      'a\uFFFDb\uFFFDc\uD83D\uDE00',
      'x\uFFFDy\uFFFDz\uD83D\uDE00',
      'o\uFFFD\uFFFD',
    ])
    expect(ann.received().map((sent) => sent.text)).toEqual(['x\uFFFDy\uFFFDz\uD83D\uDE00', 'o\uFFFD\uFFFD'])
  })

  it("starts a new session's first turn from what ingest stored: no lease, no read before the reply's delivery", async () => {
    const trips = await tripsOfOneAnswer()
    // The integration is ingest's own read, before its transaction.
    expect(trips.flat()).toEqual(['integrations.get', 'outbox.claim', 'outbox.remove', 'outbox.claimNext'])
  })

  it("reads what a returning customer's turn needs in two round trips, with no lease: the job rows, then the agent, channel and history", async () => {
    const trips = await tripsOfOneAnswer({ returning: true })
    // After ingest's read of the integration, before its transaction. The job is leased to this
    // process's free worker as it is stored; its turn reads the rows itself, as they are after it.
    expect(trips.slice(0, 3).map((trip) => [...trip].sort())).toEqual([
      ['integrations.get'],
      ['messages.get', 'sessions.get'],
      ['agents.get', 'integrations.get', 'messages.history'],
    ])
    expect(trips.flat()).not.toContain('jobs.lease')
  })

  it('commits a turn in two round trips: every write together, then COMMIT', async () => {
    harness = await createConversationHarness({ agents: { support: {} }, entry: 'support' })
    harness.model.script(
      harness.agent('support'),
      toolCall('save_fact', { key: 'name', value: 'Ann' }),
      reply('Hello Ann'),
    )
    const transactions = recordRoundTrips(harness.storage)
    await harness.customer('ann').sends('Hi, I am Ann')
    await harness.switchboard.idle()
    expect(harness.customer('ann').replies()).toEqual(['Hello Ann'])
    const turn = transactions.find((trips) => trips.flat().includes('jobs.complete'))
    // The session the turn started from is saved: it is not read again.
    expect(turn).toEqual([
      [
        'jobs.complete',
        'messages.insert',
        'outbox.add',
        'sessions.save',
        'billing.recordUsage',
        'billing.recordUsage',
      ],
    ])
  })

  it('reads the session again in its commit when someone changed it while the agents worked', async () => {
    const lookup = lookupWithOperator()
    harness = await createConversationHarness({
      agents: { support: {} },
      entry: 'support',
      tools: [lookup.tool],
    })
    harness.model.script(harness.agent('support'), toolCall('slow_lookup', {}), reply('Found it'))
    const ann = harness.customer('ann')
    lookup.whileLooking(async () => {
      const { id: sessionId } = await ann.session()
      const result = await harness.switchboard.sessions.reassign({
        companyId: harness.companyId,
        sessionId,
        agentId: harness.agent('support'),
      })
      expect(result.isOk()).toBe(true)
    })
    const transactions = recordRoundTrips(harness.storage)
    await ann.sends('Where is my order?')
    await harness.switchboard.idle()
    expect(ann.replies()).toEqual(['Found it'])
    // The first attempt's save found the version moved on and took everything back; the next
    // started from the session as the operator left it.
    const turn = transactions.filter((trips) => trips.flat().includes('jobs.complete'))
    expect(turn).toEqual([
      [
        ['sessions.get'],
        [
          'jobs.complete',
          'messages.insert',
          'outbox.add',
          'sessions.save',
          'billing.recordUsage',
          'billing.recordUsage',
        ],
      ],
    ])
    const session = await ann.session()
    expect(session.metadata.agentPath.map((entry) => entry.via)).toEqual(['initial', 'manual'])
  })

  it('delivers the replies it just committed without reading them, their session or channel back', async () => {
    const trips = await tripsOfOneAnswer()
    const claimed = trips.findIndex((trip) => trip.includes('outbox.claim'))
    expect(claimed).toBeGreaterThan(-1)
    // The pool may ask for more jobs meanwhile; those calls are its own, not the delivery's.
    const calls = trips
      .slice(claimed)
      .flat()
      .filter((call) => call !== 'jobs.lease')
    expect(calls).toEqual(['outbox.claim', 'outbox.remove', 'outbox.claimNext'])
  })

  it('sends the prompt layout of CONTRACT §10 with the three built-in tools', async () => {
    harness = await createConversationHarness({
      agents: {
        support: {
          systemPrompt: 'You are the support agent.',
          knowledge: [
            'Returns are accepted within 30 days.\n\nShipping takes 3 days.\n\nOur office is in Lisbon.',
          ],
        },
      },
      entry: 'support',
    })
    const support = harness.agent('support')
    harness.model.script(support, reply('first answer'), reply('Returns: 30 days.'))
    const customer = harness.customer()
    await customer.says('hello there')
    await customer.says('Can I make returns after 20 days?')

    const request = harness.model.requestsFor(support, 'turn')[1]!
    expect(request.model).toBe('gpt-4o-mini')
    expect(request.tools?.map((tool) => tool.name)).toEqual([
      'save_fact',
      'append_journey',
      'handoff_to_agent',
    ])
    expect(request.tools?.[2]?.parameters).toMatchObject({
      properties: { targetAgentId: { type: 'integer' }, reason: { type: 'string' } },
      required: ['targetAgentId'],
    })
    expect(request.messages).toEqual([
      {
        role: 'system',
        content:
          'You are the support agent.\n\n## Shared context\n(empty)\n\n## Knowledge\nReturns are accepted within 30 days.\n\nShipping takes 3 days.',
      },
      { role: 'user', content: 'hello there' },
      { role: 'assistant', content: 'first answer' },
      { role: 'user', content: 'Can I make returns after 20 days?' },
    ])
  })

  it('saves a fact under any string key, __proto__ and other Object.prototype names included', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const solo = harness.agent('solo')
    harness.model.script(
      solo,
      toolCall('save_fact', { key: '__proto__', value: 'kept' }),
      toolCall('save_fact', { key: 'constructor', value: 'also kept' }),
      reply('Noted.'),
      reply('Still here.'),
    )
    const customer = harness.customer()
    await customer.says('remember this')
    const facts = await customer.facts()
    expect(Object.entries(facts)).toEqual([
      ['__proto__', 'kept'],
      ['constructor', 'also kept'],
    ])
    await customer.says('and now?')
    expect(harness.model.requestsFor(solo, 'turn')[3]!.messages[0]!.content).toBe(
      '## Shared context\n__proto__: kept\nconstructor: also kept',
    )
  })

  it('reports malformed tool arguments back to the model instead of failing', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const solo = harness.agent('solo')
    harness.model.script(
      solo,
      toolCall('save_fact', '{"key": "plan", "value": '),
      toolCall('save_fact', { key: 42 }),
      toolCall('no_such_tool', {}),
      reply('Noted.'),
    )
    const customer = harness.customer()
    await customer.says('I am on the pro plan')
    expect(customer.replies()).toEqual(['Noted.'])
    const toolResults = harness.model
      .requestsFor(solo, 'turn')[3]!
      .messages.filter((message) => message.role === 'tool')
      .map((message) => message.content)
    expect(toolResults).toEqual([
      'Error: arguments are not valid JSON',
      expect.stringContaining('Error: invalid arguments: key'),
      'Error: there is no tool named "no_such_tool"',
    ])
    expect(await customer.facts()).toEqual({})
  })

  it('runs the app tools it registered, with zod-checked arguments', async () => {
    const lookups: string[] = []
    const lookupOrder = defineTool({
      name: 'lookup_order',
      description: 'Find an order by its number.',
      parameters: z.object({ orderNumber: z.string().regex(/^\d+$/) }),
      execute: ({ orderNumber }, context) => {
        lookups.push(`${orderNumber}@${context.agentId}`)
        return { status: 'shipped' }
      },
    })
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', tools: [lookupOrder] })
    const solo = harness.agent('solo')
    harness.model.script(
      solo,
      toolCall('lookup_order', { orderNumber: 'abc' }),
      toolCall('lookup_order', { orderNumber: '123' }),
      reply('Your order has shipped.'),
    )
    await harness.customer().says('where is order 123?')
    const requests = harness.model.requestsFor(solo, 'turn')
    expect(requests[0]!.tools?.map((tool) => tool.name)).toContain('lookup_order')
    const results = requests[2]!.messages
      .filter((message) => message.role === 'tool')
      .map((message) => message.content)
    expect(results).toEqual([expect.stringContaining('orderNumber'), '{"status":"shipped"}'])
    expect(lookups).toEqual([`123@${solo}`])
  })

  it('stops after 8 model calls with TOOL_LOOP_LIMIT and no reply', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const solo = harness.agent('solo')
    for (let index = 0; index < 8; index += 1) {
      harness.model.script(solo, toolCall('append_journey', { step: `step ${index}` }))
    }
    const customer = harness.customer()
    await customer.says('loop forever')
    expect(harness.model.requests).toHaveLength(8)
    expect(customer.replies()).toEqual([])
    expect((await customer.session()).metadata.errors.map((error) => error.code)).toEqual(['TOOL_LOOP_LIMIT'])
  })

  it('sends the fallback reply once when the model fails, and records MODEL_UNAVAILABLE', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), fail('upstream 503'))
    const customer = harness.customer()
    await customer.says('hello')
    expect(customer.replies()).toEqual(["Sorry, I can't answer right now. Please try again shortly."])
    const session = await customer.session()
    expect(session.metadata.errors).toEqual([
      expect.objectContaining({
        code: 'MODEL_UNAVAILABLE',
        message: expect.stringContaining('upstream 503'),
      }),
    ])
    expect(await harness.storage.jobs.pending({ sessionId: session.id })).toBe(0)
  })

  it('sends nothing on model failure when fallbackReply is null', async () => {
    harness = await createConversationHarness({ agents: { solo: { fallbackReply: null } }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), fail())
    const customer = harness.customer()
    await customer.says('hello')
    expect(customer.received()).toEqual([])
  })

  it('an empty final text is no reply', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('   '))
    const customer = harness.customer()
    await customer.says('hello')
    expect(customer.received()).toEqual([])
    expect((await customer.messages()).map((message) => message.role)).toEqual(['customer'])
  })
})
