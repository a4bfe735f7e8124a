import type { Agent } from '../domain/agent.js'
import type { SessionErrorCode } from '../domain/errors.js'

/** At most this many handoffs answer one customer message; the next one is rejected. */
export const MAX_HANDOFFS_PER_MESSAGE = 5

export type HandoffDecision =
  | { readonly kind: 'rejected'; readonly code: SessionErrorCode; readonly message: string }
  | { readonly kind: 'agent'; readonly target: Agent }
  | { readonly kind: 'human'; readonly target: Agent }

/** Pure: whether `caller` may hand the session to `targetAgentId` now, and how. */
export function decideHandoff(options: {
  caller: Agent
  targetAgentId: number
  target: Agent | null
  handoffsSoFar: number
  humanTransferSupported: boolean
}): HandoffDecision {
  const { caller, targetAgentId, target } = options
  const rejected = (code: SessionErrorCode, message: string): HandoffDecision => ({
    kind: 'rejected',
    code,
    message,
  })

  if (options.handoffsSoFar >= MAX_HANDOFFS_PER_MESSAGE) {
    return rejected(
      'HANDOFF_NOT_ALLOWED',
      `at most ${MAX_HANDOFFS_PER_MESSAGE} handoffs per customer message; answer the customer yourself`,
    )
  }
  if (!caller.handoff.enabled) {
    return rejected(
      'HANDOFF_NOT_ALLOWED',
      `agent ${caller.id} has handoff disabled; answer the customer yourself`,
    )
  }
  if (targetAgentId === caller.id) {
    return rejected('HANDOFF_NOT_ALLOWED', 'an agent cannot hand off to itself')
  }
  if (!caller.handoff.allowedTargets.includes(targetAgentId)) {
    const allowed = caller.handoff.allowedTargets.join(', ') || 'none'
    return rejected(
      'HANDOFF_NOT_ALLOWED',
      `agent ${targetAgentId} is not in allowedTargets of agent ${caller.id} (allowed: ${allowed})`,
    )
  }
  if (target === null) {
    return rejected('HANDOFF_NOT_ALLOWED', `agent ${targetAgentId} does not exist`)
  }
  if (target.kind === 'human') {
    if (!options.humanTransferSupported) {
      return rejected(
        'HUMAN_TRANSFER_UNSUPPORTED',
        'this channel cannot transfer the conversation to a human',
      )
    }
    return { kind: 'human', target }
  }
  return { kind: 'agent', target }
}

/** The text sent to the customer before a handoff, or null when nothing is announced. */
export function handoffAnnouncement(caller: Agent): string | null {
  const { announceHandoff, handoffMessageTemplate } = caller.handoff
  return announceHandoff && handoffMessageTemplate.trim() !== '' ? handoffMessageTemplate : null
}
