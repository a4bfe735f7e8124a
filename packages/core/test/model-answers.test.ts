import { afterEach, describe, expect, it } from 'vitest'
import type { Completion } from '../src/index.js'
import { createPriceTable } from '../src/index.js'
import {
  type ConversationHarness,
  createConversationHarness,
  createScriptedModel,
  reply,
  route,
  type ScriptedModel,
} from '../src/testing/index.js'

// Whatever a provider hands back comes from outside: an OpenAI-compatible server may report any
// token counts and any content, and a provider of someone else's may pass them on as they came.

/** The scripted model, with each answer changed by `change` on its way out. */
function answering(change: (completion: Completion) => unknown): ScriptedModel {
  const scripted = createScriptedModel()
  return Object.assign(Object.create(scripted) as ScriptedModel, {
    complete: async (request: Parameters<ScriptedModel['complete']>[0]) =>
      change(await scripted.complete(request)) as Completion,
  })
}

let harness: ConversationHarness | undefined
afterEach(async () => {
  await harness?.switchboard.stop()
  harness = undefined
})

async function balanceAfterOneTurn(model: ScriptedModel): Promise<{ balance: number; replies: string[] }> {
  harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', creditsUsd: 5, model })
  model.script(harness.agent('solo'), reply('hello'))
  const customer = harness.customer()
  await customer.says('hi')
  return {
    balance: await harness.storage.billing.getBalance({ companyId: harness.companyId }),
    replies: customer.replies(),
  }
}

describe('what a model reports of its token usage', () => {
  it.each([
    ['negative counts', { inputTokens: -1_000_000_000, outputTokens: -1_000_000_000 }],
    ['counts that are not numbers', { inputTokens: 'abc', outputTokens: null }],
    ['infinite counts', { inputTokens: Number.POSITIVE_INFINITY, outputTokens: Number.NaN }],
  ])('charges nothing for %s, and the reply still goes out', async (_case, usage) => {
    const { balance, replies } = await balanceAfterOneTurn(
      answering((completion) => ({ ...completion, usage })),
    )
    expect(replies).toEqual(['hello'])
    expect(balance).toBe(5)
  })

  it('charges whole tokens, at most 10 million a call of each kind', async () => {
    const { balance, replies } = await balanceAfterOneTurn(
      answering((completion) => ({ ...completion, usage: { inputTokens: 1e300, outputTokens: 2.6 } })),
    )
    expect(replies).toEqual(['hello'])
    const cost = createPriceTable().cost('gpt-4o-mini', { inputTokens: 10_000_000, outputTokens: 3 })
    expect(balance).toBeCloseTo(5 - cost, 9)
  })
})

describe('what a model answers', () => {
  it.each([
    ['an object', { a: 1 }],
    ['an array', [{ type: 'text', text: 'hello' }]],
    ['a number', 42],
  ])(
    'takes text that is %s for a failed call: MODEL_UNAVAILABLE and the fallback reply',
    async (_case, text) => {
      const model = answering((completion) => ({ ...completion, text }))
      harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo', model })
      model.script(harness.agent('solo'), reply('hello'))
      const customer = harness.customer()
      await customer.says('hi')

      const session = await customer.session()
      expect(session.metadata.errors.map((error) => error.code)).toEqual(['MODEL_UNAVAILABLE'])
      expect(customer.replies()).toHaveLength(1)
      expect(customer.replies()[0]).not.toBe('hello')
    },
  )

  it('takes a classifier confidence outside 0 to 1 for no classification: a fallback', async () => {
    harness = await createConversationHarness({
      agents: {
        reception: {
          routingConfig: { enabled: true, routes: [{ id: 'sales', agent: 'sales', description: 'sales' }] },
        },
        sales: {},
      },
      entry: 'reception',
    })
    harness.model.script(harness.agent('reception'), route('sales', 2), reply('reception here'))
    const customer = harness.customer()
    await customer.says('buy')

    expect(await customer.activeAgent()).toBe('reception')
    expect((await customer.session()).metadata.routing).toMatchObject({ reason: 'fallback' })
    expect(customer.replies()).toEqual(['reception here'])
  })
})
