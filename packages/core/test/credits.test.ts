import { afterEach, describe, expect, it } from 'vitest'
import { createPriceTable } from '../src/index.js'
import { type ConversationHarness, createConversationHarness, reply, route } from '../src/testing/index.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

describe('credits', () => {
  it('charges every model call, routing included, with the turn', async () => {
    harness = await createConversationHarness({
      agents: {
        reception: {
          routingModel: 'gpt-4.1-nano',
          routingConfig: { enabled: true, routes: [{ id: 'sales', agent: 'sales', description: 'sales' }] },
        },
        sales: { llmModel: 'gpt-4o' },
      },
      entry: 'reception',
      creditsUsd: 5,
    })
    harness.model.script(harness.agent('reception'), route('sales', 0.9))
    harness.model.script(harness.agent('sales'), reply('hi'))
    const customer = harness.customer()
    await customer.says('buy')

    // The scripted model reports 10 input and 5 output tokens per call.
    const prices = createPriceTable()
    const expected = [
      prices.cost('gpt-4.1-nano', { inputTokens: 10, outputTokens: 5 }),
      prices.cost('gpt-4o', { inputTokens: 10, outputTokens: 5 }),
    ]
    const usage = await harness.storage.billing.listUsage({ companyId: harness.companyId, limit: 10 })
    expect(usage.items.map((record) => [record.model, record.costUsd]).sort()).toEqual(
      [
        ['gpt-4.1-nano', expected[0]],
        ['gpt-4o', expected[1]],
      ].sort(),
    )
    const { id: sessionId } = await customer.session()
    expect(usage.items.map((record) => record.sessionId)).toEqual([sessionId, sessionId])
    const balance = await harness.storage.billing.getBalance({ companyId: harness.companyId })
    expect(balance).toBeCloseTo(5 - expected[0]! - expected[1]!, 9)
  })

  it('at zero makes no model call, stores the message, records CREDITS_EXHAUSTED and sends nothing', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', creditsUsd: 0 })
    const customer = harness.customer()
    await customer.says('hello?')
    expect(harness.model.requests).toHaveLength(0)
    expect(customer.received()).toEqual([])
    expect((await customer.messages()).map((message) => message.text)).toEqual(['hello?'])
    const session = await customer.session()
    expect(session.metadata.errors.map((error) => error.code)).toEqual(['CREDITS_EXHAUSTED'])
    expect(await harness.storage.jobs.pending({ sessionId: session.id })).toBe(0)
  })

  it('stops once a turn has used the last credit', async () => {
    harness = await createConversationHarness({
      agents: { solo: { llmModel: 'gpt-4o' } },
      entry: 'solo',
      creditsUsd: 0.00005,
    })
    harness.model.script(harness.agent('solo'), reply('the last answer'))
    const customer = harness.customer()
    await customer.says('one')
    await customer.says('two')
    expect(customer.replies()).toEqual(['the last answer'])
    expect(harness.model.requests).toHaveLength(1)
    expect(await harness.storage.billing.getBalance({ companyId: harness.companyId })).toBeLessThan(0)
  })
})
