import type { Delivery, Message, MessageRepository, MessageRole, NewMessage } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isBigintId, isUuid, present, timeParameter, toInteger, toIso } from '../sql-values.js'
import { keyFromStorage, storableKey, storableKeys } from '../storable-key.js'
import { storableJson } from '../storable-text.js'
import { lookUpEachSql } from './look-up-each.js'
import { sessionLockSql, sessionLocksSql } from './session-lock.js'

const COLUMNS =
  'id, company_id, session_id, role, text, agent_id, at, sequence, external_id, channel_id, transport, delivery'

function messageOf(row: DbRow): Message {
  return {
    id: String(row.id),
    companyId: toInteger(row.company_id),
    sessionId: String(row.session_id),
    role: row.role as MessageRole,
    text: String(row.text),
    ...present('agentId', row.agent_id === null ? null : toInteger(row.agent_id)),
    at: toIso(row.at),
    sequence: toInteger(row.sequence),
    ...present('externalId', row.external_id === null ? null : keyFromStorage(String(row.external_id))),
    ...present('channelId', row.channel_id === null ? null : keyFromStorage(String(row.channel_id))),
    ...present('transport', row.transport === null ? null : keyFromStorage(String(row.transport))),
    ...present('delivery', row.delivery as Delivery | null),
  }
}

/** A message as one object of `insertMany`'s JSON array, its fields named as the columns. */
function rowOf(input: NewMessage): Record<string, unknown> {
  return {
    id: input.id,
    company_id: input.companyId,
    session_id: input.sessionId,
    integration_id: input.integrationId,
    role: input.role,
    text: input.text,
    agent_id: input.agentId ?? null,
    at: timeParameter(input.at),
    external_id: input.externalId === undefined ? null : storableKey(input.externalId),
    channel_id: input.channelId === undefined ? null : storableKey(input.channelId),
    transport: input.transport === undefined ? null : storableKey(input.transport),
    delivery: input.delivery ?? null,
  }
}

export function createMessageRepository(client: DbClient): MessageRepository {
  return {
    async insertMany(inputs) {
      if (inputs.length === 0) return []
      // No ON CONFLICT: a conflict fails the statement, so none of the messages is stored.
      const rows = await client.query(
        `INSERT INTO messages (id, company_id, session_id, integration_id, role, text, agent_id, at, external_id,
          channel_id, transport, delivery)
        SELECT m.id, m.company_id, m.session_id, m.integration_id, m.role, m.text, m.agent_id, m.at, m.external_id,
          m.channel_id, m.transport, m.delivery
        FROM ${sessionLocksSql('$1')},
          ROWS FROM (jsonb_to_recordset($1::jsonb) AS (id uuid, company_id integer, session_id uuid,
            integration_id bigint, role text, text text, agent_id integer, at timestamptz, external_id text,
            channel_id text, transport text, delivery text)) WITH ORDINALITY AS m(id, company_id, session_id,
            integration_id, role, text, agent_id, at, external_id, channel_id, transport, delivery, position)
        ORDER BY m.position
        RETURNING ${COLUMNS}`,
        [storableJson(inputs.map(rowOf))],
      )
      const byId = new Map(rows.map((row) => [String(row.id), row]))
      return inputs.map((input) => messageOf(byId.get(input.id)!))
    },

    async insert(input) {
      const [row] = await client.query(
        `INSERT INTO messages (id, company_id, session_id, integration_id, role, text, agent_id, at, external_id,
          channel_id, transport, delivery)
        SELECT $1::uuid, $2, $3::uuid, $4::bigint, $5, $6, $7, $8::timestamptz, $9, $10, $11, $12
        FROM ${sessionLockSql('$3')}
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [
          input.id,
          input.companyId,
          input.sessionId,
          input.integrationId,
          input.role,
          input.text,
          input.agentId ?? null,
          timeParameter(input.at),
          input.externalId === undefined ? null : storableKey(input.externalId),
          input.channelId === undefined ? null : storableKey(input.channelId),
          input.transport === undefined ? null : storableKey(input.transport),
          input.delivery ?? null,
        ],
      )
      if (row === undefined) {
        throw new Error(
          input.externalId === undefined
            ? `Message ${input.id} already exists`
            : `Message ${input.id} exists, or message ${input.externalId} of integration ${input.integrationId} is already stored`,
        )
      }
      return messageOf(row)
    },

    async get({ id, companyId }) {
      if (!isUuid(id)) return null
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM messages WHERE id = $1::uuid AND ($2::integer IS NULL OR company_id = $2)`,
        [id, companyId ?? null],
      )
      return row === undefined ? null : messageOf(row)
    },

    async findByExternalId({ integrationId, externalId }) {
      if (!isBigintId(integrationId)) return null
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM messages
        WHERE integration_id = $1::bigint AND external_id = $2`,
        [integrationId, storableKey(externalId)],
      )
      return row === undefined ? null : messageOf(row)
    },

    async findByExternalIds({ integrationId, externalIds }) {
      if (!isBigintId(integrationId) || externalIds.length === 0) return []
      const rows = await client.query(
        lookUpEachSql(
          '$2',
          `SELECT ${COLUMNS} FROM messages WHERE integration_id = $1::bigint AND external_id = wanted.value`,
        ),
        [integrationId, storableKeys(externalIds)],
      )
      return rows.map(messageOf)
    },

    async list({ sessionId, afterSequence, limit }) {
      if (!isUuid(sessionId) || limit <= 0) return []
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM messages
        WHERE session_id = $1::uuid AND ($2::bigint IS NULL OR sequence > $2)
        ORDER BY sequence LIMIT $3`,
        [sessionId, afterSequence ?? null, Math.floor(limit)],
      )
      return rows.map(messageOf)
    },

    async history({ sessionId, currentSequence, limit }) {
      if (!isUuid(sessionId) || limit <= 0) return []
      const rows = await client.query(
        `SELECT * FROM (
          SELECT ${COLUMNS} FROM messages
          WHERE session_id = $1::uuid
            AND sequence <> $2
            AND NOT (role = 'customer' AND sequence > $2)
            AND role IN ('customer', 'agent', 'operator')
            AND delivery IS DISTINCT FROM 'blocked'
          ORDER BY sequence DESC LIMIT $3
        ) recent ORDER BY sequence`,
        [sessionId, currentSequence, Math.floor(limit)],
      )
      return rows.map(messageOf)
    },

    async blockPending({ sessionId, roles }) {
      if (!isUuid(sessionId) || roles.length === 0) return []
      const rows = await client.query<{ id: string; sequence: unknown }>(
        `UPDATE messages SET delivery = 'blocked'
        WHERE session_id = $1::uuid AND delivery = 'pending'
          AND role IN (SELECT jsonb_array_elements_text($2::jsonb))
        RETURNING id, sequence`,
        [sessionId, storableJson(roles)],
      )
      return rows
        .sort((left, right) => toInteger(left.sequence) - toInteger(right.sequence))
        .map((row) => String(row.id))
    },
  }
}
