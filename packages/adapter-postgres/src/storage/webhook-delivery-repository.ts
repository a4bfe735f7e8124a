import { WEBHOOK_DELIVERIES_KEPT_MS, type WebhookDeliveryRepository } from '@switchboard/core'
import type { DbClient } from '../db.js'
import { isBigintId, timeParameter } from '../sql-values.js'
import { storableKey } from '../storable-key.js'
import type { TrimSchedule } from './trim-schedule.js'

/**
 * An integration's expired ids are deleted on every TRIM_EVERY-th record of the integration
 * (`TrimSchedule`) rather than on each, which keeps a record to one index lookup nearly always.
 * An expired id still stored in between counts as not recorded, so when the trim runs changes no
 * answer.
 */
export const WEBHOOK_DELIVERY_TRIM_EVERY = 64

export function createWebhookDeliveryRepository(
  client: DbClient,
  trims: TrimSchedule,
): WebhookDeliveryRepository {
  return {
    async record({ integrationId, deliveryId, at }) {
      const expiredAt = timeParameter(new Date(at.getTime() - WEBHOOK_DELIVERIES_KEPT_MS))
      // The conflicting row is locked while its WHERE is checked, so of the racing callers only
      // one inserts (or takes over an expired row) and gets a row back.
      const [recorded] = await client.query<{ insertion: unknown }>(
        `INSERT INTO webhook_deliveries (integration_id, delivery_id, received_at)
        VALUES ($1::bigint, $2, $3::timestamptz)
        ON CONFLICT (integration_id, delivery_id) DO UPDATE
          SET received_at = EXCLUDED.received_at, insertion = EXCLUDED.insertion
          WHERE webhook_deliveries.received_at <= $4::timestamptz
        RETURNING insertion`,
        [integrationId, storableKey(deliveryId), timeParameter(at), expiredAt],
      )
      if (recorded === undefined) return false
      if (trims.due(integrationId)) {
        await client.query(
          `DELETE FROM webhook_deliveries
          WHERE integration_id = $1::bigint AND received_at <= $2::timestamptz`,
          [integrationId, expiredAt],
        )
      }
      return true
    },

    async forget({ integrationId, deliveryId }) {
      if (!isBigintId(integrationId)) return
      await client.query(
        'DELETE FROM webhook_deliveries WHERE integration_id = $1::bigint AND delivery_id = $2',
        [integrationId, storableKey(deliveryId)],
      )
    },
  }
}
