import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { defineTool, type Tool } from './tool.js'
import { createToolRegistry } from './tool-registry.js'

const lookUp = defineTool({
  name: 'order_status',
  description: 'Look up an order.',
  parameters: z.object({ orderNumber: z.string() }),
  execute: async () => 'shipped',
})

describe('createToolRegistry', () => {
  it('declares a tool with the JSON schema of its parameters, after the built-in tools', () => {
    const definitions = createToolRegistry([lookUp]).definitions()

    expect(definitions.map((definition) => definition.name)).toEqual([
      'save_fact',
      'append_journey',
      'handoff_to_agent',
      'order_status',
    ])
    expect(definitions[3]?.parameters).toMatchObject({
      type: 'object',
      properties: { orderNumber: { type: 'string' } },
      required: ['orderNumber'],
    })
  })

  it.each([
    ['a name taken by a built-in tool', { ...lookUp, name: 'save_fact' }, /already registered/],
    ['a name with a space', { ...lookUp, name: 'order status' }, /must be 1 to 64 letters/],
    // What a zod 3 schema, or any other, looks like to zod 4: no `_zod` inside.
    [
      'parameters that are no zod 4 schema',
      { ...lookUp, parameters: { parse: () => ({}) } },
      /tool "order_status": parameters must be a zod 4 schema/,
    ],
  ])('refuses %s with a TypeError that says so', (_case, tool, message) => {
    expect(() => createToolRegistry([tool as Tool])).toThrow(TypeError)
    expect(() => createToolRegistry([tool as Tool])).toThrow(message)
  })
})
