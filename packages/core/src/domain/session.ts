import type { AgentPathEntry } from './agent-path.js'
import type { SessionErrorCode } from './errors.js'
import type { SharedContext } from './shared-context.js'

export type SessionState = 'ongoing' | 'paused' | 'closed'

export const PAUSE_REASON_MAX = 500
export const EXTERNAL_REFERENCE_MAX = 200
export const RESUME_NOTE_MAX = 500

export interface PauseState {
  readonly pausedAt: string
  readonly reason?: string
  readonly externalReference?: string
}

export type RoutingReason = 'resolved' | 'max_depth' | 'cycle' | 'fallback'

export interface RoutingOutcome {
  readonly reason: RoutingReason
  /**
   * The depth of the classification that ended the chain: the entry agent classifies at depth 1,
   * the agent routed to at hop n at depth n + 1 (`resolved` and `max_depth`: the last hop's).
   */
  readonly depth: number
  readonly at: string
}

export interface SessionErrorRecord {
  readonly code: SessionErrorCode
  readonly message: string
  readonly agentId?: number
  readonly at: string
}

export interface SessionMetadata {
  readonly agentPath: readonly AgentPathEntry[]
  readonly sharedContext: SharedContext
  readonly routing?: RoutingOutcome
  readonly errors: readonly SessionErrorRecord[]
  /**
   * How many times the session was paused; kept after a resume, so a turn that started before a
   * pause and ends after the resume still knows its replies were cut off (`blocked`). A count,
   * not the time of the last pause: two pauses may read the same millisecond (a test's clock that
   * stands still, clocks of two processes). Absent: never paused. Not shown by the API.
   */
  readonly pauses?: number
}

/** Who the session talks to, on the channel the integration names. */
export interface Customer {
  readonly clientId: string
  readonly channelId?: string
  readonly transport?: string
}

export interface Session {
  readonly id: string
  readonly companyId: number
  readonly integrationId: string
  readonly customer: Customer
  readonly state: SessionState
  readonly activeAgentId: number
  readonly entryAgentId: number
  readonly metadata: SessionMetadata
  readonly pauseState?: PauseState
  readonly createdAt: string
  readonly updatedAt: string
  /** Bumped on every write; lets a turn notice that someone else changed the session meanwhile. */
  readonly version: number
}

export type MessageRole = 'customer' | 'agent' | 'operator' | 'system'
export type Delivery = 'pending' | 'sent' | 'failed' | 'blocked'

export interface Message {
  readonly id: string
  readonly companyId: number
  readonly sessionId: string
  readonly role: MessageRole
  readonly text: string
  readonly agentId?: number
  readonly at: string
  /** Insertion order within the whole store; message order is this, never the clock. */
  readonly sequence: number
  /** The channel's own id of an inbound message; one message per id and integration. */
  readonly externalId?: string
  /**
   * The channel a customer message came from, and the one a reply to it goes back on, whatever
   * channel the customer writes from by the time it leaves. Absent on channels
   * without one (webchat) and on operator messages, which go to the customer's latest channel.
   */
  readonly channelId?: string
  readonly transport?: string
  /** Outgoing messages only. */
  readonly delivery?: Delivery
}

/** The channel of `message`, if it has one, as fields to spread into another message. */
export function channelOf(message: Pick<Message, 'channelId' | 'transport'>): {
  channelId?: string
  transport?: string
} {
  return {
    ...(message.channelId === undefined ? {} : { channelId: message.channelId }),
    ...(message.transport === undefined ? {} : { transport: message.transport }),
  }
}

/**
 * The session as seen by whoever sends `message`: its customer addressed on the channel the message
 * belongs to, when it belongs to one.
 */
export function addressedFor(session: Session, message: Pick<Message, 'channelId' | 'transport'>): Session {
  if (message.channelId === undefined && message.transport === undefined) return session
  return { ...session, customer: { ...session.customer, ...channelOf(message) } }
}

/** Cut a text to a length limit, for failure reasons that come from outside. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text
  const characters = [...text]
  return characters.length <= max ? text : characters.slice(0, max).join('')
}

/**
 * Whether `text` is longer than `max` characters as the spec's limits count them: code points,
 * so an emoji is one (as zod counts at the edge), not the two UTF-16 units of `length`.
 */
export function exceedsCharacters(text: string, max: number): boolean {
  return text.length > max && [...text].length > max
}
