/**
 * The first key of the per-session advisory lock (`pg_advisory_xact_lock(key, hashtext(session))`).
 * Two-key advisory locks never meet the one-key lock of the migrations.
 */
const SESSION_LOCK_KEY = 1_935_762_041

/**
 * SQL that takes the session's transaction-scoped lock, for a `FROM` clause. Message inserts and
 * enqueues of one session take it, so they commit in the order their sequence numbers were drawn:
 * without it, a job could be drawn an earlier id yet commit after a later one was leased, and
 * two jobs of one session would run at once. Sessions whose ids hash alike merely wait for
 * each other.
 *
 * A statement's snapshot is taken as it starts, before it waits for a lock it takes itself: one
 * that must see what the session's other lock holders committed (does the session have another
 * job?) is sent after a statement of its own that takes the lock (`enqueueLeased`, and the
 * completion with `jobSessionLockSql`).
 */
export function sessionLockSql(sessionIdParameter: string): string {
  return `(SELECT pg_advisory_xact_lock(${SESSION_LOCK_KEY}, hashtext(${sessionIdParameter}::text))) AS session_lock`
}

/**
 * `sessionLockSql` for every `session_id` of a JSON array parameter (rows as objects), taken in
 * the order of their lock keys, so that two transactions locking several sessions never wait for
 * each other in a circle.
 */
export function sessionLocksSql(rowsParameter: string): string {
  return `(SELECT count(pg_advisory_xact_lock(${SESSION_LOCK_KEY}, lock_key)) AS locked FROM (
      SELECT DISTINCT hashtext(row->>'session_id') AS lock_key FROM jsonb_array_elements(${rowsParameter}::jsonb) AS row
      ORDER BY lock_key
    ) AS lock_keys) AS session_locks`
}

/**
 * A statement that takes the transaction-scoped lock of a job's session (`sessionLockSql`'s), the
 * job found by its id. Locks nothing when there is no such job.
 */
export function jobSessionLockSql(jobIdParameter: string): string {
  return `SELECT count(pg_advisory_xact_lock(${SESSION_LOCK_KEY}, hashtext(session_id::text))) AS locked
    FROM jobs WHERE id = ${jobIdParameter}::bigint`
}
