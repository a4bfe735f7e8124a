import type { OutboxItem, OutboxRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isUuid, timeParameter, toInteger, toIso } from '../sql-values.js'
import { sessionLockSql } from './session-lock.js'

const COLUMNS = 'message_id, session_id, company_id, integration_id, attempts, lease_token'

/** Waiting and not held by a live lease: the condition every claim re-checks on the locked row. */
const CLAIMABLE = `available_at <= $1::timestamptz AND (lease_token IS NULL OR leased_until <= $1::timestamptz)`

/**
 * The insertion of the session's head, its earliest row: only the head may be claimed, so a
 * session's messages leave in order. A LIMIT 1 subquery rather than NOT EXISTS, as in the job
 * queue: one index probe per candidate whatever the planner's statistics say.
 */
function headInsertion(sessionId: string): string {
  return `(SELECT head.insertion FROM outbox head WHERE head.session_id = ${sessionId} ORDER BY head.insertion LIMIT 1)`
}

function itemOf(row: DbRow): OutboxItem {
  return {
    messageId: String(row.message_id),
    sessionId: String(row.session_id),
    companyId: toInteger(row.company_id),
    integrationId: String(row.integration_id),
    attempts: toInteger(row.attempts),
    leaseToken: String(row.lease_token),
  }
}

function leaseEnd(now: Date, leaseMs: number): string {
  return timeParameter(new Date(now.getTime() + leaseMs))
}

export function createOutboxRepository(client: DbClient): OutboxRepository {
  return {
    async add(input) {
      // The session's lock (see session-lock.ts) makes its rows commit in insertion order, so no
      // row can appear before a head that is already being sent.
      const rows = await client.query(
        `INSERT INTO outbox (message_id, session_id, company_id, integration_id, available_at)
        SELECT $1::uuid, $2::uuid, $3, $4::bigint, $5::timestamptz FROM ${sessionLockSql('$2')}
        ON CONFLICT DO NOTHING RETURNING message_id`,
        [
          input.messageId,
          input.sessionId,
          input.companyId,
          input.integrationId,
          timeParameter(input.availableAt),
        ],
      )
      if (rows.length === 0) throw new Error(`Message ${input.messageId} is already in the outbox`)
    },

    async claim({ messageId, now, leaseMs, leaseToken }) {
      if (!isUuid(messageId)) return null
      // Concurrent claims queue on the row lock and re-check the condition on the row as the
      // winner left it, so exactly one gets it. A row seen as its session's head stays the head:
      // rows before it only ever leave, and none can be added before it (see `add`).
      const [row] = await client.query(
        `UPDATE outbox SET lease_token = $3, leased_until = $4::timestamptz
        WHERE message_id = $2::uuid AND ${CLAIMABLE} AND insertion = ${headInsertion('outbox.session_id')}
        RETURNING ${COLUMNS}`,
        [timeParameter(now), messageId, leaseToken, leaseEnd(now, leaseMs)],
      )
      return row === undefined ? null : itemOf(row)
    },

    async claimNext({ sessionId, now, leaseMs, leaseToken }) {
      if (!isUuid(sessionId)) return null
      // Claimed, held back or removed meanwhile: the row lock and the re-check answer null, and
      // whoever changed the head finds the next one itself.
      const [row] = await client.query(
        `UPDATE outbox SET lease_token = $3, leased_until = $4::timestamptz
        WHERE message_id = (
          SELECT head.message_id FROM outbox head WHERE head.session_id = $2::uuid
          ORDER BY head.insertion LIMIT 1
        ) AND ${CLAIMABLE}
        RETURNING ${COLUMNS}`,
        [timeParameter(now), sessionId, leaseToken, leaseEnd(now, leaseMs)],
      )
      return row === undefined ? null : itemOf(row)
    },

    async claimDue({ now, limit, leaseMs, leaseToken }) {
      const count = Math.floor(limit)
      if (!(count >= 1)) return []
      // SKIP LOCKED: workers claiming at once take different messages instead of queueing. A
      // locked head is skipped, not its session's next row: that one is no head.
      const rows = await client.query(
        `UPDATE outbox SET lease_token = $2, leased_until = $3::timestamptz
        WHERE message_id IN (
          SELECT candidate.message_id FROM outbox candidate
          WHERE ${CLAIMABLE} AND candidate.insertion = ${headInsertion('candidate.session_id')}
          ORDER BY candidate.available_at, candidate.insertion
          LIMIT $4
          FOR UPDATE SKIP LOCKED
        )
        RETURNING ${COLUMNS}, available_at, insertion`,
        [timeParameter(now), leaseToken, leaseEnd(now, leaseMs), count],
      )
      return rows
        .sort(
          (left, right) =>
            Date.parse(toIso(left.available_at)) - Date.parse(toIso(right.available_at)) ||
            toInteger(left.insertion) - toInteger(right.insertion),
        )
        .map(itemOf)
    },

    async remove({ messageId, leaseToken, delivery }) {
      if (!isUuid(messageId)) return false
      // The outcome is written only for a row this claim removed; a data-modifying WITH runs
      // whether or not the outer query reads it.
      const rows = await client.query(
        `WITH removed AS (
          DELETE FROM outbox WHERE message_id = $1::uuid AND lease_token = $2 RETURNING message_id
        ), recorded AS (
          UPDATE messages SET delivery = $3 FROM removed
          WHERE $3::text IS NOT NULL AND messages.id = removed.message_id
        )
        SELECT message_id FROM removed`,
        [messageId, leaseToken, delivery ?? null],
      )
      return rows.length > 0
    },

    async retryLater({ messageId, leaseToken, attempts, availableAt }) {
      if (!isUuid(messageId)) return false
      const rows = await client.query(
        `UPDATE outbox SET attempts = $3, available_at = $4::timestamptz, lease_token = NULL, leased_until = NULL
        WHERE message_id = $1::uuid AND lease_token = $2 RETURNING message_id`,
        [messageId, leaseToken, attempts, timeParameter(availableAt)],
      )
      return rows.length > 0
    },

    async removeWaiting({ sessionId, messageIds, now }) {
      const ids = messageIds.filter(isUuid)
      if (!isUuid(sessionId) || ids.length === 0) return []
      const rows = await client.query<{ message_id: string }>(
        `DELETE FROM outbox WHERE session_id = $1::uuid AND message_id = ANY($2::uuid[])
          AND (lease_token IS NULL OR leased_until <= $3::timestamptz)
        RETURNING message_id`,
        [sessionId, ids, timeParameter(now)],
      )
      return rows.map((row) => String(row.message_id))
    },

    async removeForSession({ sessionId }) {
      if (!isUuid(sessionId)) return []
      // Claimed ones too: the session is closed, so their worker's remove or retry finds nothing.
      const rows = await client.query<{ message_id: string; insertion: unknown }>(
        'DELETE FROM outbox WHERE session_id = $1::uuid RETURNING message_id, insertion',
        [sessionId],
      )
      return rows
        .sort((left, right) => toInteger(left.insertion) - toInteger(right.insertion))
        .map((row) => String(row.message_id))
    },
  }
}
