import { isoTimestamp } from '../domain/iso-timestamp.js'
import type { Delivery, Message, MessageRole } from '../domain/session.js'
import {
  type MessageInsertOptions,
  type MessageRepository,
  type NewMessage,
  SessionClosedError,
} from '../ports/storage.js'
import type { SessionTable } from './session-repository.js'
import { storedText } from './snapshot.js'
import type { Statement, UndoLog } from './undo-log.js'

export interface StoredMessage {
  readonly message: Message
  /** Not part of a `Message`, but external ids are unique per integration. */
  readonly integrationId: string
}

export interface MessageTable {
  readonly rows: Map<string, StoredMessage>
  /** Each session's message ids in sequence order. */
  readonly bySession: Map<string, string[]>
  readonly byExternalId: Map<string, string>
  /** Like a database sequence, not taken back by a rollback, so order never goes backwards. */
  lastSequence: number
}

export function createMessageTable(): MessageTable {
  return { rows: new Map(), bySession: new Map(), byExternalId: new Map(), lastSequence: 0 }
}

const CONVERSATIONAL_ROLES: ReadonlySet<MessageRole> = new Set(['customer', 'agent', 'operator'])

/** The length prefix keeps the key unambiguous whatever characters the ids hold. */
function externalKey(integrationId: string, externalId: string): string {
  return `${integrationId.length}:${integrationId}${externalId}`
}

/** The fields a stored message keeps from what it was made of, new message or stored row alike. */
type MessageSource = Pick<
  Message,
  'id' | 'companyId' | 'sessionId' | 'role' | 'agentId' | 'externalId' | 'channelId' | 'transport'
>

/**
 * A frozen message row. Its fields are strings and numbers, so the literal is a full copy; the
 * optional ones are left out when absent, as `snapshot` would. Spelled out rather than spread:
 * V8 copies a spread of a frozen object, which a stored message is, on its slow path, several
 * times the cost of this literal.
 */
function frozenRow(
  source: MessageSource,
  stored: { text: string; at: string; sequence: number; delivery: Delivery | undefined },
): Message {
  const row: {
    -readonly [Key in keyof Message]: Message[Key]
  } = {
    id: source.id,
    companyId: source.companyId,
    sessionId: source.sessionId,
    role: source.role,
    text: stored.text,
    at: stored.at,
    sequence: stored.sequence,
  }
  if (source.agentId !== undefined) row.agentId = source.agentId
  if (source.externalId !== undefined) row.externalId = source.externalId
  if (source.channelId !== undefined) row.channelId = source.channelId
  if (source.transport !== undefined) row.transport = source.transport
  if (stored.delivery !== undefined) row.delivery = stored.delivery
  return Object.freeze(row)
}

/** The stored row of a new message. */
function messageRow(input: NewMessage, sequence: number): Message {
  // The text as PostgreSQL stores it; the ids stay exact, as its `storableKey` keeps them.
  const text = storedText(input.text)
  return frozenRow(input, { text, at: isoTimestamp(input.at), sequence, delivery: input.delivery })
}

/**
 * The stored message with another delivery; the outbox uses it too, to record a sender's outcome
 * with the removal.
 */
export function withDelivery(
  log: UndoLog,
  messages: MessageTable,
  stored: StoredMessage,
  delivery: Delivery,
): void {
  const { text, at, sequence } = stored.message
  const message = frozenRow(stored.message, { text, at, sequence, delivery })
  log.replace(messages.rows, message.id, { message, integrationId: stored.integrationId }, stored)
}

export function createMessageRepository(options: {
  messages: MessageTable
  sessions: SessionTable
  statement: Statement
}): MessageRepository {
  const { messages, sessions, statement } = options

  /** Refuses, before anything is stored, messages `intoOpenSession` whose session is closed. */
  const assertIntoOpenSessions = (inputs: readonly NewMessage[], insertOptions?: MessageInsertOptions) => {
    if (insertOptions?.intoOpenSession !== true) return
    for (const input of inputs) {
      if (sessions.rows.get(input.sessionId)?.session.state === 'closed')
        throw new SessionClosedError(input.sessionId)
    }
  }

  const messageOf = (id: string): Message => messages.rows.get(id)!.message
  const idsOf = (sessionId: string): readonly string[] => messages.bySession.get(sessionId) ?? []

  /** The index in `ids` of the first message whose sequence is at least `sequence`. */
  const firstAtOrAfter = (ids: readonly string[], sequence: number): number => {
    let low = 0
    let high = ids.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (messageOf(ids[middle]!).sequence < sequence) low = middle + 1
      else high = middle
    }
    return low
  }

  const insertOne = (log: UndoLog, input: NewMessage): Message => {
    if (messages.rows.has(input.id)) throw new Error(`Message ${input.id} already exists`)
    const key = input.externalId === undefined ? null : externalKey(input.integrationId, input.externalId)
    if (key !== null && messages.byExternalId.has(key)) {
      throw new Error(`Message ${input.externalId} of integration ${input.integrationId} is already stored`)
    }
    messages.lastSequence += 1
    const message = messageRow(input, messages.lastSequence)
    log.insert(messages.rows, message.id, { message, integrationId: input.integrationId })
    if (key !== null) log.insert(messages.byExternalId, key, message.id)
    const ids = messages.bySession.get(message.sessionId)
    if (ids === undefined) {
      log.insert(messages.bySession, message.sessionId, [message.id])
    } else {
      ids.push(message.id)
      log.record(() => ids.pop())
    }
    return message
  }

  return {
    insert: (input, insertOptions) =>
      statement((log) => {
        assertIntoOpenSessions([input], insertOptions)
        return insertOne(log, input)
      }),

    insertMany: (inputs, insertOptions) =>
      statement((log) => {
        assertIntoOpenSessions(inputs, insertOptions)
        return inputs.map((input) => insertOne(log, input))
      }),

    get: ({ id, companyId }) =>
      statement(() => {
        const stored = messages.rows.get(id)
        if (stored === undefined) return null
        return companyId === undefined || stored.message.companyId === companyId ? stored.message : null
      }),

    findByExternalId: ({ integrationId, externalId }) =>
      statement(() => {
        const id = messages.byExternalId.get(externalKey(integrationId, externalId))
        return id === undefined ? null : (messages.rows.get(id)?.message ?? null)
      }),

    findByExternalIds: ({ integrationId, externalIds }) =>
      statement(() => {
        const found: Message[] = []
        for (const externalId of new Set(externalIds)) {
          const id = messages.byExternalId.get(externalKey(integrationId, externalId))
          const stored = id === undefined ? undefined : messages.rows.get(id)
          if (stored !== undefined) found.push(stored.message)
        }
        return found
      }),

    list: ({ sessionId, afterSequence, limit }) =>
      statement(() => {
        const ids = idsOf(sessionId)
        const start = afterSequence === undefined ? 0 : firstAtOrAfter(ids, afterSequence + 1)
        return ids.slice(start, start + Math.max(limit, 0)).map(messageOf)
      }),

    history: ({ sessionId, currentSequence, limit }) =>
      statement(() => {
        const ids = idsOf(sessionId)
        const found: Message[] = []
        for (let index = ids.length - 1; index >= 0 && found.length < limit; index--) {
          const message = messageOf(ids[index]!)
          if (message.sequence === currentSequence) continue
          if (message.role === 'customer' && message.sequence > currentSequence) continue
          if (CONVERSATIONAL_ROLES.has(message.role) && message.delivery !== 'blocked') found.push(message)
        }
        return found.reverse()
      }),

    blockPending: ({ sessionId, roles }) =>
      statement((log) => {
        const blocked: string[] = []
        for (const id of idsOf(sessionId)) {
          const stored = messages.rows.get(id)!
          if (stored.message.delivery !== 'pending' || !roles.includes(stored.message.role)) continue
          withDelivery(log, messages, stored, 'blocked')
          blocked.push(id)
        }
        return blocked
      }),
  }
}
