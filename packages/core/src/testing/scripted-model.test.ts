import { describe, expect, it } from 'vitest'
import { createScriptedModel, reply } from './scripted-model.js'

const turnOf = (agentId: number) => ({
  model: 'gpt-4o-mini',
  messages: [{ role: 'user' as const, content: 'hi' }],
  agentId,
})

describe('the scripted model', () => {
  it("names the failing call by the agent's own count and by the model's", async () => {
    const model = createScriptedModel().script(1, reply('one'), reply('two'))
    await model.complete(turnOf(1))
    await model.complete(turnOf(1))

    await expect(model.complete(turnOf(2))).rejects.toThrow(
      "scripted model: no step scripted for agent 2 (its turn call #1, the model's request #3)",
    )
    await expect(model.complete(turnOf(1))).rejects.toThrow(
      "scripted model: no step scripted for agent 1 (its turn call #3, the model's request #4)",
    )
    expect(model.problems).toHaveLength(2)
  })
})
