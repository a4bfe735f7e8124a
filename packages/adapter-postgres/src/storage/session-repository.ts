import type {
  Customer,
  PauseState,
  Session,
  SessionMetadata,
  SessionRepository,
  SessionState,
} from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, emptyPage, encodeCursor, takePage, timeCursorPosition } from '../paging.js'
import {
  isBigintId,
  isoTimeParameter,
  isUuid,
  jsonParameter,
  present,
  toInteger,
  toIso,
} from '../sql-values.js'
import { keyFromStorage, storableKey, storableKeys } from '../storable-key.js'
import { lookUpEachSql } from './look-up-each.js'
import { sessionLockSql } from './session-lock.js'

const COLUMNS = `id, company_id, integration_id, customer, state, active_agent_id, entry_agent_id, metadata,
  pause_state, created_at, updated_at, version, insertion`

function sessionOf(row: DbRow): Session {
  return {
    id: String(row.id),
    companyId: toInteger(row.company_id),
    integrationId: String(row.integration_id),
    customer: customerFromStorage(row.customer as Customer),
    state: row.state as SessionState,
    activeAgentId: toInteger(row.active_agent_id),
    entryAgentId: toInteger(row.entry_agent_id),
    metadata: row.metadata as SessionMetadata,
    ...present('pauseState', row.pause_state as PauseState | null),
    createdAt: toIso(row.created_at),
    updatedAt: toIso(row.updated_at),
    version: toInteger(row.version),
  }
}

/**
 * The customer's address as `storableKey` writes each part: replies go back to exactly these ids,
 * and two customers whose ids differ only in characters a text column cannot hold stay two.
 */
function storableCustomer(customer: Customer): Customer {
  return {
    clientId: storableKey(customer.clientId),
    ...(customer.channelId === undefined ? {} : { channelId: storableKey(customer.channelId) }),
    ...(customer.transport === undefined ? {} : { transport: storableKey(customer.transport) }),
  }
}

function customerFromStorage(stored: Customer): Customer {
  return {
    clientId: keyFromStorage(stored.clientId),
    ...(stored.channelId === undefined ? {} : { channelId: keyFromStorage(stored.channelId) }),
    ...(stored.transport === undefined ? {} : { transport: keyFromStorage(stored.transport) }),
  }
}

/** Every column a session writes, in the order of `$2…$12` in the statements below. */
function sessionParameters(session: Omit<Session, 'version'>): unknown[] {
  return [
    session.companyId,
    session.integrationId,
    storableKey(session.customer.clientId),
    jsonParameter(storableCustomer(session.customer)),
    session.state,
    session.activeAgentId,
    session.entryAgentId,
    jsonParameter(session.metadata),
    jsonParameter(session.pauseState),
    isoTimeParameter(session.createdAt),
    isoTimeParameter(session.updatedAt),
  ]
}

export function createSessionRepository(client: DbClient): SessionRepository {
  return {
    async create(input) {
      // ON CONFLICT DO NOTHING covers the id and the one-open-session-per-customer index alike; a
      // throw here fails this call only, where a unique violation would abort the transaction.
      const [row] = await client.query(
        `INSERT INTO sessions (id, company_id, integration_id, client_id, customer, state, active_agent_id,
          entry_agent_id, metadata, pause_state, created_at, updated_at, version)
        VALUES ($1::uuid, $2, $3::bigint, $4, $5::jsonb, $6, $7, $8, $9::json, $10::jsonb, $11::timestamptz,
          $12::timestamptz, 1)
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [input.id, ...sessionParameters(input)],
      )
      if (row === undefined) {
        throw new Error(
          `Session ${input.id} exists, or customer ${input.customer.clientId} already has an open session on integration ${input.integrationId}`,
        )
      }
      return sessionOf(row)
    },

    async get({ id, companyId, lock }) {
      if (!isUuid(id)) return null
      // FOR SHARE conflicts with the UPDATE of `save` and not with itself.
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM sessions WHERE id = $1::uuid AND ($2::integer IS NULL OR company_id = $2)${
          lock === true ? ' FOR SHARE' : ''
        }`,
        [id, companyId ?? null],
      )
      return row === undefined ? null : sessionOf(row)
    },

    async findOpen({ integrationId, clientId }) {
      if (!isBigintId(integrationId)) return null
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM sessions
        WHERE integration_id = $1::bigint AND client_id = $2 AND state <> 'closed'`,
        [integrationId, storableKey(clientId)],
      )
      return row === undefined ? null : sessionOf(row)
    },

    async findOpenMany({ integrationId, clientIds }) {
      if (!isBigintId(integrationId) || clientIds.length === 0) return []
      const rows = await client.query(
        lookUpEachSql(
          '$2',
          `SELECT ${COLUMNS} FROM sessions
          WHERE integration_id = $1::bigint AND state <> 'closed' AND client_id = wanted.value`,
        ),
        [integrationId, storableKeys(clientIds)],
      )
      return rows.map(sessionOf)
    },

    async save(input) {
      if (!isUuid(input.id)) return null
      // Compare-and-set: a writer that lost the race finds the version moved on and writes
      // nothing. Under READ COMMITTED the loser waits for the winner's row lock, then re-reads.
      // The session's advisory lock first, as its message inserts take it: a transaction that
      // inserts then saves (a turn's commit) and one that saves then inserts (ingest following a
      // customer to another channel) would otherwise each hold what the other waits for.
      const [row] = await client.query(
        `UPDATE sessions SET company_id = $2, integration_id = $3::bigint, client_id = $4, customer = $5::jsonb,
          state = $6, active_agent_id = $7, entry_agent_id = $8, metadata = $9::json, pause_state = $10::jsonb,
          created_at = $11::timestamptz, updated_at = $12::timestamptz, version = version + 1
        FROM ${sessionLockSql('$1')}
        WHERE id = $1::uuid AND version = $13
        RETURNING ${COLUMNS}`,
        [input.id, ...sessionParameters(input), input.version],
      )
      return row === undefined ? null : sessionOf(row)
    },

    async list({ companyId, state, integrationId, limit, cursor }) {
      assertPageLimit(limit)
      if (integrationId !== undefined && !isBigintId(integrationId)) return emptyPage<Session>()
      const after = cursor === undefined ? null : timeCursorPosition(cursor)
      if (cursor !== undefined && after === null) return emptyPage<Session>()
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM sessions
        WHERE company_id = $1
          AND ($2::text IS NULL OR state = $2)
          AND ($3::bigint IS NULL OR integration_id = $3)
          AND ($4::timestamptz IS NULL OR (created_at, insertion) < ($4::timestamptz, $5::bigint))
        ORDER BY created_at DESC, insertion DESC LIMIT $6`,
        [companyId, state ?? null, integrationId ?? null, after?.[0] ?? null, after?.[1] ?? null, limit + 1],
      )
      return takePage(rows, limit, sessionOf, (row) =>
        encodeCursor([Date.parse(toIso(row.created_at)), toInteger(row.insertion)]),
      )
    },
  }
}
