import type { AgentPathVia } from '../domain/agent-path.js'
import type { SessionErrorCode } from '../domain/errors.js'
import type { Message, SessionErrorRecord, SessionState } from '../domain/session.js'
import type { TokenUsage } from '../ports/llm-provider.js'

interface SessionEvent {
  readonly companyId: number
  readonly sessionId: string
}

/** Every runtime event, kebab-case noun-verb, with its payload. */
export interface SwitchboardEvents {
  'message-received': [SessionEvent & { readonly message: Message; readonly queued: boolean }]
  'message-created': [SessionEvent & { readonly message: Message }]
  'message-delivered': [SessionEvent & { readonly messageId: string }]
  'delivery-failed': [SessionEvent & { readonly messageId: string; readonly error: string }]
  'agent-changed': [
    SessionEvent & { readonly fromAgentId: number; readonly toAgentId: number; readonly via: AgentPathVia },
  ]
  'handoff-rejected': [
    SessionEvent & {
      readonly agentId: number
      readonly targetAgentId: number
      readonly code: SessionErrorCode
      readonly message: string
    },
  ]
  'session-state-changed': [
    SessionEvent & {
      readonly from: SessionState
      readonly to: SessionState
      /**
       * The session's version once changed: processes hear each other's changes in any order, and
       * the later of two changes has the higher version.
       */
      readonly version: number
    },
  ]
  'session-error-recorded': [SessionEvent & { readonly error: SessionErrorRecord }]
  'llm-usage': [
    SessionEvent & { readonly agentId: number; readonly model: string; readonly usage: TokenUsage },
  ]
  'turn-started': [SessionEvent & { readonly messageId: string; readonly agentId: number }]
  'turn-completed': [SessionEvent & { readonly messageId: string; readonly replied: boolean }]
  'job-failed': [
    SessionEvent & { readonly messageId: string; readonly error: string; readonly dead: boolean },
  ]
}

export type SwitchboardEventName = keyof SwitchboardEvents
