import type { Agent } from '../domain/agent.js'

/** Where a transfer to a human goes on the platform; no operator or group: its default queue. */
export interface HumanTransferTarget {
  readonly agentId: number
  readonly operatorId?: number
  readonly groupId?: number
  readonly systemMessage: boolean
}

/**
 * Operator, group and system message come as one set from the first source that names an
 * operator or a group (CONTRACT §8): the operator's request, then the calling agent's
 * `handoff.msgplatform`, then the human agent's own.
 */
export function resolveHumanTransferTarget(options: {
  human: Agent
  caller?: Agent | undefined
  request?: { operatorId?: number | undefined; groupId?: number | undefined } | undefined
}): HumanTransferTarget {
  const { human, caller, request } = options
  const named = (operatorId?: number, groupId?: number) => operatorId !== undefined || groupId !== undefined
  const target = (operatorId: number | undefined, groupId: number | undefined, systemMessage: boolean) => ({
    agentId: human.id,
    ...(operatorId === undefined ? {} : { operatorId }),
    ...(groupId === undefined ? {} : { groupId }),
    systemMessage,
  })

  if (request !== undefined && named(request.operatorId, request.groupId)) {
    return target(request.operatorId, request.groupId, true)
  }
  for (const agent of [caller, human]) {
    const platform = agent?.handoff.msgplatform
    if (platform !== undefined && named(platform.targetOperatorId, platform.targetGroupId)) {
      return target(platform.targetOperatorId, platform.targetGroupId, platform.sendSystemMessage)
    }
  }
  return target(undefined, undefined, (caller ?? human).handoff.msgplatform.sendSystemMessage)
}
