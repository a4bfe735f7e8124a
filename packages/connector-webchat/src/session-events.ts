import type { SessionState } from '@switchboard/core'
import type { MessageFrame } from './frames.js'

/**
 * What the process that knows something tells every process about a webchat session, on the
 * EventBus topic of that session; the process holding the visitor's socket turns it into frames.
 */
export type SessionEvent =
  | {
      readonly kind: 'message'
      readonly frame: MessageFrame
      /** The connection that sent this customer message; it has its ack and skips the copy. */
      readonly fromConnection?: string
    }
  | {
      readonly kind: 'typing'
      /** A turn started (on) or ended (off); off without a messageId: a job that ran no turn. */
      readonly on: boolean
      /** The customer message the turn answers: a job tried again starts the same turn again. */
      readonly messageId?: string
      /** On a turn's end: it replied, and the reply turns typing off where it arrives. */
      readonly replied?: boolean
    }
  | {
      readonly kind: 'state'
      readonly state: SessionState
      /**
       * The session's version with the change: two processes' changes may reach the bus in either
       * order, and a socket that heard a later one ignores an earlier one. Absent from a process
       * of a release before it.
       */
      readonly version?: number
    }

export function sessionTopic(sessionId: string): string {
  return `webchat:session:${sessionId}`
}

const KINDS: ReadonlySet<unknown> = new Set(['message', 'typing', 'state'])

/** Bus payloads cross processes as JSON; anything not of this shape is ignored. */
export function isSessionEvent(payload: unknown): payload is SessionEvent {
  return typeof payload === 'object' && payload !== null && KINDS.has((payload as { kind?: unknown }).kind)
}
