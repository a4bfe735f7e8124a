import { createConversationHarness, reply, toolCall } from '@switchboard/core/testing'
import { expect, expectTypeOf, it } from 'vitest'
import * as mini from 'zod/mini'
import { defineTool } from '../src/index.js'

// An app's zod is rarely core's exact copy: another 4.x, `zod/v4` of zod 3.25, or zod/mini. Each
// makes schemas that are not core's `z.ZodType` (classic zod's methods, another version literal),
// though core reads them all alike. zod/mini, lacking classic's methods, stands in for them here:
// this file failed the type check before `Tool` asked only for what every zod 4 schema has.
const seen: { orderNumber: string; quantity?: number | undefined }[] = []
const order = defineTool({
  name: 'order_status',
  description: 'Look up an order by number.',
  parameters: mini.object({ orderNumber: mini.string(), quantity: mini.optional(mini.number()) }),
  execute: (order) => {
    expectTypeOf(order).toEqualTypeOf<{ orderNumber: string; quantity?: number | undefined }>()
    seen.push(order)
    return 'shipped'
  },
})

it('takes a tool whose parameters come from another zod 4 build, checks its arguments and runs it', async () => {
  const team = await createConversationHarness({ entry: 'support', tools: [order], agents: { support: {} } })
  const support = team.agent('support')
  team.model.script(
    support,
    toolCall('order_status', { orderNumber: 42 }),
    toolCall('order_status', { orderNumber: '1001' }),
    reply('Order 1001 has shipped.'),
  )
  const ann = team.customer('ann')
  await ann.says('Where is my order 1001?')

  expect(seen).toEqual([{ orderNumber: '1001' }])
  const [, second, third] = team.model.requestsFor(support, 'turn')
  expect(second?.tools?.find((tool) => tool.name === 'order_status')?.parameters).toMatchObject({
    type: 'object',
    properties: { orderNumber: { type: 'string' }, quantity: { type: 'number' } },
    required: ['orderNumber'],
  })
  expect(second?.messages.at(-1)).toMatchObject({
    role: 'tool',
    content: expect.stringContaining('invalid arguments'),
  })
  expect(third?.messages.at(-1)).toMatchObject({ role: 'tool', content: 'shipped' })
  expect(ann.replies()).toEqual(['Order 1001 has shipped.'])
  await team.finish()
})
