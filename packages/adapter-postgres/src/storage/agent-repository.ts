import type {
  Agent,
  AgentKind,
  AgentPatch,
  AgentRepository,
  HandoffConfig,
  RoutingConfig,
} from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from '../paging.js'
import { isIntegerId, jsonParameter, present, timeParameter, toInteger, toIso } from '../sql-values.js'
import { storableJson } from '../storable-text.js'
import { lookUpEachSql } from './look-up-each.js'

const COLUMNS = `id, company_id, name, role, kind, system_prompt, llm_model, routing_model, routing_config,
  max_depth, handoff, fallback_reply, created_at, updated_at`

/**
 * Each patchable field's column and whether it holds JSON. Typed by the patch, so a field added
 * to `AgentPatch` fails the build until it is stored here. A `null` in the patch stores NULL, which
 * reads back as an absent role, routing model or routing config and as a null fallback reply:
 * the memory storage's "null removes the field" for the first three.
 */
const PATCH_COLUMNS: Record<keyof AgentPatch, { column: string; json: boolean }> = {
  name: { column: 'name', json: false },
  role: { column: 'role', json: false },
  kind: { column: 'kind', json: false },
  systemPrompt: { column: 'system_prompt', json: false },
  llmModel: { column: 'llm_model', json: false },
  routingModel: { column: 'routing_model', json: false },
  routingConfig: { column: 'routing_config', json: true },
  maxDepth: { column: 'max_depth', json: false },
  handoff: { column: 'handoff', json: true },
  fallbackReply: { column: 'fallback_reply', json: false },
}

function agentOf(row: DbRow): Agent {
  return {
    id: toInteger(row.id),
    companyId: toInteger(row.company_id),
    name: String(row.name),
    ...present('role', row.role as string | null),
    kind: row.kind as AgentKind,
    systemPrompt: String(row.system_prompt),
    llmModel: String(row.llm_model),
    ...present('routingModel', row.routing_model as string | null),
    ...present('routingConfig', row.routing_config as RoutingConfig | null),
    maxDepth: toInteger(row.max_depth),
    handoff: row.handoff as HandoffConfig,
    fallbackReply: row.fallback_reply === null ? null : String(row.fallback_reply),
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
  }
}

/**
 * FOR KEY SHARE conflicts with a delete's FOR UPDATE (and the DELETE), not with itself nor with an
 * edit of the agent (an UPDATE that changes no key): agents naming each other are edited at once.
 * An edit's FOR NO KEY UPDATE (what its UPDATE takes anyway, taken at its read) conflicts with
 * another edit and the delete only: a second PATCH reads what the first wrote instead of merging
 * into the same stale copy.
 */
const LOCKING = {
  none: '',
  share: ' FOR KEY SHARE',
  edit: ' FOR NO KEY UPDATE',
  update: ' FOR UPDATE',
} as const

export function createAgentRepository(client: DbClient): AgentRepository {
  return {
    async create(input) {
      const at = timeParameter(input.at)
      const [row] = await client.query(
        `INSERT INTO agents (company_id, name, role, kind, system_prompt, llm_model, routing_model,
          routing_config, max_depth, handoff, fallback_reply, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10::jsonb, $11, $12::timestamptz, $12::timestamptz)
        RETURNING ${COLUMNS}`,
        [
          input.companyId,
          input.name,
          input.role ?? null,
          input.kind,
          input.systemPrompt,
          input.llmModel,
          input.routingModel ?? null,
          jsonParameter(input.routingConfig),
          input.maxDepth,
          jsonParameter(input.handoff),
          input.fallbackReply,
          at,
        ],
      )
      return agentOf(row!)
    },

    async get({ companyId, id, lock }) {
      if (!isIntegerId(id)) return null
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM agents WHERE id = $1 AND company_id = $2${LOCKING[lock ?? 'none']}`,
        [id, companyId],
      )
      return row === undefined ? null : agentOf(row)
    },

    async getMany({ companyId, ids, lock }) {
      const wanted = [...new Set(ids)].filter(isIntegerId)
      if (wanted.length === 0) return []
      const rows = await client.query(
        lookUpEachSql(
          '$2',
          `SELECT ${COLUMNS} FROM agents WHERE company_id = $1 AND id = wanted.value::integer`,
          LOCKING[lock ?? 'none'],
        ),
        [companyId, storableJson(wanted)],
      )
      return rows.map(agentOf)
    },

    async list({ companyId, limit, cursor }) {
      assertPageLimit(limit)
      let afterId = 0
      if (cursor !== undefined) {
        const position = decodeCursor(cursor)
        if (!isNumberTuple(position, 1)) return emptyPage<Agent>()
        afterId = position[0]!
      }
      // A bigint parameter, so that a forged position past the integer column is after every row
      // rather than a failed cast.
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM agents WHERE company_id = $1 AND id > $2::bigint ORDER BY id LIMIT $3`,
        [companyId, afterId, limit + 1],
      )
      return takePage(rows, limit, agentOf, (row) => encodeCursor([toInteger(row.id)]))
    },

    async update({ companyId, id, patch, at }) {
      if (!isIntegerId(id)) return null
      const assignments = ['updated_at = $3::timestamptz']
      const parameters: unknown[] = [id, companyId, timeParameter(at)]
      for (const [field, { column, json }] of Object.entries(PATCH_COLUMNS)) {
        const value = patch[field as keyof AgentPatch]
        if (value === undefined) continue
        parameters.push(json ? jsonParameter(value) : value)
        assignments.push(`${column} = $${parameters.length}${json ? '::jsonb' : ''}`)
      }
      const [row] = await client.query(
        `UPDATE agents SET ${assignments.join(', ')} WHERE id = $1 AND company_id = $2 RETURNING ${COLUMNS}`,
        parameters,
      )
      return row === undefined ? null : agentOf(row)
    },

    async delete({ companyId, id }) {
      if (!isIntegerId(id)) return false
      const rows = await client.query('DELETE FROM agents WHERE id = $1 AND company_id = $2 RETURNING id', [
        id,
        companyId,
      ])
      return rows.length > 0
    },

    async isReferenced({ companyId, id }) {
      if (!isIntegerId(id)) return false
      // Handoff targets and route targets count whether or not handoff or routing is enabled,
      // as core's referencedAgentIds() counts them.
      const [row] = await client.query<{ referenced: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM integrations WHERE company_id = $1 AND entry_agent_id = $2)
          OR EXISTS (
            SELECT 1 FROM agents
            WHERE company_id = $1 AND id <> $2
              AND (handoff -> 'allowedTargets' @> to_jsonb($2::integer)
                OR routing_config -> 'routes' @> jsonb_build_array(jsonb_build_object('agentId', $2::integer)))
          ) AS referenced`,
        [companyId, id],
      )
      return row?.referenced === true
    },
  }
}
