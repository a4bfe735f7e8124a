import { afterEach, describe, expect, it } from 'vitest'
import {
  type ConversationHarness,
  createConversationHarness,
  fail,
  type HarnessAgent,
  rawRoute,
  reply,
  route,
} from '../src/testing/index.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

const routing = (routes: { id: string; agent: string }[], threshold = 0.5) => ({
  enabled: true,
  routes: routes.map((entry) => ({ ...entry, description: `${entry.id} questions` })),
  confidenceThreshold: threshold,
})

async function team(agents: Record<string, HarnessAgent>) {
  harness = await createConversationHarness({ agents, entry: 'reception' })
  return harness
}

describe('entry routing', () => {
  it('resolves to the specialist the receptionist picks, recording path and reason', async () => {
    await team({
      reception: { role: 'receptionist', routingConfig: routing([{ id: 'sales', agent: 'sales' }]) },
      sales: { role: 'sales' },
    })
    harness.model.script(harness.agent('reception'), route('sales', 0.92))
    harness.model.script(harness.agent('sales'), reply('Our plans start at 10 USD.'))
    const customer = harness.customer()

    await customer.says('How much is the pro plan?')

    expect(await customer.activeAgent()).toBe('sales')
    expect(customer.replies()).toEqual(['Our plans start at 10 USD.'])
    const session = await customer.session()
    expect(session.metadata.routing).toMatchObject({ reason: 'resolved', depth: 1 })
    expect(session.metadata.agentPath).toEqual([
      expect.objectContaining({
        agentId: harness.agent('reception'),
        via: 'initial',
        agentName: 'reception',
      }),
      expect.objectContaining({
        agentId: harness.agent('sales'),
        agentName: 'sales',
        role: 'sales',
        via: 'entry_routing',
        confidence: 0.92,
        routeId: 'sales',
        depth: 1,
      }),
    ])
    expect(session.metadata.agentPath[0]).not.toHaveProperty('depth')
    // The routing call uses the routing model and the route_decision schema.
    const [routingCall] = harness.model.requestsFor(harness.agent('reception'), 'route')
    expect(routingCall?.responseFormat?.jsonSchema.name).toBe('route_decision')
  })

  it('uses routingModel for the classifier and llmModel for the turn', async () => {
    await team({
      reception: {
        llmModel: 'big-model',
        routingModel: 'small-model',
        routingConfig: routing([{ id: 'sales', agent: 'sales' }]),
      },
      sales: { llmModel: 'sales-model' },
    })
    harness.model.script(harness.agent('reception'), route('sales', 0.9))
    harness.model.script(harness.agent('sales'), reply('hi'))
    await harness.customer().says('buy')
    expect(harness.model.requests.map((request) => [request.purpose, request.model])).toEqual([
      ['route', 'small-model'],
      ['turn', 'sales-model'],
    ])
  })

  it.each([
    ['a null route', route(null, 0.9)],
    ['an unknown route', route('nope', 0.9)],
    ['confidence below the threshold', route('sales', 0.49)],
    ['unparseable content', rawRoute('sales, probably')],
    ['a failing classifier', fail('classifier down')],
  ])('falls back to the entry agent on %s', async (_name, decision) => {
    await team({
      reception: { routingConfig: routing([{ id: 'sales', agent: 'sales' }]) },
      sales: {},
    })
    harness.model.script(harness.agent('reception'), decision, reply('How can I help?'))
    const customer = harness.customer()
    await customer.says('hello')
    expect(await customer.activeAgent()).toBe('reception')
    // The entry agent classifies at depth 1: "at depth 1 that is the session's entry agent" (§10).
    expect((await customer.session()).metadata.routing).toMatchObject({ reason: 'fallback', depth: 1 })
    expect(customer.replies()).toEqual(['How can I help?'])
    // A classifier that answered, however unhelpfully, is no failure; one that failed is recorded.
    const errors = (await customer.session()).metadata.errors
    if (_name === 'a failing classifier') {
      expect(errors).toEqual([
        expect.objectContaining({
          code: 'MODEL_UNAVAILABLE',
          agentId: harness.agent('reception'),
          message: expect.stringMatching(/routing model failed: classifier down/),
        }),
      ])
    } else {
      expect(errors).toEqual([])
    }
  })

  it('chains through agents that route too, numbering the depth', async () => {
    await team({
      reception: { routingConfig: routing([{ id: 'billing', agent: 'billing' }]) },
      billing: { routingConfig: routing([{ id: 'refunds', agent: 'refunds' }]) },
      refunds: {},
    })
    harness.model.script(harness.agent('reception'), route('billing', 0.8))
    harness.model.script(harness.agent('billing'), route('refunds', 0.7))
    harness.model.script(harness.agent('refunds'), reply('Refund started.'))
    const customer = harness.customer()
    await customer.says('refund please')
    const session = await customer.session()
    expect(session.metadata.routing).toMatchObject({ reason: 'resolved', depth: 2 })
    expect(session.metadata.agentPath.map((entry) => [entry.agentName, entry.via, entry.depth])).toEqual([
      ['reception', 'initial', undefined],
      ['billing', 'entry_routing', 1],
      ['refunds', 'entry_routing', 2],
    ])
  })

  it('stops at the entry agent maxDepth with max_depth; the last agent stays active', async () => {
    const chain: Record<string, HarnessAgent> = {}
    const names = ['reception', 'a1', 'a2', 'a3']
    for (const [index, name] of names.entries()) {
      const next = names[index + 1] ?? 'reception'
      chain[name] = { maxDepth: 2, routingConfig: routing([{ id: next, agent: next }]) }
    }
    await team(chain)
    harness.model.script(harness.agent('reception'), route('a1', 0.9))
    harness.model.script(harness.agent('a1'), route('a2', 0.9))
    harness.model.script(harness.agent('a2'), reply('a2 here'))
    const customer = harness.customer()
    await customer.says('go deep')
    expect(await customer.activeAgent()).toBe('a2')
    expect((await customer.session()).metadata.routing).toMatchObject({ reason: 'max_depth', depth: 2 })
  })

  it('never routes deeper than 5, even with maxDepth 7', async () => {
    const names = ['reception', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7']
    const chain: Record<string, HarnessAgent> = {}
    for (const [index, name] of names.entries()) {
      const next = names[index + 1] ?? 'a1'
      chain[name] = { maxDepth: 7, routingConfig: routing([{ id: next, agent: next }]) }
    }
    await team(chain)
    for (const [index, name] of names.slice(0, 5).entries()) {
      harness.model.script(harness.agent(name), route(names[index + 1]!, 0.9))
    }
    harness.model.script(harness.agent('a5'), reply('a5 answers'))
    const customer = harness.customer()
    await customer.says('deeper')
    const session = await customer.session()
    expect(session.metadata.routing).toMatchObject({ reason: 'max_depth', depth: 5 })
    expect(await customer.activeAgent()).toBe('a5')
    expect(session.metadata.agentPath).toHaveLength(6)
  })

  it('detects a cycle and keeps the last unique agent', async () => {
    await team({
      reception: { routingConfig: routing([{ id: 'triage', agent: 'triage' }]) },
      triage: { routingConfig: routing([{ id: 'back', agent: 'reception' }]) },
    })
    harness.model.script(harness.agent('reception'), route('triage', 0.9))
    harness.model.script(harness.agent('triage'), route('back', 0.9), reply('triage answers'))
    const customer = harness.customer()
    await customer.says('loop')
    expect(await customer.activeAgent()).toBe('triage')
    // Triage, at hop 1, classifies at depth 2 and routes back to the entry agent.
    expect((await customer.session()).metadata.routing).toMatchObject({ reason: 'cycle', depth: 2 })
  })

  it('a specialist that is unsure in a chain stays active (fallback at depth 2)', async () => {
    await team({
      reception: { routingConfig: routing([{ id: 'billing', agent: 'billing' }]) },
      billing: { routingConfig: routing([{ id: 'refunds', agent: 'refunds' }], 0.8) },
      refunds: {},
    })
    harness.model.script(harness.agent('reception'), route('billing', 0.9))
    harness.model.script(harness.agent('billing'), route('refunds', 0.3), reply('billing here'))
    const customer = harness.customer()
    await customer.says('invoice')
    expect(await customer.activeAgent()).toBe('billing')
    expect((await customer.session()).metadata.routing).toMatchObject({ reason: 'fallback', depth: 2 })
  })

  it('routes only the first message of a session', async () => {
    await team({
      reception: {
        routingConfig: routing([
          { id: 'sales', agent: 'sales' },
          { id: 'support', agent: 'support' },
        ]),
      },
      sales: {},
      support: {},
    })
    harness.model.script(harness.agent('reception'), route('sales', 0.9))
    harness.model.script(harness.agent('sales'), reply('first'), reply('second'))
    const customer = harness.customer()
    await customer.says('buy')
    await customer.says('my printer is broken')
    expect(harness.model.requests.filter((request) => request.purpose === 'route')).toHaveLength(1)
    expect(customer.replies()).toEqual(['first', 'second'])
  })
})
