import type { BillingRepository, UsageRecord } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, emptyPage, encodeCursor, takePage, timeCursorPosition } from '../paging.js'
import { nanosParameter, timeParameter, toAmount, toInteger, toIso } from '../sql-values.js'

const USAGE_COLUMNS = 'id, at, model, input_tokens, output_tokens, cost_usd, session_id, insertion'

function usageOf(row: DbRow): UsageRecord {
  return {
    id: String(row.id),
    at: toIso(row.at),
    model: String(row.model),
    inputTokens: toInteger(row.input_tokens),
    outputTokens: toInteger(row.output_tokens),
    costUsd: toAmount(row.cost_usd),
    sessionId: String(row.session_id),
  }
}

export function createBillingRepository(client: DbClient): BillingRepository {
  return {
    async getBalance({ companyId }) {
      const [row] = await client.query('SELECT balance_usd FROM billing_balances WHERE company_id = $1', [
        companyId,
      ])
      return row === undefined ? 0 : toAmount(row.balance_usd)
    },

    async adjust({ companyId, amountUsd, at }) {
      // One upsert, so concurrent adjustments add up instead of overwriting each other.
      await client.query(
        `INSERT INTO billing_balances (company_id, balance_usd, updated_at)
        VALUES ($1, $2::numeric / 1000000000, $3::timestamptz)
        ON CONFLICT (company_id) DO UPDATE
          SET balance_usd = billing_balances.balance_usd + excluded.balance_usd, updated_at = excluded.updated_at`,
        [companyId, nanosParameter(amountUsd), timeParameter(at)],
      )
    },

    async recordUsage(input) {
      // One statement stores the record and charges it: nothing is charged for a repeated id, and
      // nothing is half done even outside a transaction.
      const [row] = await client.query(
        `WITH recorded AS (
          INSERT INTO usage_records (id, company_id, session_id, model, input_tokens, output_tokens, cost_usd, at)
          VALUES ($1::uuid, $2, $3, $4, $5, $6, $7::numeric / 1000000000, $8::timestamptz)
          ON CONFLICT DO NOTHING
          RETURNING ${USAGE_COLUMNS}
        ), charged AS (
          INSERT INTO billing_balances (company_id, balance_usd, updated_at)
          SELECT $2, -cost_usd, at FROM recorded
          ON CONFLICT (company_id) DO UPDATE
            SET balance_usd = billing_balances.balance_usd + excluded.balance_usd, updated_at = excluded.updated_at
        )
        SELECT * FROM recorded`,
        [
          input.id,
          input.companyId,
          input.sessionId,
          input.model,
          input.inputTokens,
          input.outputTokens,
          nanosParameter(input.costUsd),
          timeParameter(input.at),
        ],
      )
      if (row === undefined) throw new Error(`Usage record ${input.id} already exists`)
      return usageOf(row)
    },

    async listUsage({ companyId, limit, cursor }) {
      assertPageLimit(limit)
      const after = cursor === undefined ? null : timeCursorPosition(cursor)
      if (cursor !== undefined && after === null) return emptyPage<UsageRecord>()
      const rows = await client.query(
        `SELECT ${USAGE_COLUMNS} FROM usage_records
        WHERE company_id = $1 AND ($2::timestamptz IS NULL OR (at, insertion) < ($2::timestamptz, $3::bigint))
        ORDER BY at DESC, insertion DESC LIMIT $4`,
        [companyId, after?.[0] ?? null, after?.[1] ?? null, limit + 1],
      )
      return takePage(rows, limit, usageOf, (row) =>
        encodeCursor([Date.parse(toIso(row.at)), toInteger(row.insertion)]),
      )
    },
  }
}
