import { WEBHOOK_DELIVERIES_KEPT_MS } from '../domain/webhook-log.js'
import type { WebhookDeliveryRepository } from '../ports/storage.js'
import type { Statement, UndoLog } from './undo-log.js'

export interface WebhookDeliveryTable {
  /** Per integration, the time each delivery id was recorded, in the order recorded. */
  readonly byIntegration: Map<string, Map<string, number>>
}

export function createWebhookDeliveryTable(): WebhookDeliveryTable {
  return { byIntegration: new Map() }
}

export function createWebhookDeliveryRepository(options: {
  webhookDeliveries: WebhookDeliveryTable
  statement: Statement
}): WebhookDeliveryRepository {
  const { webhookDeliveries, statement } = options

  // Ids are recorded in nearly time order, so the walk stops at the first one still kept (nearly
  // always the first it looks at, which is why every record trims); one recorded with an earlier
  // time behind it goes on a later trim, once that one has expired too.
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
        trim(log, received, expiredAtMs)
        return true
      }),

    forget: ({ integrationId, deliveryId }) =>
      statement((log) => {
        const received = webhookDeliveries.byIntegration.get(integrationId)
        if (received !== undefined) log.delete(received, deliveryId)
      }),
  }
}
