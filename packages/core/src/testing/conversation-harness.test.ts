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

  // The script is keyed by agent id; the test wrote keys, so a failure says which id is which.
  it('names the agents by their keys when the script does not fit', async () => {
    const team = await createConversationHarness({
      agents: { reception: {}, sales: {} },
      entry: 'reception',
    })
    team.model.script(team.agent('sales'), reply('never asked for'))
    const legend = `(agents: ${team.agent('reception')} is reception, ${team.agent('sales')} is sales)`

    const says = team.customer('ann').says('hi')
    await expect(says).rejects.toThrow(`no step scripted for agent ${team.agent('reception')}`)
    await expect(says).rejects.toThrow(legend)
    await expect(team.finish()).rejects.toThrow(`1 step(s) left for agent ${team.agent('sales')}`)
    await expect(team.finish()).rejects.toThrow(legend)
  })

  it('names the agents there are when a key is not one of them', async () => {
    await expect(createConversationHarness({ agents: { solo: {} }, entry: 'duo' })).rejects.toThrow(
      'harness: no agent "duo"; the agents are solo',
    )
    const team = await createConversationHarness({ agents: { a: {}, b: {} }, entry: 'a' })
    expect(() => team.agent('c')).toThrow('harness: no agent "c"; the agents are a, b')
    await team.finish()
  })
})
