import { ConfigError, type LlmProvider, type ModelMessage } from '@switchboard/core'
import { OpenAI } from 'openai'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { createOpenAiProvider } from '../src/index.js'
import {
  errorAnswer,
  type FakeOpenAiServer,
  replyAnswer,
  stalledAnswer,
  startFakeOpenAiServer,
  toolCallsAnswer,
} from './support/fake-openai-server.js'

let fake: FakeOpenAiServer
let provider: LlmProvider

beforeAll(async () => {
  fake = await startFakeOpenAiServer()
})

afterAll(async () => {
  await fake.close()
})

beforeEach(() => {
  fake.reset()
  provider = createOpenAiProvider({ apiKey: 'test-key', baseURL: fake.url })
})

const saveFact = {
  name: 'save_fact',
  description: 'Remember a fact.',
  parameters: {
    type: 'object',
    properties: { key: { type: 'string', minLength: 1 }, value: { type: 'string' } },
    required: ['key', 'value'],
    additionalProperties: false,
  },
}

const conversation: ModelMessage[] = [
  { role: 'system', content: 'You sell bikes.' },
  { role: 'user', content: 'Hi, I am Ada' },
  {
    role: 'assistant',
    content: '',
    toolCalls: [{ id: 'call_a', name: 'save_fact', arguments: '{"key":"name","value":"Ada"}' }],
  },
  { role: 'tool', toolCallId: 'call_a', content: 'saved' },
  { role: 'assistant', content: 'Hello Ada!' },
  { role: 'user', content: 'Do you have red ones?' },
]

describe('the OpenAI provider: requests', () => {
  it('sends the model, the conversation with its tool traffic, and the tools to /chat/completions', async () => {
    fake.enqueue(replyAnswer('Yes, we do.'))
    await provider.complete({ model: 'gpt-4o-mini', messages: conversation, tools: [saveFact], agentId: 7 })

    expect(fake.requests).toHaveLength(1)
    const [request] = fake.requests
    expect(request!.method).toBe('POST')
    expect(request!.path).toBe('/v1/chat/completions')
    expect(request!.headers.authorization).toBe('Bearer test-key')
    expect(request!.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'You sell bikes.' },
        { role: 'user', content: 'Hi, I am Ada' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_a',
              type: 'function',
              function: { name: 'save_fact', arguments: '{"key":"name","value":"Ada"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: 'saved' },
        { role: 'assistant', content: 'Hello Ada!' },
        { role: 'user', content: 'Do you have red ones?' },
      ],
      tools: [{ type: 'function', function: saveFact }],
    })
  })

  it('keeps the text an assistant round had next to its tool calls', async () => {
    fake.enqueue(replyAnswer('ok'))
    await provider.complete({
      model: 'gpt-4o',
      messages: [
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: 'Let me note that.',
          toolCalls: [{ id: 'c1', name: 'save_fact', arguments: '{}' }],
        },
        { role: 'tool', toolCallId: 'c1', content: 'Error: invalid arguments' },
      ],
    })
    expect(fake.requests[0]!.body.messages[1]).toEqual({
      role: 'assistant',
      content: 'Let me note that.',
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'save_fact', arguments: '{}' } }],
    })
  })

  it('leaves tools out when there are none and sends a json_schema response_format', async () => {
    fake.enqueue(replyAnswer('{"routeId":"sales","confidence":0.9}'))
    const schema = {
      type: 'object',
      properties: { routeId: { type: ['string', 'null'] }, confidence: { type: 'number' } },
      required: ['routeId', 'confidence'],
      additionalProperties: false,
    }
    const completion = await provider.complete({
      model: 'gpt-4.1-nano',
      messages: [{ role: 'user', content: 'I want to buy' }],
      tools: [],
      responseFormat: { type: 'json_schema', jsonSchema: { name: 'route_decision', schema } },
    })

    expect(completion.text).toBe('{"routeId":"sales","confidence":0.9}')
    const body = fake.requests[0]!.body
    expect(body).not.toHaveProperty('tools')
    expect(body.model).toBe('gpt-4.1-nano')
    expect(body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'route_decision', schema },
    })
  })

  it('sends no response_format on an ordinary turn', async () => {
    fake.enqueue(replyAnswer('hello'))
    await provider.complete({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
    expect(fake.requests[0]!.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    })
  })
})

describe('the OpenAI provider: completions', () => {
  it('returns the text and the usage of a reply', async () => {
    fake.enqueue(replyAnswer('Yes, in red.', { usage: { promptTokens: 120, completionTokens: 7 } }))
    const completion = await provider.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(completion).toEqual({
      text: 'Yes, in red.',
      toolCalls: [],
      usage: { inputTokens: 120, outputTokens: 7 },
    })
  })

  it('returns every tool call of a round, with null content as empty text', async () => {
    fake.enqueue(
      toolCallsAnswer(
        [
          { id: 'call_1', name: 'save_fact', arguments: '{"key":"city","value":"Oslo"}' },
          { id: 'call_2', name: 'append_journey', arguments: '{"step":"asked for red bikes"}' },
          { id: 'call_3', name: 'save_fact', arguments: '{not json' },
        ],
        { usage: { promptTokens: 50, completionTokens: 30 } },
      ),
    )
    const completion = await provider.complete({
      model: 'gpt-4o-mini',
      messages: conversation,
      tools: [saveFact],
    })
    expect(completion).toEqual({
      text: '',
      toolCalls: [
        { id: 'call_1', name: 'save_fact', arguments: '{"key":"city","value":"Oslo"}' },
        { id: 'call_2', name: 'append_journey', arguments: '{"step":"asked for red bikes"}' },
        { id: 'call_3', name: 'save_fact', arguments: '{not json' },
      ],
      usage: { inputTokens: 50, outputTokens: 30 },
    })
  })

  it('keeps tool calls a compatible server sends without a type, or with a null one', async () => {
    fake.enqueue(
      toolCallsAnswer([
        { id: 'call_1', name: 'save_fact', arguments: '{"key":"city","value":"Oslo"}', type: 'absent' },
        { id: 'call_2', name: 'append_journey', arguments: '{"step":"asked"}', type: null },
        { id: 'call_3', name: 'apply_patch', arguments: '*** patch', type: 'custom' },
      ]),
    )
    const completion = await provider.complete({ model: 'local', messages: conversation, tools: [saveFact] })
    expect(completion.toolCalls).toEqual([
      { id: 'call_1', name: 'save_fact', arguments: '{"key":"city","value":"Oslo"}' },
      { id: 'call_2', name: 'append_journey', arguments: '{"step":"asked"}' },
    ])
  })

  // Some compatible servers answer an error with a 200 in their own shape; the failure recorded on
  // the session says what the server said, not a TypeError of reading a missing field.
  it('rejects an answer with no choices with what the server said', async () => {
    fake.enqueue({ kind: 'raw', body: { error: { message: 'model is loading' } }, delayMs: 0 })
    fake.enqueue({ kind: 'raw', body: { choices: [{ index: 0 }] }, delayMs: 0 })

    await expect(provider.complete({ model: 'local', messages: conversation, tools: [] })).rejects.toThrow(
      'the model answered with no choice (model is loading)',
    )
    await expect(provider.complete({ model: 'local', messages: conversation, tools: [] })).rejects.toThrow(
      'the model answered with no message',
    )
  })

  it('joins the text parts of content a compatible server sends as an array', async () => {
    fake.enqueue(
      replyAnswer([
        { type: 'text', text: 'Yes, ' },
        { type: 'text', text: 'in red.' },
      ]),
    )
    const completion = await provider.complete({ model: 'local', messages: conversation })
    expect(completion.text).toBe('Yes, in red.')
  })

  it('reports zero usage when a compatible server sends none', async () => {
    fake.enqueue(replyAnswer('hi', { usage: null }))
    const completion = await provider.complete({
      model: 'local',
      messages: [{ role: 'user', content: 'hi' }],
    })
    expect(completion.usage).toEqual({ inputTokens: 0, outputTokens: 0 })
  })
})

describe('the OpenAI provider: failures', () => {
  it('retries a 429 and returns the answer that follows', async () => {
    fake.enqueue(errorAnswer(429, { message: 'Rate limit reached' }), replyAnswer('after the wait'))
    const completion = await provider.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(completion.text).toBe('after the wait')
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests[1]!.body).toEqual(fake.requests[0]!.body)
  })

  it('retries 5xx twice, then rejects after 3 attempts', async () => {
    fake.otherwise(errorAnswer(500, { message: 'The server had an error' }))
    await expect(provider.complete({ model: 'gpt-4o-mini', messages: conversation })).rejects.toThrow(
      /500.*The server had an error/,
    )
    expect(fake.requests).toHaveLength(3)
  })

  it('waits with backoff when the server says nothing about when to retry', async () => {
    fake.enqueue(errorAnswer(503, { retryAfterMs: null }), replyAnswer('back'))
    const started = performance.now()
    const completion = await provider.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(completion.text).toBe('back')
    expect(fake.requests).toHaveLength(2)
    // The openai package's first backoff is 0.5 s minus up to 25 % jitter.
    expect(performance.now() - started).toBeGreaterThanOrEqual(350)
  })

  // CONTRACT §10 gives a call 30 s and two retries; a server asking for an hour would hold the
  // session's turn, and every message after it, for hours.
  it.each([
    ['retry-after', { retryAfterMs: null, retryAfterSeconds: 3600 }],
    ['retry-after-ms', { retryAfterMs: 3_600_000 }],
  ])('waits its own backoff, not the hour a server asks for in %s', async (_header, wait) => {
    fake.enqueue(errorAnswer(429, wait), replyAnswer('soon after'))
    const started = performance.now()
    const completion = await provider.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(completion.text).toBe('soon after')
    expect(performance.now() - started).toBeLessThan(5_000)
  })

  it('waits what the server asks when that is reasonable', async () => {
    fake.enqueue(errorAnswer(429, { retryAfterMs: 700 }), replyAnswer('after the wait'))
    const started = performance.now()
    await provider.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(performance.now() - started).toBeGreaterThanOrEqual(650)
  })

  it('does not retry a request the server refused (400)', async () => {
    fake.otherwise(errorAnswer(400, { message: 'Invalid schema' }))
    await expect(provider.complete({ model: 'gpt-4o-mini', messages: conversation })).rejects.toThrow(
      /Invalid schema/,
    )
    expect(fake.requests).toHaveLength(1)
  })

  it('gives up on an attempt after timeoutMs', async () => {
    const impatient = createOpenAiProvider({ apiKey: 'k', baseURL: fake.url, timeoutMs: 100, maxRetries: 1 })
    fake.otherwise(replyAnswer('too late', { delayMs: 2000 }))
    const started = performance.now()
    await expect(impatient.complete({ model: 'gpt-4o-mini', messages: conversation })).rejects.toThrow(
      /timed out/i,
    )
    expect(fake.requests).toHaveLength(2)
    expect(performance.now() - started).toBeLessThan(1900)
  })

  // The openai package's timeout stops at the answer's headers; a server that sends them and then
  // stalls would hold the session's turn, and every message after it, for ever.
  it('gives up on an attempt whose answer stalls after its headers, after timeoutMs', async () => {
    const impatient = createOpenAiProvider({ apiKey: 'k', baseURL: fake.url, timeoutMs: 200, maxRetries: 1 })
    fake.otherwise(stalledAnswer())
    const outcome = await Promise.race([
      impatient.complete({ model: 'gpt-4o-mini', messages: conversation }).then(
        () => 'answered',
        (error: unknown) => String(error),
      ),
      new Promise((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000)),
    ])
    expect(outcome).toMatch(/timed out/i)
    expect(fake.requests).toHaveLength(2)
  })

  it('stops when the signal aborts, without retrying', async () => {
    fake.otherwise(replyAnswer('too late', { delayMs: 2000 }))
    const controller = new AbortController()
    const pending = provider.complete({
      model: 'gpt-4o-mini',
      messages: conversation,
      signal: controller.signal,
    })
    setTimeout(() => controller.abort(), 50)
    await expect(pending).rejects.toThrow(/abort/i)
    expect(fake.requests).toHaveLength(1)
  })
})

describe('the OpenAI provider: configuration', () => {
  it('is named openai and classifies through completions, not a classify method', () => {
    expect(provider.name).toBe('openai')
    expect(provider.classify).toBeUndefined()
  })

  it('fails fast without an API key or with impossible limits', () => {
    expect(() => createOpenAiProvider({ apiKey: ' ' })).toThrow(ConfigError)
    expect(() => createOpenAiProvider({ apiKey: 'k', timeoutMs: 0 })).toThrow(/timeoutMs/)
    expect(() => createOpenAiProvider({ apiKey: 'k', maxRetries: -1 })).toThrow(/maxRetries/)
  })

  it('uses a client of your own, still with the contract retries per call', async () => {
    const client = new OpenAI({ apiKey: 'own-key', baseURL: fake.url, maxRetries: 0 })
    const own = createOpenAiProvider({ client })
    fake.enqueue(errorAnswer(429), replyAnswer('through my client'))
    const completion = await own.complete({ model: 'gpt-4o-mini', messages: conversation })
    expect(completion.text).toBe('through my client')
    expect(fake.requests.map((request) => request.headers.authorization)).toEqual([
      'Bearer own-key',
      'Bearer own-key',
    ])
  })
})
