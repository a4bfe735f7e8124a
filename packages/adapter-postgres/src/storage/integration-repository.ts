import type { Integration, IntegrationPatch, IntegrationRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from '../paging.js'
import { isBigintId, jsonParameter, timeParameter, toInteger, toIso } from '../sql-values.js'
import { storableJson } from '../storable-text.js'
import { lookUpEachSql } from './look-up-each.js'

const COLUMNS = `id, company_id, type, name, active, entry_agent_id, config, webhook_secret, created_at,
  updated_at`

/** Typed by the patch, so a field added to `IntegrationPatch` fails the build until stored here. */
const PATCH_COLUMNS: Record<keyof IntegrationPatch, { column: string; json: boolean }> = {
  name: { column: 'name', json: false },
  active: { column: 'active', json: false },
  entryAgentId: { column: 'entry_agent_id', json: false },
  config: { column: 'config', json: true },
  webhookSecret: { column: 'webhook_secret', json: false },
}

function integrationOf(row: DbRow): Integration {
  return {
    id: String(row.id),
    companyId: toInteger(row.company_id),
    type: String(row.type),
    name: String(row.name),
    active: row.active === true,
    entryAgentId: toInteger(row.entry_agent_id),
    config: row.config as Record<string, unknown>,
    webhookSecret: row.webhook_secret === null ? null : String(row.webhook_secret),
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  }
}

export function createIntegrationRepository(client: DbClient): IntegrationRepository {
  return {
    async create(input) {
      const [row] = await client.query(
        `INSERT INTO integrations (company_id, type, name, active, entry_agent_id, config, webhook_secret,
          created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::timestamptz, $8::timestamptz)
        RETURNING ${COLUMNS}`,
        [
          input.companyId,
          input.type,
          input.name,
          input.active,
          input.entryAgentId,
          storableJson(input.config),
          input.webhookSecret,
          timeParameter(input.at),
        ],
      )
      return integrationOf(row!)
    },

    async get({ id, companyId, lock }) {
      if (!isBigintId(id)) return null
      // FOR NO KEY UPDATE, as the edit's UPDATE takes anyway: a second edit waits and reads this one's.
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM integrations WHERE id = $1::bigint AND ($2::integer IS NULL OR company_id = $2)${
          lock === true ? ' FOR NO KEY UPDATE' : ''
        }`,
        [id, companyId ?? null],
      )
      return row === undefined ? null : integrationOf(row)
    },

    async getMany({ ids }) {
      const valid = ids.filter(isBigintId)
      if (valid.length === 0) return []
      const rows = await client.query(
        lookUpEachSql('$1', `SELECT ${COLUMNS} FROM integrations WHERE id = wanted.value::bigint`),
        [storableJson(valid)],
      )
      return rows.map(integrationOf)
    },

    async list({ companyId, limit, cursor }) {
      assertPageLimit(limit)
      let afterId = 0
      if (cursor !== undefined) {
        const position = decodeCursor(cursor)
        if (!isNumberTuple(position, 1)) return emptyPage<Integration>()
        afterId = position[0]!
      }
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM integrations WHERE company_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
        [companyId, afterId, limit + 1],
      )
      return takePage(rows, limit, integrationOf, (row) => encodeCursor([toInteger(row.id)]))
    },

    async update({ companyId, id, patch, at }) {
      if (!isBigintId(id)) return null
      const assignments = ['updated_at = $3::timestamptz']
      const parameters: unknown[] = [id, companyId, timeParameter(at)]
      for (const [field, { column, json }] of Object.entries(PATCH_COLUMNS)) {
        const value = patch[field as keyof IntegrationPatch]
        if (value === undefined) continue
        parameters.push(json ? jsonParameter(value) : value)
        assignments.push(`${column} = $${parameters.length}${json ? '::jsonb' : ''}`)
      }
      const [row] = await client.query(
        `UPDATE integrations SET ${assignments.join(', ')}
        WHERE id = $1::bigint AND company_id = $2 RETURNING ${COLUMNS}`,
        parameters,
      )
      return row === undefined ? null : integrationOf(row)
    },

    async delete({ companyId, id }) {
      if (!isBigintId(id)) return false
      const rows = await client.query(
        'DELETE FROM integrations WHERE id = $1::bigint AND company_id = $2 RETURNING id',
        [id, companyId],
      )
      return rows.length > 0
    },
  }
}
