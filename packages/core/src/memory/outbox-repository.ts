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

export interface OutboxTable {
  readonly rows: Map<string, OutboxRecord>
  lastOrder: number
}

export function createOutboxTable(): OutboxTable {
  return { rows: new Map(), lastOrder: 0 }
}

function isClaimable(record: OutboxRecord, now: number): boolean {
  return record.availableAt <= now && !(record.leaseToken !== null && record.leasedUntil > now)
}

/** Each session's earliest message still in the outbox, the only one of it that may be claimed. */
function headsOf(rows: Iterable<OutboxRecord>): Map<string, OutboxRecord> {
  const heads = new Map<string, OutboxRecord>()
  for (const record of rows) {
    const head = heads.get(record.sessionId)
    if (head === undefined || record.order < head.order) heads.set(record.sessionId, record)
  }
  return heads
}

function headOf(rows: Iterable<OutboxRecord>, sessionId: string): OutboxRecord | null {
  let head: OutboxRecord | null = null
  for (const record of rows) {
    if (record.sessionId === sessionId && (head === null || record.order < head.order)) head = record
  }
  return head
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
    log.set(outbox.rows, record.messageId, {
      ...record,
      leaseToken: lease.leaseToken,
      leasedUntil: lease.now.getTime() + lease.leaseMs,
    })
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
        log.set(outbox.rows, input.messageId, {
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
      }),

    claim: ({ messageId, now, leaseMs, leaseToken }) =>
      statement((log) => {
        const record = outbox.rows.get(messageId)
        if (record === undefined || !isClaimable(record, now.getTime())) return null
        if (headOf(outbox.rows.values(), record.sessionId) !== record) return null
        return lease(log, record, { now, leaseMs, leaseToken })
      }),

    claimNext: ({ sessionId, now, leaseMs, leaseToken }) =>
      statement((log) => {
        const head = headOf(outbox.rows.values(), sessionId)
        if (head === null || !isClaimable(head, now.getTime())) return null
        return lease(log, head, { now, leaseMs, leaseToken })
      }),

    claimDue: ({ now, limit, leaseMs, leaseToken }) =>
      statement((log) => {
        const due = [...headsOf(outbox.rows.values()).values()]
          .filter((record) => isClaimable(record, now.getTime()))
          .sort((left, right) => left.availableAt - right.availableAt || left.order - right.order)
          .slice(0, Math.max(limit, 0))
        return due.map((record) => lease(log, record, { now, leaseMs, leaseToken }))
      }),

    remove: ({ messageId, leaseToken, delivery }) =>
      statement((log) => {
        if (heldBy(messageId, leaseToken) === null) return false
        log.delete(outbox.rows, messageId)
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
        return removed
      }),

    removeForSession: ({ sessionId }) =>
      statement((log) => {
        // Claimed ones too: the session is closed, so their worker's remove or retry finds nothing.
        const removed = [...outbox.rows.values()]
          .filter((record) => record.sessionId === sessionId)
          .sort((left, right) => left.order - right.order)
          .map((record) => record.messageId)
        for (const messageId of removed) log.delete(outbox.rows, messageId)
        return removed
      }),
  }
}
