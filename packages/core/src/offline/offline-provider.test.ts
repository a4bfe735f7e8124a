import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { CompletionRequest } from '../ports/llm-provider.js'
import { supportsClassify } from '../ports/llm-provider.js'
import { createOfflineProvider, OFFLINE_NO_KNOWLEDGE_REPLY } from './offline-provider.js'

const routes = [
  { id: 'billing', description: 'Billing questions: invoices, payments and refunds' },
  { id: 'shipping', description: 'Shipping, delivery and tracking of parcels' },
  { id: 'small-talk', description: 'Anything that is not about the others' },
]

function classify(text: string, routeList = routes) {
  const provider = createOfflineProvider()
  if (!supportsClassify(provider)) throw new Error('the offline provider must classify')
  return provider.classify({ model: 'offline', text, routes: routeList })
}

function request(overrides: Partial<CompletionRequest> = {}): CompletionRequest {
  return { model: 'offline', messages: [{ role: 'user', content: 'Where is my parcel?' }], ...overrides }
}

describe('createOfflineProvider', () => {
  it("is named 'offline'", () => {
    expect(createOfflineProvider().name).toBe('offline')
  })

  describe('classify', () => {
    it("scores a route by the share of its description's words found in the message", async () => {
      // billing's words: billing, questions, invoices, payments, refunds.
      const result = await classify('I have questions about refunds for two invoices')

      expect(result).toEqual({
        routeId: 'billing',
        confidence: 3 / 5,
        usage: { inputTokens: 0, outputTokens: 0 },
      })
    })

    it('counts each description word once, however often it is repeated', async () => {
      const result = await classify('refund refund', [
        { id: 'refunds', description: 'Refund refund REFUND policy' },
      ])

      expect(result.confidence).toBe(1 / 2)
    })

    it('picks the best route', async () => {
      const result = await classify('Tracking my parcels delivery')

      expect(result.routeId).toBe('shipping')
      expect(result.confidence).toBe(3 / 4)
    })

    it('breaks ties in favour of the first route', async () => {
      const tied = [
        { id: 'first', description: 'orders returns' },
        { id: 'second', description: 'orders exchanges' },
      ]

      expect(await classify('my orders', tied)).toMatchObject({ routeId: 'first', confidence: 1 / 2 })
      expect(await classify('nothing shared', tied)).toMatchObject({ routeId: 'first', confidence: 0 })
    })

    it('ignores stop words and short words in both message and description', async () => {
      const result = await classify('What about this? Do you want it?', [
        { id: 'vague', description: 'what about this you want' },
        { id: 'real', description: 'about warranty claims' },
      ])

      expect(result).toMatchObject({ routeId: 'vague', confidence: 0 })
    })

    it('answers no route when there are no routes', async () => {
      expect(await classify('Refund please', [])).toEqual({
        routeId: null,
        confidence: 0,
        usage: { inputTokens: 0, outputTokens: 0 },
      })
    })

    it('answers a confidence between 0 and 1 for one of the routes given', async () => {
      const route = fc.record({ id: fc.string(), description: fc.string() })
      await fc.assert(
        fc.asyncProperty(fc.string(), fc.array(route, { minLength: 1 }), async (text, routeList) => {
          const result = await classify(text, routeList)
          expect(result.confidence).toBeGreaterThanOrEqual(0)
          expect(result.confidence).toBeLessThanOrEqual(1)
          expect(routeList.some((candidate) => candidate.id === result.routeId)).toBe(true)
        }),
      )
    })
  })

  describe('complete', () => {
    it('answers the first knowledge passage verbatim', async () => {
      const completion = await createOfflineProvider().complete(
        request({
          knowledge: [
            { documentId: 'shipping', text: 'Parcels arrive  within\n3 days.', score: 2 },
            { documentId: 'other', text: 'Something else.', score: 1 },
          ],
        }),
      )

      expect(completion.text).toBe('Parcels arrive  within\n3 days.')
      expect(completion.toolCalls).toEqual([])
    })

    it('says it has no information when no passage is given', async () => {
      const provider = createOfflineProvider()

      expect((await provider.complete(request())).text).toBe(OFFLINE_NO_KNOWLEDGE_REPLY)
      expect((await provider.complete(request({ knowledge: [] }))).text).toBe(
        "I don't have information about that yet.",
      )
    })

    it('never calls tools, even when tools are offered', async () => {
      const completion = await createOfflineProvider().complete(
        request({
          tools: [{ name: 'save_fact', description: 'Save a fact', parameters: { type: 'object' } }],
        }),
      )

      expect(completion.toolCalls).toEqual([])
    })

    it('answers an undecided route decision to a routing call', async () => {
      const completion = await createOfflineProvider().complete(
        request({
          responseFormat: { type: 'json_schema', jsonSchema: { name: 'route_decision', schema: {} } },
          knowledge: [{ documentId: 'doc', text: 'Not a route decision.', score: 1 }],
        }),
      )

      expect(JSON.parse(completion.text)).toEqual({ routeId: null, confidence: 0 })
      expect(completion.toolCalls).toEqual([])
    })

    it('estimates tokens as a quarter of the characters, rounded up', async () => {
      const completion = await createOfflineProvider().complete(
        request({
          messages: [
            { role: 'system', content: 'You are helpful.' },
            {
              role: 'assistant',
              content: 'Saved.',
              toolCalls: [{ id: 'call-1', name: 'save_fact', arguments: '{"key":"a"}' }],
            },
            { role: 'tool', toolCallId: 'call-1', content: 'ok' },
            { role: 'user', content: 'Hello' },
          ],
        }),
      )

      // 16 + 6 + 9 + 11 + 2 + 5 = 49 characters in; the 40-character reply out.
      expect(completion.usage).toEqual({ inputTokens: 13, outputTokens: 10 })
    })

    it('throws when the request is already aborted', async () => {
      const controller = new AbortController()
      controller.abort()

      await expect(createOfflineProvider().complete(request({ signal: controller.signal }))).rejects.toThrow()
    })
  })
})
