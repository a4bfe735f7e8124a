import type { HumanTransferRepository, PendingHumanTransfer } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isUuid, present, timeParameter, toInteger } from '../sql-values.js'

const COLUMNS =
  'id, session_id, company_id, integration_id, agent_id, operator_id, group_id, system_message, pauses, lease_token'

/** None of the messages the transfer follows (its announcement) is still in the outbox. */
const MESSAGES_LEFT = `NOT EXISTS (
  SELECT 1 FROM outbox WHERE outbox.message_id = ANY(human_transfers.after_message_ids)
)`

function transferOf(row: DbRow): PendingHumanTransfer {
  return {
    id: String(row.id),
    sessionId: String(row.session_id),
    companyId: toInteger(row.company_id),
    integrationId: String(row.integration_id),
    agentId: toInteger(row.agent_id),
    ...present('operatorId', row.operator_id === null ? null : toInteger(row.operator_id)),
    ...present('groupId', row.group_id === null ? null : toInteger(row.group_id)),
    systemMessage: row.system_message === true,
    pauses: toInteger(row.pauses),
    leaseToken: String(row.lease_token),
  }
}

function leaseEnd(now: Date, leaseMs: number): string {
  return timeParameter(new Date(now.getTime() + leaseMs))
}

export function createHumanTransferRepository(client: DbClient): HumanTransferRepository {
  return {
    async add(transfer) {
      const rows = await client.query(
        `INSERT INTO human_transfers (id, company_id, session_id, integration_id, agent_id, operator_id,
          group_id, system_message, pauses, after_message_ids, lease_token, leased_until)
        VALUES ($1::uuid, $2, $3::uuid, $4::bigint, $5, $6::bigint, $7::bigint, $8, $9, $10::uuid[], $11,
          $12::timestamptz)
        ON CONFLICT DO NOTHING RETURNING id`,
        [
          transfer.id,
          transfer.companyId,
          transfer.sessionId,
          transfer.integrationId,
          transfer.agentId,
          transfer.operatorId ?? null,
          transfer.groupId ?? null,
          transfer.systemMessage,
          transfer.pauses,
          [...transfer.after],
          transfer.leaseToken,
          timeParameter(transfer.leasedUntil),
        ],
      )
      if (rows.length === 0) throw new Error(`Human transfer ${transfer.id} exists already`)
    },

    async claim({ id, now, leaseMs, leaseToken }) {
      if (!isUuid(id)) return null
      // Concurrent claims queue on the row lock and re-check the lease on the row as the winner
      // left it, so one gets it.
      const [row] = await client.query(
        `UPDATE human_transfers SET lease_token = $3, leased_until = $4::timestamptz
        WHERE id = $2::uuid AND (leased_until <= $1::timestamptz OR lease_token = $3) AND ${MESSAGES_LEFT}
        RETURNING ${COLUMNS}`,
        [timeParameter(now), id, leaseToken, leaseEnd(now, leaseMs)],
      )
      return row === undefined ? null : transferOf(row)
    },

    async claimDue({ now, limit, leaseMs, leaseToken }) {
      const count = Math.floor(limit)
      if (!(count >= 1)) return []
      // SKIP LOCKED: sweeps of several processes take different transfers instead of queueing.
      const rows = await client.query(
        `UPDATE human_transfers SET lease_token = $2, leased_until = $3::timestamptz
        WHERE id IN (
          SELECT id FROM human_transfers
          WHERE leased_until <= $1::timestamptz AND ${MESSAGES_LEFT}
          ORDER BY insertion
          LIMIT $4
          FOR UPDATE SKIP LOCKED
        )
        RETURNING ${COLUMNS}, insertion`,
        [timeParameter(now), leaseToken, leaseEnd(now, leaseMs), count],
      )
      return rows
        .sort((left, right) => toInteger(left.insertion) - toInteger(right.insertion))
        .map(transferOf)
    },

    async remove({ id, leaseToken }) {
      if (!isUuid(id)) return false
      const rows = await client.query(
        'DELETE FROM human_transfers WHERE id = $1::uuid AND lease_token = $2 RETURNING id',
        [id, leaseToken],
      )
      return rows.length > 0
    },
  }
}
