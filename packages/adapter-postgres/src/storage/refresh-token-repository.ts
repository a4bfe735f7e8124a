import type { RefreshToken, RefreshTokenRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isUuid, present, timeParameter, toInteger, toIso } from '../sql-values.js'

const COLUMNS = 'id, token_hash, user_id, company_id, login_id, expires_at, used_at, revoked_at, created_at'

function refreshTokenOf(row: DbRow): RefreshToken {
  return {
    id: String(row.id),
    tokenHash: String(row.token_hash),
    userId: String(row.user_id),
    companyId: toInteger(row.company_id),
    loginId: String(row.login_id),
    expiresAt: toIso(row.expires_at),
    ...present('usedAt', row.used_at === null ? null : toIso(row.used_at)),
    ...present('revokedAt', row.revoked_at === null ? null : toIso(row.revoked_at)),
    createdAt: toIso(row.created_at),
  }
}

export function createRefreshTokenRepository(client: DbClient): RefreshTokenRepository {
  return {
    async create(input) {
      const [row] = await client.query(
        `INSERT INTO refresh_tokens (id, token_hash, user_id, company_id, login_id, expires_at, created_at)
        VALUES ($1::uuid, $2, $3::uuid, $4, $5, $6::timestamptz, $7::timestamptz)
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [
          input.id,
          input.tokenHash,
          input.userId,
          input.companyId,
          input.loginId,
          timeParameter(input.expiresAt),
          timeParameter(input.at),
        ],
      )
      if (row === undefined) throw new Error('A refresh token with this id or hash exists')
      return refreshTokenOf(row)
    },

    async findByHash({ tokenHash }) {
      const [row] = await client.query(`SELECT ${COLUMNS} FROM refresh_tokens WHERE token_hash = $1`, [
        tokenHash,
      ])
      return row === undefined ? null : refreshTokenOf(row)
    },

    async markUsed({ id, at }) {
      if (!isUuid(id)) return false
      // Concurrent callers queue on the row lock; each re-reads the row once it is free, so only
      // the first finds used_at still NULL. A revocation of the login revokes the rows its
      // statement sees: a successor a refresh committed meanwhile escapes it, so any revoked token
      // of the login refuses the use of the others too.
      const rows = await client.query(
        `UPDATE refresh_tokens SET used_at = $2::timestamptz
        WHERE id = $1::uuid AND used_at IS NULL AND revoked_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM refresh_tokens revoked
            WHERE revoked.login_id = refresh_tokens.login_id AND revoked.revoked_at IS NOT NULL)
        RETURNING id`,
        [id, timeParameter(at)],
      )
      return rows.length > 0
    },

    async revokeLogin({ loginId, at }) {
      await client.query(
        'UPDATE refresh_tokens SET revoked_at = $2::timestamptz WHERE login_id = $1 AND revoked_at IS NULL',
        [loginId, timeParameter(at)],
      )
    },

    async revokeUser({ userId, at }) {
      if (!isUuid(userId)) return
      await client.query(
        'UPDATE refresh_tokens SET revoked_at = $2::timestamptz WHERE user_id = $1::uuid AND revoked_at IS NULL',
        [userId, timeParameter(at)],
      )
    },
  }
}
