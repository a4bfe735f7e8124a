import { WEBHOOK_DELIVERIES_KEPT_MS, type WebhookDeliveryRepository } from '@switchboard/core'
import type { DbClient } from '../db.js'
import { isBigintId, timeParameter, toInteger } from '../sql-values.js'
import { storableKey } from '../storable-key.js'

/**
 * An integration's expired ids are deleted about every TRIM_EVERY-th record rather than on each,
 * which keeps a record to one index lookup nearly always: when its record is its first in a new
 * block of TRIM_EVERY numbers of the table's insertion counter, so at least once every TRIM_EVERY
 * records of its own, whatever other integrations draw in between (`insertion % TRIM_EVERY` alone
 * never came to an integration whose records all drew odd numbers). An expired id still stored in
 * between counts as not recorded, so when the trim runs changes no answer.
 */
const TRIM_EVERY = 64

export function createWebhookDeliveryRepository(client: DbClient): WebhookDeliveryRepository {
  return {
    async record({ integrationId, deliveryId, at }) {
      const expiredAt = timeParameter(new Date(at.getTime() - WEBHOOK_DELIVERIES_KEPT_MS))
      // The conflicting row is locked while its WHERE is checked, so of the racing callers only
      // one inserts (or takes over an expired row) and gets a row back.
      // `previous`: the insertion of the integration's newest record before this statement, whose
      // subqueries do not see the row it writes.
      const [recorded] = await client.query<{ insertion: unknown; previous: unknown }>(
        `INSERT INTO webhook_deliveries (integration_id, delivery_id, received_at)
        VALUES ($1::bigint, $2, $3::timestamptz)
        ON CONFLICT (integration_id, delivery_id) DO UPDATE
          SET received_at = EXCLUDED.received_at, insertion = EXCLUDED.insertion
          WHERE webhook_deliveries.received_at <= $4::timestamptz
        RETURNING insertion, (SELECT previous.insertion FROM webhook_deliveries previous
          WHERE previous.integration_id = $1::bigint
          ORDER BY previous.received_at DESC, previous.insertion DESC LIMIT 1) AS previous`,
        [integrationId, storableKey(deliveryId), timeParameter(at), expiredAt],
      )
      if (recorded === undefined) return false
      if (
        recorded.previous !== null &&
        Math.floor(toInteger(recorded.insertion) / TRIM_EVERY) !==
          Math.floor(toInteger(recorded.previous) / TRIM_EVERY)
      ) {
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
