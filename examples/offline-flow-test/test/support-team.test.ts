/**
 * A shop's agent team, tested the way its developers would: a receptionist routes the first
 * message, sales qualifies the lead and hands billing questions to support. Everything runs
 * offline on the scripted model, in milliseconds.
 */
import { defineTool } from '@switchboard/core'
import {
  type ConversationHarness,
  createConversationHarness,
  handoff,
  reply,
  route,
  toolCall,
} from '@switchboard/core/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { z } from 'zod'

const orders = new Map([
  ['1001', 'shipped'],
  ['1002', 'processing'],
])

const orderStatus = defineTool({
  name: 'order_status',
  description: 'Look up the status of an order by its number.',
  parameters: z.object({ orderNumber: z.string() }),
  execute: ({ orderNumber }) => orders.get(orderNumber) ?? 'unknown order',
})

let team: ConversationHarness

beforeEach(async () => {
  team = await createConversationHarness({
    entry: 'receptionist',
    tools: [orderStatus],
    agents: {
      receptionist: {
        role: 'receptionist',
        systemPrompt: 'Greet the customer and route them.',
        routingConfig: {
          enabled: true,
          routes: [
            { id: 'buy', agent: 'sales', description: 'buying, prices, plans' },
            { id: 'help', agent: 'support', description: 'orders, delivery, problems' },
          ],
        },
      },
      sales: {
        role: 'sales',
        systemPrompt: 'Sell our plans.',
        handoff: {
          enabled: true,
          allowedTargets: ['support'],
          handoffMessageTemplate: 'Let me get a support colleague for that.',
        },
      },
      support: { role: 'support', systemPrompt: 'Solve order problems.' },
    },
  })
})

afterEach(async () => {
  // Fails the test if the script was not used up exactly.
  await team.finish()
})

describe('our support team', () => {
  it('routes a buyer to sales, which remembers the plan and hands an order question to support', async () => {
    const sales = team.agent('sales')
    const support = team.agent('support')
    team.model.script(team.agent('receptionist'), route('buy', 0.9))
    team.model.script(
      sales,
      toolCall('save_fact', { key: 'interested_in', value: 'pro plan' }),
      reply('The pro plan is 20 USD a month. Shall I sign you up?'),
      handoff(support, 'order status question'),
    )
    team.model.script(
      support,
      toolCall('order_status', { orderNumber: '1001' }),
      reply('Order 1001 has shipped.'),
    )
    const ann = team.customer('ann')

    await ann.says('What does the pro plan cost?')
    expect(await ann.activeAgent()).toBe('sales')
    expect(ann.replies()).toEqual(['The pro plan is 20 USD a month. Shall I sign you up?'])

    await ann.says('First, where is my order 1001?')
    expect(await ann.activeAgent()).toBe('support')
    expect(ann.received().map((message) => message.text)).toEqual([
      'The pro plan is 20 USD a month. Shall I sign you up?',
      'Let me get a support colleague for that.',
      'Order 1001 has shipped.',
    ])
    // Support saw what sales learned.
    const supportPrompt = team.model.requestsFor(support, 'turn')[0]?.messages[0]?.content
    expect(supportPrompt).toContain('interested_in: pro plan')
    expect(await ann.facts()).toEqual({ interested_in: 'pro plan' })
  })

  it('stays silent while an operator has the session paused', async () => {
    const support = team.agent('support')
    team.model.script(team.agent('receptionist'), route('help', 0.9))
    team.model.script(support, reply('Let me look into it.'))
    const cid = team.customer('cid')
    await cid.says('My order is late.')
    const target = { companyId: team.companyId, sessionId: (await cid.session()).id }

    expect((await team.switchboard.sessions.pause({ ...target, reason: 'refund by hand' })).isOk()).toBe(true)
    await cid.says('Hello?')
    expect((await cid.session()).state).toBe('paused')
    expect(cid.replies()).toEqual(['Let me look into it.'])

    expect((await team.switchboard.sessions.resume({ ...target, note: 'refunded' })).isOk()).toBe(true)
    team.model.script(support, reply('Your refund is on its way.'))
    await cid.says('Any news?')
    expect(cid.replies()).toEqual(['Let me look into it.', 'Your refund is on its way.'])
  })

  it('keeps an unsure classification with the receptionist', async () => {
    team.model.script(team.agent('receptionist'), route('buy', 0.2), reply('Hello! How can I help?'))
    const bob = team.customer('bob')
    await bob.says('hi')
    expect(await bob.activeAgent()).toBe('receptionist')
    expect((await bob.session()).metadata.routing?.reason).toBe('fallback')
  })
})
