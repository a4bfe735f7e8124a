import { describe, expect, it } from 'vitest'
import { createConversationHarness } from './conversation-harness.js'
import { reply } from './scripted-model.js'

describe('createConversationHarness', () => {
  it('answers from the script and finishes quietly when the script was used up exactly', async () => {
    const team = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    team.model.script(team.agent('solo'), reply('hello'))
    const ann = team.customer('ann')

    await ann.says('hi')

    expect(ann.replies()).toEqual(['hello'])
    await team.finish()
  })

  // Otherwise the customer gets the fallback reply and a test that never calls finish() passes.
  it('fails the very call whose turn met a model call with no step scripted', async () => {
    const team = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const ann = team.customer('ann')

    await expect(ann.says('hi')).rejects.toThrow(/scripted model: no step scripted for agent \d+/)
    await expect(team.finish()).rejects.toThrow(/no step scripted/)
  })

  it('fails finish() on steps left over', async () => {
    const team = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    team.model.script(team.agent('solo'), reply('hello'), reply('never asked for'))

    await team.customer('ann').says('hi')

    await expect(team.finish()).rejects.toThrow(/1 step\(s\) left for agent/)
  })
})
