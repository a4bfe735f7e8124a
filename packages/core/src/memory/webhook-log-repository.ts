import { WEBHOOK_LOGS_KEPT_PER_INTEGRATION } from '../domain/webhook-log.js'
import type { NewWebhookLog, WebhookLog, WebhookLogRepository } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isTimePosition, takePage } from './paging.js'
import { snapshot } from './snapshot.js'
import type { Statement, UndoLog } from './undo-log.js'

interface StoredWebhookLog {
  readonly log: WebhookLog
  readonly companyId: number
  readonly receivedAtMs: number
  /** Breaks ties between logs received in the same millisecond: the later added is newer. */
  readonly order: number
}

export interface WebhookLogTable {
  /** Each integration's kept logs, oldest first. Replaced on every write, never changed in place. */
  readonly byIntegration: Map<string, readonly StoredWebhookLog[]>
  /** The integration of every kept log, so an id is stored once. */
  readonly integrationOf: Map<string, string>
  /** Like a database sequence, not taken back by a rollback. */
  lastOrder: number
}

export function createWebhookLogTable(): WebhookLogTable {
  return { byIntegration: new Map(), integrationOf: new Map(), lastOrder: 0 }
}

function isNewer(left: StoredWebhookLog, right: StoredWebhookLog): boolean {
  return (
    left.receivedAtMs > right.receivedAtMs ||
    (left.receivedAtMs === right.receivedAtMs && left.order > right.order)
  )
}

export function createWebhookLogRepository(options: {
  webhookLogs: WebhookLogTable
  statement: Statement
}): WebhookLogRepository {
  const { webhookLogs, statement } = options

  const addOne = (log: UndoLog, input: NewWebhookLog): void => {
    if (webhookLogs.integrationOf.has(input.id)) throw new Error(`Webhook log ${input.id} already exists`)
    webhookLogs.lastOrder += 1
    const stored: StoredWebhookLog = {
      log: snapshot<WebhookLog>({
        id: input.id,
        receivedAt: input.receivedAt.toISOString(),
        httpStatus: input.httpStatus,
        outcome: input.outcome,
        reason: input.reason,
        sessionId: input.sessionId,
        messageId: input.messageId,
      }),
      companyId: input.companyId,
      receivedAtMs: input.receivedAt.getTime(),
      order: webhookLogs.lastOrder,
    }
    const kept = [...(webhookLogs.byIntegration.get(input.integrationId) ?? [])]
    // Logs nearly always arrive in time order, so the new one almost always goes last.
    let index = kept.length
    while (index > 0 && isNewer(kept[index - 1]!, stored)) index -= 1
    kept.splice(index, 0, stored)
    log.set(webhookLogs.integrationOf, input.id, input.integrationId)
    for (const dropped of kept.splice(0, Math.max(0, kept.length - WEBHOOK_LOGS_KEPT_PER_INTEGRATION))) {
      log.delete(webhookLogs.integrationOf, dropped.log.id)
    }
    log.set(webhookLogs.byIntegration, input.integrationId, kept)
  }

  return {
    add: (input) => statement((log) => addOne(log, input)),

    addMany: (inputs) =>
      statement((log) => {
        for (const input of inputs) addOne(log, input)
      }),

    list: ({ companyId, integrationId, limit, cursor }) =>
      statement(() => {
        let isAfterCursor = (_stored: StoredWebhookLog): boolean => true
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isTimePosition(position)) return emptyPage<WebhookLog>()
          const [receivedAtMs, order] = position as [number, number]
          isAfterCursor = (stored) =>
            stored.receivedAtMs < receivedAtMs ||
            (stored.receivedAtMs === receivedAtMs && stored.order < order)
        }
        const remaining = (webhookLogs.byIntegration.get(integrationId) ?? [])
          .filter((stored) => stored.companyId === companyId && isAfterCursor(stored))
          .reverse()
        const page = takePage(remaining, limit, (stored) => encodeCursor([stored.receivedAtMs, stored.order]))
        return { items: page.items.map((stored) => stored.log), nextCursor: page.nextCursor }
      }),
  }
}
