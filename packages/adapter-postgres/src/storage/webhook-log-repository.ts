import {
  WEBHOOK_LOGS_KEPT_PER_INTEGRATION,
  type WebhookLog,
  type WebhookLogRepository,
  type WebhookOutcome,
} from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, emptyPage, encodeCursor, takePage, timeCursorPosition } from '../paging.js'
import { isBigintId, present, timeParameter, toInteger, toIso } from '../sql-values.js'
import { storableJson } from '../storable-text.js'
import type { TrimSchedule } from './trim-schedule.js'

/**
 * Entries beyond the newest `WEBHOOK_LOGS_KEPT_PER_INTEGRATION` are deleted on every
 * TRIM_EVERY-th entry of an integration (`TrimSchedule`) rather than on each: finding the oldest
 * kept entry walks that many index entries, the costliest part of logging a webhook. Until then
 * `list` leaves the surplus out, so nobody sees more than the newest ones.
 */
export const WEBHOOK_LOG_TRIM_EVERY = 64

/** The position of the oldest entry kept for integration $1; `offset` holds the number kept minus one. */
const oldestKept = (offset: string) => `SELECT received_at, insertion FROM webhook_logs
          WHERE integration_id = $1::bigint ORDER BY received_at DESC, insertion DESC OFFSET ${offset} LIMIT 1`

const COLUMNS = 'id, received_at, http_status, outcome, reason, session_id, message_id, insertion'

function webhookLogOf(row: DbRow): WebhookLog {
  return {
    id: String(row.id),
    receivedAt: toIso(row.received_at),
    httpStatus: toInteger(row.http_status),
    outcome: row.outcome as WebhookOutcome,
    ...present('reason', row.reason as string | null),
    ...present('sessionId', row.session_id as string | null),
    ...present('messageId', row.message_id as string | null),
  }
}

export function createWebhookLogRepository(client: DbClient, trims: TrimSchedule): WebhookLogRepository {
  // A statement of its own, so that it sees the entries just added.
  const trim = async (integrationId: string): Promise<void> => {
    await client.query(
      `DELETE FROM webhook_logs
      WHERE integration_id = $1::bigint AND (received_at, insertion) < (${oldestKept('$2')})`,
      [integrationId, WEBHOOK_LOGS_KEPT_PER_INTEGRATION - 1],
    )
  }

  return {
    async add(log) {
      const [added] = await client.query<{ insertion: unknown }>(
        `INSERT INTO webhook_logs (id, company_id, integration_id, received_at, http_status, outcome, reason,
          session_id, message_id)
        VALUES ($1::uuid, $2, $3::bigint, $4::timestamptz, $5, $6, $7, $8, $9)
        ON CONFLICT DO NOTHING RETURNING insertion`,
        [
          log.id,
          log.companyId,
          log.integrationId,
          timeParameter(log.receivedAt),
          log.httpStatus,
          log.outcome,
          log.reason ?? null,
          log.sessionId ?? null,
          log.messageId ?? null,
        ],
      )
      if (added === undefined) throw new Error(`Webhook log ${log.id} already exists`)
      if (trims.due(log.integrationId)) await trim(log.integrationId)
    },

    async addMany(logs) {
      if (logs.length === 0) return
      const rows = logs.map((log) => ({
        id: log.id,
        company_id: log.companyId,
        integration_id: log.integrationId,
        received_at: timeParameter(log.receivedAt),
        http_status: log.httpStatus,
        outcome: log.outcome,
        reason: log.reason ?? null,
        session_id: log.sessionId ?? null,
        message_id: log.messageId ?? null,
      }))
      // No ON CONFLICT: a repeated id fails the statement and every entry in it.
      const adding = client.query(
        `INSERT INTO webhook_logs (id, company_id, integration_id, received_at, http_status, outcome, reason,
          session_id, message_id)
        SELECT l.id, l.company_id, l.integration_id, l.received_at, l.http_status, l.outcome, l.reason,
          l.session_id, l.message_id
        FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (id uuid, company_id integer, integration_id bigint,
          received_at timestamptz, http_status integer, outcome text, reason text, session_id text,
          message_id text)) WITH ORDINALITY AS l(id, company_id, integration_id, received_at, http_status, outcome,
          reason, session_id, message_id, position)
        ORDER BY l.position`,
        [storableJson(rows)],
      )
      // Sent right behind the insert, before its answer, so that the call has sent all its
      // statements when it returns (a COMMIT may follow them at once). All entries or none are
      // added, so each integration's count is known from the entries given.
      const entries = new Map<string, number>()
      for (const log of logs) entries.set(log.integrationId, (entries.get(log.integrationId) ?? 0) + 1)
      const trimming: Promise<void>[] = []
      for (const [integrationId, count] of entries) {
        if (trims.due(integrationId, count)) trimming.push(trim(integrationId))
      }
      await Promise.all([adding, ...trimming])
    },

    async list({ companyId, integrationId, limit, cursor }) {
      assertPageLimit(limit)
      if (!isBigintId(integrationId)) return emptyPage<WebhookLog>()
      const after = cursor === undefined ? null : timeCursorPosition(cursor)
      if (cursor !== undefined && after === null) return emptyPage<WebhookLog>()
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM webhook_logs
        WHERE integration_id = $1::bigint AND company_id = $2
          AND ($3::timestamptz IS NULL OR (received_at, insertion) < ($3::timestamptz, $4::bigint))
          AND NOT (received_at, insertion) < ANY (${oldestKept('$6')})
        ORDER BY received_at DESC, insertion DESC LIMIT $5`,
        [
          integrationId,
          companyId,
          after?.[0] ?? null,
          after?.[1] ?? null,
          limit + 1,
          WEBHOOK_LOGS_KEPT_PER_INTEGRATION - 1,
        ],
      )
      return takePage(rows, limit, webhookLogOf, (row) =>
        encodeCursor([Date.parse(toIso(row.received_at)), toInteger(row.insertion)]),
      )
    },
  }
}
