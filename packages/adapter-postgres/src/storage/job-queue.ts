import type { JobLease, JobQueue } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isBigintId, isUuid, timeParameter, toInteger } from '../sql-values.js'
import { storableJson } from '../storable-text.js'
import { jobSessionLockSql, sessionLockSql, sessionLocksSql } from './session-lock.js'

/** Whoever waits for jobs in this process; the storage feeds it from LISTEN. */
export interface AvailabilityListeners {
  add(listener: () => void): () => void
}

function leaseOf(row: DbRow, token: string): JobLease {
  return {
    jobId: String(row.id),
    companyId: toInteger(row.company_id),
    sessionId: String(row.session_id),
    messageId: String(row.message_id),
    attempts: toInteger(row.attempts),
    token,
  }
}

/**
 * The job queue in the `jobs` table. A job is `queued` until its holder completes it (`done`) or
 * gives up on it (`dead`). Only a session's earliest queued job can be leased, and only while no
 * live lease holds it, so a session's jobs run one at a time and in order.
 *
 * Every change that can make a job available sends `NOTIFY` on `channel` in the writing
 * transaction; PostgreSQL delivers it at commit and drops it on rollback, so listeners hear of
 * committed work only. A job enqueued behind one that is finishing is announced by whichever of
 * the two transactions commits last: the session's lock orders them (see `complete`).
 */
export function createJobQueue(options: {
  client: DbClient
  channel: string
  listeners: AvailabilityListeners
}): JobQueue {
  const { client, channel, listeners } = options

  return {
    async enqueue(input) {
      // The session's lock makes its jobs commit in id order (see session-lock.ts).
      const [row] = await client.query<{ id: unknown }>(
        `WITH queued AS (
          INSERT INTO jobs (company_id, session_id, message_id, available_at)
          SELECT $1, $2::uuid, $3::uuid, $4::timestamptz FROM ${sessionLockSql('$2')}
          ON CONFLICT DO NOTHING
          RETURNING id
        )
        SELECT queued.id, pg_notify($5, '') FROM queued`,
        [input.companyId, input.sessionId, input.messageId, timeParameter(input.availableAt), channel],
      )
      if (row === undefined) throw new Error(`Message ${input.messageId} already has a job`)
    },

    async enqueueMany(inputs) {
      if (inputs.length === 0) return
      const rows = inputs.map((input) => ({
        company_id: input.companyId,
        session_id: input.sessionId,
        message_id: input.messageId,
        available_at: timeParameter(input.availableAt),
      }))
      // No ON CONFLICT: a message that has a job already fails the statement and every job in it.
      await client.query(
        `WITH queued AS (
          INSERT INTO jobs (company_id, session_id, message_id, available_at)
          SELECT j.company_id, j.session_id, j.message_id, j.available_at
          FROM ${sessionLocksSql('$1')},
            ROWS FROM (jsonb_to_recordset($1::jsonb) AS (company_id integer, session_id uuid, message_id uuid,
              available_at timestamptz)) WITH ORDINALITY AS j(company_id, session_id, message_id, available_at, position)
          ORDER BY j.position
          RETURNING id
        )
        SELECT count(*) AS queued, pg_notify($2, '') FROM queued`,
        [storableJson(rows), channel],
      )
    },

    async enqueueLeased(input, { now, leaseMs, token }) {
      // The session's lock in a statement of its own, before the insert: the insert's snapshot,
      // taken once the lock is held, sees every job of the session committed before, so of
      // concurrent transactions enqueuing for one session only the first finds none. Sent
      // together, one round trip. The job leased is nobody else's: NOTIFY only for one that is not.
      const [, [row]] = await Promise.all([
        client.query(`SELECT 1 FROM ${sessionLockSql('$1')}`, [input.sessionId]),
        client.query(
          `WITH queued AS (
            INSERT INTO jobs (company_id, session_id, message_id, available_at, lease_token, leased_until)
            SELECT $1, $2::uuid, $3::uuid, $4::timestamptz,
              CASE WHEN free.first THEN $5 END, CASE WHEN free.first THEN $6::timestamptz END
            FROM (
              SELECT (
                SELECT earlier.id FROM jobs earlier
                WHERE earlier.session_id = $2::uuid AND earlier.state = 'queued'
                LIMIT 1
              ) IS NULL AS first
            ) AS free
            ON CONFLICT DO NOTHING
            RETURNING id, company_id, session_id, message_id, attempts, lease_token
          )
          SELECT queued.*, CASE WHEN queued.lease_token IS NULL THEN pg_notify($7, '') END AS woken
          FROM queued`,
          [
            input.companyId,
            input.sessionId,
            input.messageId,
            timeParameter(input.availableAt),
            token,
            timeParameter(new Date(now.getTime() + leaseMs)),
            channel,
          ],
        ),
      ])
      if (row === undefined) throw new Error(`Message ${input.messageId} already has a job`)
      return row.lease_token === null ? null : leaseOf(row, token)
    },

    async enqueueManyLeased(inputs, { now, leaseMs }) {
      if (inputs.length === 0) return []
      const rows = inputs.map((input) => ({
        company_id: input.companyId,
        session_id: input.sessionId,
        message_id: input.messageId,
        available_at: timeParameter(input.availableAt),
        token: input.token ?? null,
      }))
      const parameter = storableJson(rows)
      // As enqueueLeased: the sessions' locks in a statement of their own first, so the insert's
      // snapshot sees every job of those sessions committed before. A job is leased when it has a
      // token, is its session's first in the batch, and its session has no job queued already.
      const [, inserted] = await Promise.all([
        client.query(`SELECT 1 FROM ${sessionLocksSql('$1')}`, [parameter]),
        client.query(
          `WITH given AS (
            SELECT j.*, row_number() OVER (PARTITION BY j.session_id ORDER BY j.position) = 1 AS first_in_batch
            FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (company_id integer, session_id uuid, message_id uuid,
              available_at timestamptz, token text)) WITH ORDINALITY AS j(company_id, session_id, message_id,
              available_at, token, position)
          ), decided AS (
            SELECT given.*, given.token IS NOT NULL AND given.first_in_batch AND (
              SELECT earlier.id FROM jobs earlier
              WHERE earlier.session_id = given.session_id AND earlier.state = 'queued'
              LIMIT 1
            ) IS NULL AS leased
            FROM given
          ), queued AS (
            INSERT INTO jobs (company_id, session_id, message_id, available_at, lease_token, leased_until)
            SELECT company_id, session_id, message_id, available_at,
              CASE WHEN leased THEN token END, CASE WHEN leased THEN $2::timestamptz END
            FROM decided
            ORDER BY position
            RETURNING id, company_id, session_id, message_id, attempts, lease_token
          )
          SELECT queued.*, CASE WHEN queued.lease_token IS NULL THEN pg_notify($3, '') END AS woken
          FROM queued`,
          [parameter, timeParameter(new Date(now.getTime() + leaseMs)), channel],
        ),
      ])
      const leases = new Map<string, JobLease>()
      for (const row of inserted) {
        if (row.lease_token !== null)
          leases.set(String(row.message_id), leaseOf(row, String(row.lease_token)))
      }
      return inputs.map((input) => leases.get(input.messageId) ?? null)
    },

    async lease({ now, leaseMs, token }) {
      // One statement. It walks the queued jobs oldest first, one index probe a step, and takes the
      // first that heads its session's queue, is due and has no live lease; SKIP LOCKED passes over
      // a job another worker is taking or finishing. A later job of the session is never a
      // candidate while an earlier one is queued, and a locked row is checked as it is now, so two
      // workers never hold one session.
      // Every step is a LIMIT 1 subquery, which the planner can neither flatten nor reorder, so
      // the lease reads the few oldest jobs whatever plan the connection keeps. A plain `ORDER BY
      // id LIMIT 1` over the candidates, planned while few jobs were queued, sorted every queued
      // job and checked each one's session on every lease once a backlog built up.
      const [row] = await client.query(
        `UPDATE jobs SET lease_token = $2, leased_until = $3::timestamptz
        WHERE id = (
          WITH RECURSIVE queued_in_order (id) AS (
            (SELECT first.id FROM jobs first WHERE first.state = 'queued' ORDER BY first.id LIMIT 1)
            UNION ALL
            SELECT (
              SELECT next.id FROM jobs next
              WHERE next.state = 'queued' AND next.id > walked.id
              ORDER BY next.id
              LIMIT 1
            )
            FROM queued_in_order walked
            WHERE walked.id IS NOT NULL
          )
          SELECT candidate.id
          FROM queued_in_order walked
          CROSS JOIN LATERAL (
            SELECT * FROM jobs locked WHERE locked.id = walked.id LIMIT 1 FOR UPDATE SKIP LOCKED
          ) AS candidate
          WHERE candidate.state = 'queued'
            AND candidate.available_at <= $1::timestamptz
            AND (candidate.lease_token IS NULL OR candidate.leased_until <= $1::timestamptz)
            AND candidate.id = (
              SELECT head.id FROM jobs head
              WHERE head.session_id = candidate.session_id AND head.state = 'queued'
              ORDER BY head.id
              LIMIT 1
            )
          LIMIT 1
        )
        RETURNING id, company_id, session_id, message_id, attempts`,
        [timeParameter(now), token, timeParameter(new Date(now.getTime() + leaseMs))],
      )
      return row === undefined ? null : leaseOf(row, token)
    },

    async renew({ jobId, token, now, leaseMs }) {
      if (!isBigintId(jobId)) return false
      const rows = await client.query(
        `UPDATE jobs SET leased_until = $3::timestamptz
        WHERE id = $1::bigint AND lease_token = $2 AND state = 'queued' RETURNING id`,
        [jobId, token, timeParameter(new Date(now.getTime() + leaseMs))],
      )
      return rows.length > 0
    },

    async complete({ jobId, token }) {
      if (!isBigintId(jobId)) return false
      // The session's lock in a statement of its own before the completion's, sent together (one
      // round trip), as `enqueueLeased` does. The completion's snapshot, taken once the lock is
      // held, sees every job of the session enqueued before, and a transaction enqueuing one
      // later waits for this commit, so this commit or that one announces the job. Without it
      // the completion could miss a job whose NOTIFY came while this one was still queued:
      // woken workers leased nothing, this commit told nobody, and the job waited for the poll.
      // A turn's commit takes the lock again for its replies and its session, which is fine: a
      // transaction never waits for a lock it holds. Outside a transaction (the port asks for
      // one) the lock would end with its own statement.
      const [, completed] = await Promise.all([
        client.query(jobSessionLockSql('$1'), [jobId]),
        finish(client, channel, { jobId, token, state: 'done', error: null }),
      ])
      return completed
    },

    async fail({ jobId, token, retryAt, dead, error }) {
      if (!isBigintId(jobId)) return false
      // Buried: every listener is told, whether the session has a next job or not, with no lock
      // and no look for one. The worker pool gives up on a job outside any transaction, where a
      // lock taken before the statement would end with its own. A job of the session enqueued
      // before this commit is free once it is heard; one enqueued after finds this job dead and
      // is leased to its enqueuer or announced by its own commit. Dead jobs are rare.
      if (dead) return finish(client, channel, { jobId, token, state: 'dead', error, wake: 'always' })
      const rows = await client.query(
        `WITH retried AS (
          UPDATE jobs SET attempts = attempts + 1, available_at = $3::timestamptz, lease_token = NULL,
            leased_until = NULL, last_error = $4
          WHERE id = $1::bigint AND lease_token = $2 AND state = 'queued'
          RETURNING id
        )
        SELECT retried.id, pg_notify($5, '') FROM retried`,
        [jobId, token, timeParameter(retryAt), error, channel],
      )
      return rows.length > 0
    },

    async pending({ sessionId }) {
      if (sessionId !== undefined && !isUuid(sessionId)) return 0
      const [row] = await client.query(
        `SELECT count(*) AS pending FROM jobs
        WHERE state = 'queued' AND ($1::uuid IS NULL OR session_id = $1::uuid)`,
        [sessionId ?? null],
      )
      return toInteger(row?.pending ?? 0)
    },

    onAvailable: (listener) => listeners.add(listener),
  }
}

/**
 * Completes or buries a job its holder still holds, in one statement that also sends NOTIFY:
 * with `wake: 'always'`, whenever the job is finished; by default only when the session has
 * another job queued, which is no longer held back. That look sees only jobs committed before the
 * statement began: the caller holds the session's lock by then (see `complete`).
 *
 * The session's next job is looked for by a LIMIT 1 subquery, one probe of the session's queue:
 * as EXISTS it was planned as a semi-join, and the generic plan a connection keeps, chosen while
 * the queue was nearly empty, read every queued job of every session on each completion (1,400
 * index entries per finished job once a backlog built up in bench:webhook).
 */
async function finish(
  client: DbClient,
  channel: string,
  options: {
    jobId: string
    token: string
    state: 'done' | 'dead'
    error: string | null
    wake?: 'always' | 'next'
  },
): Promise<boolean> {
  const woken =
    options.wake === 'always'
      ? `SELECT pg_notify($5, '') FROM finished`
      : `SELECT pg_notify($5, '') FROM finished
      WHERE (
        SELECT next.id FROM jobs next
        WHERE next.session_id = finished.session_id AND next.state = 'queued' AND next.id <> $1::bigint
        LIMIT 1
      ) IS NOT NULL`
  const [row] = await client.query<{ finished: unknown }>(
    `WITH finished AS (
      UPDATE jobs SET state = $3, finished_at = now(), last_error = coalesce($4, last_error),
        attempts = attempts + CASE WHEN $3 = 'dead' THEN 1 ELSE 0 END
      WHERE id = $1::bigint AND lease_token = $2 AND state = 'queued'
      RETURNING session_id
    ), woken AS (
      ${woken}
    )
    SELECT (SELECT count(*) FROM finished) AS finished, (SELECT count(*) FROM woken) AS woken`,
    [options.jobId, options.token, options.state, options.error, channel],
  )
  return toInteger(row?.finished ?? 0) > 0
}
