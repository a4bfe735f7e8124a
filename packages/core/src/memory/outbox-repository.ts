import type { OutboxItem, OutboxRepository } from '../ports/storage.js'
import { type MessageTable, withDelivery } from './message-repository.js'
import type { Statement, UndoLog } from './undo-log.js'

interface OutboxRecord {
  readonly messageId: string
  readonly sessionId: string
  readonly companyId: number
  readonly integrationId: string
  readonly attempts: number
  readonly availableAt: number
  readonly leaseToken: string | null
  readonly leasedUntil: number
  /** Insertion order: a session's messages leave in it, and it breaks ties between due times. */
  readonly order: number
}

/**
 * One session's message ids in the order they were added; those before `start` have left. The
 * head is the first id from `start` on still in the table (a message behind the head may leave
 * first, removed while waiting), so finding it costs the session's removed messages once each,
 * not a walk over every session's.
 */
interface SessionQueue {
  ids: string[]
  start: number
}

export interface OutboxTable {
  readonly rows: Map<string, OutboxRecord>
  /** The queue of every session with a message in the outbox. */
  readonly bySession: Map<string, SessionQueue>
  lastOrder: number
}

export function createOutboxTable(): OutboxTable {
  return { rows: new Map(), bySession: new Map(), lastOrder: 0 }
}

function isClaimable(record: OutboxRecord, now: number): boolean {
  return record.availableAt <= now && !(record.leaseToken !== null && record.leasedUntil > now)
}

/** The session's earliest message still in the outbox, the only one of it that may be claimed. */
function headOf(outbox: OutboxTable, sessionId: string): OutboxRecord | null {
  const queue = outbox.bySession.get(sessionId)
  if (queue === undefined) return null
  for (let index = queue.start; index < queue.ids.length; index++) {
    const record = outbox.rows.get(queue.ids[index]!)
    if (record !== undefined) return record
  }
  return null
}

/**
 * After removals from the session's queue: moves its start past the ids that left, and drops the
 * queue once empty, or its left part once that is most of it, so a session that never empties
 * keeps no more ids than it has waiting.
 */
function compact(log: UndoLog, outbox: OutboxTable, sessionId: string): void {
  const queue = outbox.bySession.get(sessionId)
  if (queue === undefined) return
  const { ids, start } = queue
  let next = start
  while (next < ids.length && !outbox.rows.has(ids[next]!)) next += 1
  if (next === start) return
  log.record(() => {
    queue.ids = ids
    queue.start = start
  })
  if (next === ids.length) {
    log.remove(outbox.bySession, sessionId, queue)
  } else if (next > ids.length / 2) {
    queue.ids = ids.slice(next)
    queue.start = 0
  } else {
    queue.start = next
  }
}

export function createOutboxRepository(options: {
  outbox: OutboxTable
  /** The messages whose delivery `remove` records. */
  messages: MessageTable
  statement: Statement
}): OutboxRepository {
  const { outbox, messages, statement } = options

  const lease = (
    log: UndoLog,
    record: OutboxRecord,
    lease: { now: Date; leaseMs: number; leaseToken: string },
  ): OutboxItem => {
    const leased = {
      ...record,
      leaseToken: lease.leaseToken,
      leasedUntil: lease.now.getTime() + lease.leaseMs,
    }
    log.replace(outbox.rows, record.messageId, leased, record)
    // Strings and numbers of our own record: nothing to copy, only to freeze.
    return Object.freeze<OutboxItem>({
      messageId: record.messageId,
      sessionId: record.sessionId,
      companyId: record.companyId,
      integrationId: record.integrationId,
      attempts: record.attempts,
      leaseToken: lease.leaseToken,
    })
  }

  const heldBy = (messageId: string, leaseToken: string): OutboxRecord | null => {
    const record = outbox.rows.get(messageId)
    return record !== undefined && record.leaseToken === leaseToken ? record : null
  }

  return {
    add: (input) =>
      statement((log) => {
        if (outbox.rows.has(input.messageId))
          throw new Error(`Message ${input.messageId} is already in the outbox`)
        outbox.lastOrder += 1
        log.insert(outbox.rows, input.messageId, {
          messageId: input.messageId,
          sessionId: input.sessionId,
          companyId: input.companyId,
          integrationId: input.integrationId,
          attempts: 0,
          availableAt: input.availableAt.getTime(),
          leaseToken: null,
          leasedUntil: 0,
          order: outbox.lastOrder,
        })
        const queue = outbox.bySession.get(input.sessionId)
        if (queue === undefined) {
          log.insert(outbox.bySession, input.sessionId, { ids: [input.messageId], start: 0 })
        } else {
          queue.ids.push(input.messageId)
          const { ids } = queue
          log.record(() => ids.pop())
        }
      }),

    claim: ({ messageId, now, leaseMs, leaseToken }) =>
      statement((log) => {
        const record = outbox.rows.get(messageId)
        if (record === undefined || !isClaimable(record, now.getTime())) return null
        if (headOf(outbox, record.sessionId) !== record) return null
        return lease(log, record, { now, leaseMs, leaseToken })
      }),

    claimNext: ({ sessionId, now, leaseMs, leaseToken }) =>
      statement((log) => {
        const head = headOf(outbox, sessionId)
        if (head === null || !isClaimable(head, now.getTime())) return null
        return lease(log, head, { now, leaseMs, leaseToken })
      }),

    claimDue: ({ now, limit, leaseMs, leaseToken }) =>
      statement((log) => {
        const due = [...outbox.bySession.keys()]
          .map((sessionId) => headOf(outbox, sessionId))
          .filter((record): record is OutboxRecord => record !== null && isClaimable(record, now.getTime()))
          .sort((left, right) => left.availableAt - right.availableAt || left.order - right.order)
          .slice(0, Math.max(limit, 0))
        return due.map((record) => lease(log, record, { now, leaseMs, leaseToken }))
      }),

    remove: ({ messageId, leaseToken, delivery }) =>
      statement((log) => {
        const record = heldBy(messageId, leaseToken)
        if (record === null) return false
        log.remove(outbox.rows, messageId, record)
        compact(log, outbox, record.sessionId)
        if (delivery !== undefined) {
          const stored = messages.rows.get(messageId)
          if (stored !== undefined) withDelivery(log, messages, stored, delivery)
        }
        return true
      }),

    retryLater: ({ messageId, leaseToken, attempts, availableAt }) =>
      statement((log) => {
        const record = heldBy(messageId, leaseToken)
        if (record === null) return false
        log.set(outbox.rows, messageId, {
          ...record,
          attempts,
          availableAt: availableAt.getTime(),
          leaseToken: null,
          leasedUntil: 0,
        })
        return true
      }),

    removeWaiting: ({ sessionId, messageIds, now }) =>
      statement((log) => {
        const removed: string[] = []
        for (const messageId of messageIds) {
          const record = outbox.rows.get(messageId)
          if (record === undefined || record.sessionId !== sessionId) continue
          if (record.leaseToken !== null && record.leasedUntil > now.getTime()) continue
          log.delete(outbox.rows, messageId)
          removed.push(messageId)
        }
        compact(log, outbox, sessionId)
        return removed
      }),

    removeForSession: ({ sessionId }) =>
      statement((log) => {
        // Claimed ones too: the session is closed, so their worker's remove or retry finds nothing.
        const queue = outbox.bySession.get(sessionId)
        if (queue === undefined) return []
        const removed = queue.ids.slice(queue.start).filter((messageId) => outbox.rows.has(messageId))
        for (const messageId of removed) log.delete(outbox.rows, messageId)
        compact(log, outbox, sessionId)
        return removed
      }),
  }
}
