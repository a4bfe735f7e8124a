import {
  type Delivery,
  type Message,
  type MessageRepository,
  type MessageRole,
  type NewMessage,
  SessionClosedError,
} from '@switchboard/core'
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

/**
 * Why an insert `intoOpenSession` stored nothing, asked once it has: a `SessionClosedError` when a
 * session of `sessionIds` is closed (this statement's snapshot sees the close the insert saw),
 * null when they are all open.
 */
async function closedSessionError(client: DbClient, sessionIds: readonly string[]): Promise<Error | null> {
  const ids = [...new Set(sessionIds)]
  const rows = await client.query<{ id: string; state: string }>(
    'SELECT id, state FROM sessions WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::uuid)',
    [JSON.stringify(ids)],
  )
  const closed = rows.find((row) => row.state === 'closed')
  if (closed !== undefined) return new SessionClosedError(String(closed.id))
  const found = new Set(rows.map((row) => String(row.id)))
  const missing = ids.find((id) => !found.has(id))
  return missing === undefined ? null : new Error(`Session ${missing} does not exist`)
}

/**
 * `intoOpenSession` for `insert`, after its `FROM` of the session's lock: the session joined in,
 * held FOR SHARE, and not closed. The statement's snapshot is taken before it waits for the
 * session's advisory lock, so a close that commits during the wait is not in it; the row lock is
 * what makes PostgreSQL read the row again as that close left it and check the condition on it
 * (READ COMMITTED's recheck of a locked row), and then store nothing. FOR KEY SHARE would not: a
 * close changes no key, so it locks the version read, unchecked. The advisory lock comes first,
 * then the row, as every writer of a session takes them. The insert's foreign key locks the row
 * anyway, so this adds no statement and no WAL, only the probe and the stronger lock's CPU.
 */
function openSessionSql(sessionIdParameter: string): string {
  return `, sessions
        WHERE sessions.id = ${sessionIdParameter}::uuid AND sessions.state <> 'closed'
        FOR SHARE OF sessions`
}

/**
 * `intoOpenSession` for `insertMany`, all or none: the sessions of a JSON array parameter's rows
 * locked (advisory locks first, in lock-key order, then the rows FOR SHARE) and read as
 * `openSessionSql` reads one, in a `WITH`; `allSessionsOpenSql` then lets the insert store rows
 * only when every one of those sessions is open. Not `lookUpEachSql`: its row lock would sit in
 * each probe, below the join, where nothing makes the advisory locks come first; here the lock is
 * above it. The plan probes the primary key once per session (the PostgreSQL plan test).
 */
function openSessionsSql(rowsParameter: string): string {
  return `WITH open_sessions AS (
          SELECT s.id FROM ${sessionLocksSql(rowsParameter)}, sessions s
          WHERE s.id IN (SELECT (row->>'session_id')::uuid FROM jsonb_array_elements(${rowsParameter}::jsonb) AS row)
            AND s.state <> 'closed'
          FOR SHARE OF s
        )
        `
}

/** The refusal fails the statement (`switchboard_refuse_messages`, `refusals.ts`). */
function allSessionsOpenSql(rowsParameter: string): string {
  return `WHERE CASE WHEN (SELECT count(*) FROM open_sessions) =
            (SELECT count(DISTINCT row->>'session_id') FROM jsonb_array_elements(${rowsParameter}::jsonb) AS row)
          THEN true ELSE switchboard_refuse_messages(${rowsParameter}::jsonb) END
        `
}

export function createMessageRepository(client: DbClient): MessageRepository {
  return {
    async insertMany(inputs, options) {
      if (inputs.length === 0) return []
      const intoOpenSession = options?.intoOpenSession === true
      // No ON CONFLICT: a conflict fails the statement, so none of the messages is stored. Into open
      // sessions, the messages are stored only when all of their sessions are: all or none still.
      const rows = await client.query(
        `${intoOpenSession ? openSessionsSql('$1') : ''}INSERT INTO messages (id, company_id, session_id, integration_id, role, text, agent_id, at, external_id,
          channel_id, transport, delivery)
        SELECT m.id, m.company_id, m.session_id, m.integration_id, m.role, m.text, m.agent_id, m.at, m.external_id,
          m.channel_id, m.transport, m.delivery
        FROM ${intoOpenSession ? '' : `${sessionLocksSql('$1')},`}
          ROWS FROM (jsonb_to_recordset($1::jsonb) AS (id uuid, company_id integer, session_id uuid,
            integration_id bigint, role text, text text, agent_id integer, at timestamptz, external_id text,
            channel_id text, transport text, delivery text)) WITH ORDINALITY AS m(id, company_id, session_id,
            integration_id, role, text, agent_id, at, external_id, channel_id, transport, delivery, position)
        ${intoOpenSession ? allSessionsOpenSql('$1') : ''}ORDER BY m.position
        RETURNING ${COLUMNS}`,
        [storableJson(inputs.map(rowOf))],
      )
      // A session closed or gone fails the statement itself (`allSessionsOpenSql`).
      if (rows.length < inputs.length) {
        throw new Error(`${inputs.length - rows.length} of ${inputs.length} messages were not stored`)
      }
      const byId = new Map(rows.map((row) => [String(row.id), row]))
      return inputs.map((input) => messageOf(byId.get(input.id)!))
    },

    async insert(input, options) {
      const intoOpenSession = options?.intoOpenSession === true
      const [row] = await client.query(
        `INSERT INTO messages (id, company_id, session_id, integration_id, role, text, agent_id, at, external_id,
          channel_id, transport, delivery)
        SELECT $1::uuid, $2, $3::uuid, $4::bigint, $5, $6, $7, $8::timestamptz, $9, $10, $11, $12
        FROM ${sessionLockSql('$3')}${intoOpenSession ? openSessionSql('$3') : ''}
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
        const refused = intoOpenSession ? await closedSessionError(client, [input.sessionId]) : null
        if (refused !== null) throw refused
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
