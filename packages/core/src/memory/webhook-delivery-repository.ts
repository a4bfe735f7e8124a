import { WEBHOOK_DELIVERIES_KEPT_MS } from '../domain/webhook-log.js'
import type { WebhookDeliveryRepository } from '../ports/storage.js'
import type { Statement, UndoLog } from './undo-log.js'

export interface WebhookDeliveryTable {
  /** Per integration, the time each delivery id was recorded, in the order recorded. */
  readonly byIntegration: Map<string, Map<string, number>>
  /** Per integration, its records so far; like a database sequence, not taken back by a rollback. */
  readonly recorded: Map<string, number>
}

export function createWebhookDeliveryTable(): WebhookDeliveryTable {
  return { byIntegration: new Map(), recorded: new Map() }
}

/**
 * An integration's expired ids are deleted on every TRIM_EVERY-th record of its own, as about in
 * PostgreSQL: each record would walk the holes V8 leaves of the ids deleted before (a Map is
 * walked from its start until its table is rebuilt), a cost of the ids kept on every record.
 */
const TRIM_EVERY = 64

export function createWebhookDeliveryRepository(options: {
  webhookDeliveries: WebhookDeliveryTable
  statement: Statement
}): WebhookDeliveryRepository {
  const { webhookDeliveries, statement } = options

  // Ids are recorded in nearly time order, so the walk stops at the first one still kept; one
  // recorded with an earlier time behind it goes on a later trim, once that one has expired too.
  const trim = (log: UndoLog, received: Map<string, number>, expiredAtMs: number): void => {
    for (const [deliveryId, receivedAtMs] of received) {
      if (receivedAtMs > expiredAtMs) return
      log.delete(received, deliveryId)
    }
  }

  return {
    record: ({ integrationId, deliveryId, at }) =>
      statement((log) => {
        let received = webhookDeliveries.byIntegration.get(integrationId)
        if (received === undefined) {
          received = new Map()
          log.set(webhookDeliveries.byIntegration, integrationId, received)
        }
        const expiredAtMs = at.getTime() - WEBHOOK_DELIVERIES_KEPT_MS
        const kept = received.get(deliveryId)
        if (kept !== undefined && kept > expiredAtMs) return false
        // Deleted first, so that an expired id recorded again moves to the end of the order.
        log.delete(received, deliveryId)
        log.set(received, deliveryId, at.getTime())
        const recorded = (webhookDeliveries.recorded.get(integrationId) ?? 0) + 1
        webhookDeliveries.recorded.set(integrationId, recorded)
        if (recorded % TRIM_EVERY === 0) trim(log, received, expiredAtMs)
        return true
      }),

    forget: ({ integrationId, deliveryId }) =>
      statement((log) => {
        const received = webhookDeliveries.byIntegration.get(integrationId)
        if (received !== undefined) log.delete(received, deliveryId)
      }),
  }
}
