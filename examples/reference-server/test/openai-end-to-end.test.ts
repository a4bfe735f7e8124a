import { Writable } from 'node:stream'
import {
  createFakePasswordHasher,
  createRecordingConnector,
  type RecordingConnector,
} from '@switchboard/core/testing'
import { pino } from 'pino'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
// The provider package's own test double: a real OpenAI-compatible HTTP server on port 0.
import {
  errorAnswer,
  type FakeOpenAiServer,
  replyAnswer,
  startFakeOpenAiServer,
  toolCallsAnswer,
} from '../../../packages/provider-openai/test/support/fake-openai-server.js'
import { readConfig } from '../src/config.js'
import {
  type ReferenceServer,
  type ReferenceServerOptions,
  startReferenceServer,
} from '../src/start-reference-server.js'

interface SessionView {
  id: string
  activeAgentId: number
  metadata: {
    errors: { code: string; agentId: number }[]
    sharedContext: { facts: Record<string, string>; journey: { at: string; step: string }[] }
    routing?: { reason: string; depth: number }
    agentPath: { agentId: number; via: string; routeId?: string; confidence?: number }[]
  }
}

let fakeOpenAi: FakeOpenAiServer
const running: ReferenceServer[] = []

beforeAll(async () => {
  fakeOpenAi = await startFakeOpenAiServer()
})

afterAll(async () => {
  await fakeOpenAi.close()
})

beforeEach(() => {
  fakeOpenAi.reset()
})

afterEach(async () => {
  await Promise.all(running.splice(0).map((server) => server.close()))
  // A model request nobody scripted means the server asked for more than the scenario expects.
  expect(fakeOpenAi.unexpected).toEqual([])
})

/**
 * The reference server as `npm start` builds it, in process, talking to the fake OpenAI server
 * (or, with `withApiKey: false`, to no model at all), with a company, an owner's token and a
 * msgplatform channel that records what it is asked to send.
 */
async function startShop(options: { withApiKey?: boolean; serverOptions?: ReferenceServerOptions } = {}) {
  const environment: Record<string, string> = { PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent' }
  if (options.withApiKey !== false) {
    environment.OPENAI_API_KEY = 'test-key'
    environment.OPENAI_BASE_URL = fakeOpenAi.url
  }
  const channel = createRecordingConnector({ type: 'msgplatform', humanTransfer: true })
  const service = await startReferenceServer(readConfig(environment), {
    passwordHasher: createFakePasswordHasher(),
    connectors: [channel],
    ...options.serverOptions,
  })
  running.push(service)

  const call = async (method: string, path: string, body?: unknown, token?: string) => {
    const response = await fetch(`${service.url}${path}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await response.text()
    return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as unknown }
  }

  const owner = { email: 'owner@velo.test', password: 'correct horse battery', companyName: 'Velo Bikes' }
  expect((await call('POST', '/api/auth/register', owner)).status).toBe(201)
  const login = await call('POST', '/api/auth/login', { email: owner.email, password: owner.password })
  const token = (login.body as { session: { access_token: string } }).session.access_token
  const api = (method: string, path: string, body?: unknown) => call(method, path, body, token)

  return {
    service,
    channel,
    api,
    async createAgent(body: Record<string, unknown>): Promise<number> {
      const created = await api('POST', '/api/agents', body)
      expect(created.status).toBe(201)
      return (created.body as { id: number }).id
    },
    async addKnowledge(agentId: number, title: string, content: string): Promise<void> {
      const added = await api('POST', `/api/agents/${agentId}/knowledge`, { title, content })
      expect(added.status).toBe(201)
    },
    /** A msgplatform integration entering at this agent; returns its id. */
    async openChannel(entryAgentId: number): Promise<string> {
      const created = await api('POST', '/api/integrations', {
        type: 'msgplatform',
        name: 'Velo support line',
        entryAgentId,
        config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'platform-token' },
      })
      expect(created.status).toBe(201)
      return (created.body as { id: string }).id
    },
    /** The customer writes; resolves once every turn and delivery it caused is done. */
    async customerSays(integrationId: string, text: string, clientId = 'client-ada'): Promise<string> {
      const ingested = await service.switchboard.ingest({ integrationId, clientId, text })
      if (ingested.isErr()) throw new Error(`ingest failed: ${ingested.error.message}`)
      await service.switchboard.idle()
      return ingested.value.session.id
    },
    async session(sessionId: string): Promise<SessionView> {
      const read = await api('GET', `/api/sessions/${sessionId}`)
      expect(read.status).toBe(200)
      return read.body as SessionView
    },
  }
}

const agentReplies = (channel: RecordingConnector) =>
  channel.sent.filter((message) => message.role === 'agent').map((message) => message.text)

const bodies = () => fakeOpenAi.requests.map((request) => request.body)

describe('the reference server with OPENAI_API_KEY: routing and turns through the OpenAI provider', () => {
  it('says at start that it uses OpenAI, and where', async () => {
    const lines: string[] = []
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString())
          done()
        },
      }),
    )
    await startShop({ serverOptions: { logger } })
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(logged).toContainEqual(
      expect.objectContaining({ level: 30, model: 'openai', baseUrl: fakeOpenAi.url }),
    )
    expect(logged.some((line) => line.level === 40 && /OPENAI_API_KEY/.test(String(line.msg)))).toBe(false)
  })

  it('classifies with routingModel and a route_decision json_schema, then answers with the llmModel of the routed agent', async () => {
    const shop = await startShop()
    const sales = await shop.createAgent({
      name: 'Sales',
      systemPrompt: 'You sell bikes.',
      llmModel: 'gpt-4o',
    })
    const reception = await shop.createAgent({
      name: 'Reception',
      llmModel: 'gpt-4o-mini',
      routingModel: 'gpt-4.1-nano',
      routingConfig: {
        enabled: true,
        routes: [{ id: 'sales', agentId: sales, description: 'the customer wants to buy a bike' }],
      },
    })
    const channel = await shop.openChannel(reception)
    fakeOpenAi.enqueue(
      replyAnswer('{"routeId":"sales","confidence":0.92}'),
      replyAnswer('The Velo Red is in stock.'),
    )

    const sessionId = await shop.customerSays(channel, 'I want to buy a red bike')

    const [routing, turn] = bodies()
    expect(bodies()).toHaveLength(2)
    expect(routing!.model).toBe('gpt-4.1-nano')
    expect(routing!.response_format).toMatchObject({
      type: 'json_schema',
      json_schema: { name: 'route_decision' },
    })
    expect(routing!).not.toHaveProperty('tools')
    expect(routing!.messages.at(-1)).toEqual({ role: 'user', content: 'I want to buy a red bike' })
    expect(turn!.model).toBe('gpt-4o')
    expect(turn!).not.toHaveProperty('response_format')
    expect(agentReplies(shop.channel)).toEqual(['The Velo Red is in stock.'])
    const session = await shop.session(sessionId)
    expect(session.activeAgentId).toBe(sales)
    expect(session.metadata.routing).toMatchObject({ reason: 'resolved', depth: 1 })
    expect(session.metadata.agentPath.at(-1)).toMatchObject({
      agentId: sales,
      via: 'entry_routing',
      routeId: 'sales',
      confidence: 0.92,
    })
  })

  it('answers with the llmModel of the entry agent when the classifier is unsure', async () => {
    const shop = await startShop()
    const sales = await shop.createAgent({ name: 'Sales', llmModel: 'gpt-4o' })
    const reception = await shop.createAgent({
      name: 'Reception',
      llmModel: 'gpt-4o-mini',
      routingModel: 'gpt-4.1-nano',
      routingConfig: { enabled: true, routes: [{ id: 'sales', agentId: sales, description: 'buying' }] },
    })
    const channel = await shop.openChannel(reception)
    fakeOpenAi.enqueue(replyAnswer('{"routeId":"sales","confidence":0.2}'), replyAnswer('How can I help?'))

    await shop.customerSays(channel, 'hello')

    expect(bodies().map((body) => body.model)).toEqual(['gpt-4.1-nano', 'gpt-4o-mini'])
    expect(agentReplies(shop.channel)).toEqual(['How can I help?'])
  })

  it('offers the three built-in tools with the parameters of the spec', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.enqueue(replyAnswer('Hi!'))

    await shop.customerSays(channel, 'hi')

    const tools = bodies()[0]!.tools!
    expect(tools.map((tool) => tool.type)).toEqual(['function', 'function', 'function'])
    const byName = Object.fromEntries(
      tools.map((tool) => {
        if (tool.type !== 'function') throw new Error('only function tools are expected')
        return [tool.function.name, tool.function]
      }),
    )
    expect(Object.keys(byName)).toEqual(['save_fact', 'append_journey', 'handoff_to_agent'])
    expect(byName.save_fact!.parameters).toMatchObject({
      type: 'object',
      properties: { key: { type: 'string' }, value: { type: 'string' } },
      required: ['key', 'value'],
    })
    expect(byName.append_journey!.parameters).toMatchObject({
      type: 'object',
      properties: { step: { type: 'string' } },
      required: ['step'],
    })
    expect(byName.handoff_to_agent!.parameters).toMatchObject({
      type: 'object',
      properties: { targetAgentId: { type: 'integer' }, reason: { type: 'string' } },
      required: ['targetAgentId'],
    })
    for (const definition of Object.values(byName)) expect(definition.description).toMatch(/\w/)
  })

  it('lays out the prompt of §10 after a handoff: the window of the caller, the SCC, knowledge, the message last', async () => {
    const shop = await startShop()
    const sales = await shop.createAgent({
      name: 'Sales',
      systemPrompt: 'You sell bikes.',
      llmModel: 'gpt-4o',
      handoff: { messageHistoryDepth: 20 },
    })
    const reception = await shop.createAgent({
      name: 'Reception',
      systemPrompt: 'You welcome customers of Velo Bikes.',
      llmModel: 'gpt-4o-mini',
      handoff: {
        enabled: true,
        allowedTargets: [sales],
        messageHistoryDepth: 5,
        handoffMessageTemplate: 'Passing you to our sales team.',
      },
    })
    await shop.addKnowledge(sales, 'Red bikes', 'The Velo Red costs 500 EUR and comes in every size.')
    const channel = await shop.openChannel(reception)

    // Four exchanges before: eight prior messages, more than reception's window of five.
    for (const turn of [1, 2, 3, 4]) {
      fakeOpenAi.enqueue(replyAnswer(`answer ${turn}`))
      await shop.customerSays(channel, `question ${turn}`)
    }
    fakeOpenAi.reset()
    fakeOpenAi.enqueue(
      toolCallsAnswer([
        { id: 'call_fact', name: 'save_fact', arguments: '{"key":"name","value":"Ada"}' },
        { id: 'call_step', name: 'append_journey', arguments: '{"step":"asked about red bikes"}' },
      ]),
      toolCallsAnswer([
        { id: 'call_handoff', name: 'handoff_to_agent', arguments: JSON.stringify({ targetAgentId: sales }) },
      ]),
      replyAnswer('The Velo Red costs 500 EUR.'),
    )

    const sessionId = await shop.customerSays(channel, 'I am Ada. How much is a red bike?')

    const [first, afterTools, handedOff] = bodies()
    expect(bodies()).toHaveLength(3)
    const window = [
      { role: 'assistant', content: 'answer 2' },
      { role: 'user', content: 'question 3' },
      { role: 'assistant', content: 'answer 3' },
      { role: 'user', content: 'question 4' },
      { role: 'assistant', content: 'answer 4' },
    ]
    const current = { role: 'user', content: 'I am Ada. How much is a red bike?' }
    expect(first!.model).toBe('gpt-4o-mini')
    expect(first!.messages).toEqual([
      { role: 'system', content: 'You welcome customers of Velo Bikes.\n\n## Shared context\n(empty)' },
      ...window,
      current,
    ])

    // The tool results go back as role "tool", answering the calls by id.
    expect(afterTools!.messages.slice(0, 7)).toEqual(first!.messages)
    expect(afterTools!.messages.slice(7)).toEqual([
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_fact',
            type: 'function',
            function: { name: 'save_fact', arguments: '{"key":"name","value":"Ada"}' },
          },
          {
            id: 'call_step',
            type: 'function',
            function: { name: 'append_journey', arguments: '{"step":"asked about red bikes"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_fact', content: 'saved' },
      { role: 'tool', tool_call_id: 'call_step', content: 'appended' },
    ])

    // Sales answers the same message with the caller's window (5, not its own 20) and no tool traffic.
    const session = await shop.session(sessionId)
    const [step] = session.metadata.sharedContext.journey
    expect(step!.step).toBe('asked about red bikes')
    expect(handedOff!.model).toBe('gpt-4o')
    expect(handedOff!.messages).toEqual([
      {
        role: 'system',
        content: [
          'You sell bikes.',
          `## Shared context\nname: Ada\n- ${step!.at} asked about red bikes`,
          '## Knowledge\nThe Velo Red costs 500 EUR and comes in every size.',
        ].join('\n\n'),
      },
      ...window,
      current,
    ])

    expect(shop.channel.sent.slice(-2).map((message) => [message.role, message.text])).toEqual([
      ['system', 'Passing you to our sales team.'],
      ['agent', 'The Velo Red costs 500 EUR.'],
    ])
    expect(session.activeAgentId).toBe(sales)
    expect(session.metadata.sharedContext.facts).toEqual({ name: 'Ada' })
    expect(session.metadata.errors).toEqual([])
  })

  it('runs an app tool registered through the SDK: its JSON schema sent, its result returned as role "tool"', async () => {
    const stockTool = {
      name: 'check_stock',
      description: 'How many bikes of a model are in stock.',
      parameters: z.object({ model: z.string().describe('the bike model') }),
      execute: ({ model }: { model: string }) => ({ model, inStock: 3 }),
    }
    const shop = await startShop({ serverOptions: { tools: [stockTool] } })
    const agent = await shop.createAgent({ name: 'Sales' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.enqueue(
      toolCallsAnswer([{ id: 'call_stock', name: 'check_stock', arguments: '{"model":"Velo Red"}' }]),
      replyAnswer('We have 3 Velo Red in stock.'),
    )

    await shop.customerSays(channel, 'Is the Velo Red in stock?')

    const [first, second] = bodies()
    expect(first!.tools!.at(-1)).toMatchObject({
      type: 'function',
      function: {
        name: 'check_stock',
        description: 'How many bikes of a model are in stock.',
        parameters: { type: 'object', properties: { model: { type: 'string' } }, required: ['model'] },
      },
    })
    expect(second!.messages.at(-1)).toEqual({
      role: 'tool',
      tool_call_id: 'call_stock',
      content: '{"model":"Velo Red","inStock":3}',
    })
    expect(agentReplies(shop.channel)).toEqual(['We have 3 Velo Red in stock.'])
  })
})

describe('the reference server with OPENAI_API_KEY: when the model misbehaves', () => {
  it('retries a 429 and delivers the answer once', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.enqueue(errorAnswer(429, { message: 'Rate limit reached' }), replyAnswer('Here I am.'))

    const sessionId = await shop.customerSays(channel, 'hello?')

    expect(fakeOpenAi.requests).toHaveLength(2)
    expect(agentReplies(shop.channel)).toEqual(['Here I am.'])
    expect((await shop.session(sessionId)).metadata.errors).toEqual([])
  })

  it('sends the fallback reply exactly once and records MODEL_UNAVAILABLE when the model keeps failing', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support', fallbackReply: 'We are back in a minute.' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.otherwise(errorAnswer(500, { message: 'The server had an error' }))

    const sessionId = await shop.customerSays(channel, 'hello?')

    // One turn: the first attempt and the provider's two retries, and the job is done.
    expect(fakeOpenAi.requests).toHaveLength(3)
    expect(agentReplies(shop.channel)).toEqual(['We are back in a minute.'])
    const session = await shop.session(sessionId)
    expect(session.metadata.errors).toEqual([
      expect.objectContaining({ code: 'MODEL_UNAVAILABLE', agentId: agent }),
    ])
    expect(await shop.service.switchboard.storage.jobs.pending({ sessionId })).toBe(0)
    await new Promise((resolve) => setTimeout(resolve, 300))
    await shop.service.switchboard.idle()
    expect(fakeOpenAi.requests).toHaveLength(3)
    expect(agentReplies(shop.channel)).toEqual(['We are back in a minute.'])
  })

  it('survives malformed tool arguments: the model gets an error result and its next reply is delivered', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.enqueue(
      toolCallsAnswer([{ id: 'call_bad', name: 'save_fact', arguments: '{not json' }]),
      replyAnswer('Noted, Ada.'),
    )

    const sessionId = await shop.customerSays(channel, 'I am Ada')

    const retry = bodies()[1]!
    expect(bodies()).toHaveLength(2)
    expect(retry.messages.at(-1)).toEqual({
      role: 'tool',
      tool_call_id: 'call_bad',
      content: expect.stringMatching(/^Error: .*not valid JSON/),
    })
    expect(agentReplies(shop.channel)).toEqual(['Noted, Ada.'])
    const session = await shop.session(sessionId)
    expect(session.metadata.sharedContext.facts).toEqual({})
    expect(session.metadata.errors).toEqual([])
  })

  it('answers every call of one round in order, by id, whatever is wrong with each', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.enqueue(
      toolCallsAnswer([
        { id: 'call_name', name: 'save_fact', arguments: '{"key":"name","value":"Ada"}' },
        { id: 'call_unknown', name: 'check_stock', arguments: '{}' },
        { id: 'call_broken', name: 'save_fact', arguments: '{"key":' },
        { id: 'call_shape', name: 'save_fact', arguments: '{"key":5}' },
        { id: 'call_empty', name: 'append_journey', arguments: '' },
        { id: 'call_step', name: 'append_journey', arguments: '{"step":"gave her name"}' },
      ]),
      replyAnswer('Noted, Ada.'),
    )

    const sessionId = await shop.customerSays(channel, 'I am Ada')

    const results = bodies()[1]!.messages.filter((message) => message.role === 'tool')
    expect(results.map((result) => [result.tool_call_id, result.content])).toEqual([
      ['call_name', 'saved'],
      ['call_unknown', 'Error: there is no tool named "check_stock"'],
      ['call_broken', expect.stringMatching(/^Error: .*not valid JSON/)],
      ['call_shape', expect.stringMatching(/^Error: invalid arguments: key: /)],
      ['call_empty', expect.stringMatching(/^Error: invalid arguments: step: /)],
      ['call_step', 'appended'],
    ])
    expect(agentReplies(shop.channel)).toEqual(['Noted, Ada.'])
    const session = await shop.session(sessionId)
    expect(session.metadata.sharedContext.facts).toEqual({ name: 'Ada' })
    expect(session.metadata.sharedContext.journey.map((entry) => entry.step)).toEqual(['gave her name'])
    expect(session.metadata.errors).toEqual([])
  })

  it('ends the caller at a handoff in the middle of a round: the calls after it, a second handoff and its text go unheard', async () => {
    const shop = await startShop()
    const billing = await shop.createAgent({ name: 'Billing' })
    const sales = await shop.createAgent({ name: 'Sales' })
    const reception = await shop.createAgent({
      name: 'Reception',
      handoff: { enabled: true, allowedTargets: [sales, billing] },
    })
    const channel = await shop.openChannel(reception)
    fakeOpenAi.enqueue(
      toolCallsAnswer(
        [
          { id: 'call_before', name: 'save_fact', arguments: '{"key":"before","value":"kept"}' },
          {
            id: 'call_sales',
            name: 'handoff_to_agent',
            arguments: JSON.stringify({ targetAgentId: sales, reason: 'wants a bike' }),
          },
          {
            id: 'call_billing',
            name: 'handoff_to_agent',
            arguments: JSON.stringify({ targetAgentId: billing }),
          },
          { id: 'call_after', name: 'save_fact', arguments: '{"key":"after","value":"dropped"}' },
        ],
        { content: 'Let me pass you on.' },
      ),
      replyAnswer('Sales here.'),
    )

    const sessionId = await shop.customerSays(channel, 'I want a bike')

    expect(bodies()).toHaveLength(2)
    // The caller's handoff tool named its targets; the receiving agent, with none, gets the plain one.
    const handoffTool = (body: number) =>
      bodies()[body]!.tools!.find(
        (tool) => tool.type === 'function' && tool.function.name === 'handoff_to_agent',
      )
    expect(handoffTool(0)).toMatchObject({
      function: {
        description: expect.stringContaining(
          `targetAgentId is one of: ${sales} (Sales); ${billing} (Billing).`,
        ),
      },
    })
    expect(handoffTool(1)).toMatchObject({
      function: { description: expect.not.stringContaining('targetAgentId') },
    })
    expect(bodies()[1]!.messages.some((message) => message.role === 'tool')).toBe(false)
    expect(agentReplies(shop.channel)).toEqual(['Sales here.'])
    const session = await shop.session(sessionId)
    expect(session.activeAgentId).toBe(sales)
    expect(session.metadata.agentPath.filter((entry) => entry.via === 'handoff_tool')).toEqual([
      expect.objectContaining({ agentId: sales, reason: 'wants a bike' }),
    ])
    expect(session.metadata.sharedContext.facts).toEqual({ before: 'kept' })
    expect(session.metadata.errors).toEqual([])
  })

  it('delivers a reply that comes on the 8th model call, the last the budget allows', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    for (let round = 1; round <= 7; round += 1) {
      fakeOpenAi.enqueue(
        toolCallsAnswer([{ name: 'append_journey', arguments: JSON.stringify({ step: `step ${round}` }) }]),
      )
    }
    fakeOpenAi.enqueue(replyAnswer('Done thinking.'))

    const sessionId = await shop.customerSays(channel, 'hello?')

    expect(fakeOpenAi.requests).toHaveLength(8)
    expect(agentReplies(shop.channel)).toEqual(['Done thinking.'])
    const session = await shop.session(sessionId)
    expect(session.metadata.sharedContext.journey).toHaveLength(7)
    expect(session.metadata.errors).toEqual([])
  })

  it('stops a model that only ever calls tools after 8 calls: no reply, TOOL_LOOP_LIMIT', async () => {
    const shop = await startShop()
    const agent = await shop.createAgent({ name: 'Support' })
    const channel = await shop.openChannel(agent)
    fakeOpenAi.otherwise(() =>
      toolCallsAnswer([{ name: 'append_journey', arguments: '{"step":"thinking it over"}' }]),
    )

    const sessionId = await shop.customerSays(channel, 'hello?')

    expect(fakeOpenAi.requests).toHaveLength(8)
    expect(shop.channel.sent).toEqual([])
    const session = await shop.session(sessionId)
    expect(session.metadata.errors.map((error) => error.code)).toEqual(['TOOL_LOOP_LIMIT'])
    expect(await shop.service.switchboard.storage.jobs.pending({ sessionId })).toBe(0)
  })
})

describe('the reference server without OPENAI_API_KEY', () => {
  it('answers a customer end to end with the offline provider: a knowledge passage comes back', async () => {
    const shop = await startShop({ withApiKey: false })
    const agent = await shop.createAgent({ name: 'Support' })
    await shop.addKnowledge(
      agent,
      'Warranty and returns',
      'Every bike has a two year warranty on the frame.\n\nReturns are free within 30 days of delivery.',
    )
    const channel = await shop.openChannel(agent)

    await shop.customerSays(channel, 'Can I get my returns picked up?')

    expect(agentReplies(shop.channel)).toEqual(['Returns are free within 30 days of delivery.'])
    expect(fakeOpenAi.requests).toEqual([])
  })
})
