import type { ApiToken, ApiTokenRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import {
  assertPageLimit,
  cursorTime,
  decodeCursor,
  emptyPage,
  encodeCursor,
  isNumberTuple,
  takePage,
} from '../paging.js'
import { isUuid, timeParameter, toInteger, toIso } from '../sql-values.js'

const COLUMNS = 'id, company_id, user_id, name, created_at'

function apiTokenOf(row: DbRow): ApiToken {
  return {
    id: String(row.id),
    companyId: toInteger(row.company_id),
    userId: String(row.user_id),
    name: String(row.name),
    createdAt: toIso(row.created_at),
  }
}

function isPosition(value: unknown): value is [number, string] {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    isNumberTuple([value[0]], 1) &&
    typeof value[1] === 'string' &&
    isUuid(value[1])
  )
}

export function createApiTokenRepository(client: DbClient): ApiTokenRepository {
  return {
    async create(input) {
      const [row] = await client.query(
        `INSERT INTO api_tokens (id, company_id, user_id, name, token_hash, created_at)
        VALUES ($1::uuid, $2, $3::uuid, $4, $5, $6::timestamptz)
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [input.id, input.companyId, input.userId, input.name, input.tokenHash, timeParameter(input.at)],
      )
      if (row === undefined) throw new Error('An API token with this id or hash exists')
      return apiTokenOf(row)
    },

    async findByHash({ tokenHash }) {
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM api_tokens WHERE token_hash = $1 AND deleted_at IS NULL`,
        [tokenHash],
      )
      return row === undefined ? null : apiTokenOf(row)
    },

    async list({ companyId, limit, cursor }) {
      assertPageLimit(limit)
      let after: [string, string] | null = null
      if (cursor !== undefined) {
        const position = decodeCursor(cursor)
        const time = isPosition(position) ? cursorTime(position[0]) : null
        if (time === null) return emptyPage<ApiToken>()
        after = [time, (position as [number, string])[1]]
      }
      // Oldest first, then by id: uuid order is the order of the lower-case text, as in memory.
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM api_tokens
        WHERE company_id = $1 AND deleted_at IS NULL
          AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::uuid))
        ORDER BY created_at, id LIMIT $4`,
        [companyId, after?.[0] ?? null, after?.[1] ?? null, limit + 1],
      )
      return takePage(rows, limit, apiTokenOf, (row) =>
        encodeCursor([Date.parse(toIso(row.created_at)), String(row.id)]),
      )
    },

    async delete({ companyId, id }) {
      if (!isUuid(id)) return false
      // deleted_at is for operators, so the database clock is good enough for it.
      const rows = await client.query(
        `UPDATE api_tokens SET deleted_at = now()
        WHERE id = $1::uuid AND company_id = $2 AND deleted_at IS NULL RETURNING id`,
        [id, companyId],
      )
      return rows.length > 0
    },
  }
}
