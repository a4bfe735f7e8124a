import { describe, expect, it } from 'vitest'
import { type Agent, agentInputSchema, type HandoffConfig } from '../domain/agent.js'
import { resolveHumanTransferTarget } from './human-transfer.js'

function agent(id: number, kind: 'ai' | 'human', msgplatform: HandoffConfig['msgplatform']): Agent {
  const parsed = agentInputSchema.parse({ name: `agent ${id}`, kind, handoff: { msgplatform } })
  return {
    ...parsed,
    id,
    companyId: 1,
    createdAt: '2026-11-21T10:00:00.000Z',
    updatedAt: '2026-11-21T10:00:00.000Z',
  }
}

// CONTRACT §8: operator, group and system_message come as one set from the first of the reassign
// request (system message on), the calling agent's handoff.msgplatform, the human agent's own;
// none of them naming an operator or a group: the platform's default queue.
describe('where a transfer to a human goes', () => {
  const human = agent(2, 'human', { targetOperatorId: 7, targetGroupId: 3, sendSystemMessage: false })

  it('takes the reassign request as one set, with the system message on', () => {
    expect(resolveHumanTransferTarget({ human, request: { groupId: 9 } })).toEqual({
      agentId: 2,
      groupId: 9,
      systemMessage: true,
    })
  })

  it('takes the calling agent’s set before the human agent’s, nothing mixed in from the other', () => {
    const caller = agent(1, 'ai', { targetOperatorId: 5, sendSystemMessage: true })
    expect(resolveHumanTransferTarget({ human, caller })).toEqual({
      agentId: 2,
      operatorId: 5,
      systemMessage: true,
    })
  })

  it('takes the human agent’s own set when the request and the caller name no operator or group', () => {
    const caller = agent(1, 'ai', { sendSystemMessage: true })
    expect(resolveHumanTransferTarget({ human, caller, request: {} })).toEqual({
      agentId: 2,
      operatorId: 7,
      groupId: 3,
      systemMessage: false,
    })
  })

  it('goes to the platform’s default queue when no source names an operator or a group', () => {
    const caller = agent(1, 'ai', { sendSystemMessage: false })
    const queue = agent(3, 'human', { sendSystemMessage: true })
    expect(resolveHumanTransferTarget({ human: queue, caller })).toEqual({ agentId: 3, systemMessage: false })
    expect(resolveHumanTransferTarget({ human: queue })).toEqual({ agentId: 3, systemMessage: true })
  })
})
