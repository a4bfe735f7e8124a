import type { LoginFailureRepository } from '@switchboard/core'
import type { DbClient } from '../db.js'
import { timeParameter, toInteger, toIso } from '../sql-values.js'

export function createLoginFailureRepository(client: DbClient): LoginFailureRepository {
  return {
    async record({ emailKey, at }) {
      await client.query('INSERT INTO login_failures (email_key, at) VALUES ($1, $2::timestamptz)', [
        emailKey,
        timeParameter(at),
      ])
    },

    async count({ emailKey, since }) {
      const [row] = await client.query(
        'SELECT count(*) AS failures FROM login_failures WHERE email_key = $1 AND at > $2::timestamptz',
        [emailKey, timeParameter(since)],
      )
      return toInteger(row?.failures ?? 0)
    },

    async oldestSince({ emailKey, since }) {
      const [row] = await client.query(
        'SELECT min(at) AS oldest FROM login_failures WHERE email_key = $1 AND at > $2::timestamptz',
        [emailKey, timeParameter(since)],
      )
      return row === undefined || row.oldest === null ? null : toIso(row.oldest)
    },

    async forgetBefore({ before }) {
      await client.query('DELETE FROM login_failures WHERE at <= $1::timestamptz', [timeParameter(before)])
    },

    async forget({ emailKey, at }) {
      // One row, even when several attempts were recorded in the same millisecond; SKIP LOCKED,
      // so forgets running at once each take a row of their own instead of all picking the first.
      await client.query(
        `DELETE FROM login_failures WHERE ctid = (
           SELECT ctid FROM login_failures WHERE email_key = $1 AND at = $2::timestamptz
           LIMIT 1 FOR UPDATE SKIP LOCKED
         )`,
        [emailKey, timeParameter(at)],
      )
    },
  }
}
