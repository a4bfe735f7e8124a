import type { RefreshToken, RefreshTokenRepository } from '../ports/storage.js'
import { snapshot, storedText } from './snapshot.js'
import { storedUuid } from './stored-uuid.js'
import type { Statement } from './undo-log.js'

export interface RefreshTokenTable {
  readonly rows: Map<string, RefreshToken>
  readonly byHash: Map<string, string>
  /** Token ids of each login, so revoking a login does not scan every token. */
  readonly byLogin: Map<string, string[]>
}

export function createRefreshTokenTable(): RefreshTokenTable {
  return { rows: new Map(), byHash: new Map(), byLogin: new Map() }
}

export function createRefreshTokenRepository(options: {
  refreshTokens: RefreshTokenTable
  statement: Statement
}): RefreshTokenRepository {
  const { refreshTokens, statement } = options

  return {
    create: (input) =>
      statement((log) => {
        const id = storedUuid(input.id)
        if (refreshTokens.rows.has(id)) throw new Error(`Refresh token ${id} already exists`)
        // The hash and login as stored, U+FFFD in place of what a text column cannot hold, and so
        // looked up.
        if (refreshTokens.byHash.has(storedText(input.tokenHash)))
          throw new Error('A refresh token with this hash exists')
        const token = snapshot<RefreshToken>({
          id,
          tokenHash: input.tokenHash,
          userId: storedUuid(input.userId),
          companyId: input.companyId,
          loginId: input.loginId,
          expiresAt: input.expiresAt.toISOString(),
          createdAt: input.at.toISOString(),
        })
        log.set(refreshTokens.rows, token.id, token)
        log.set(refreshTokens.byHash, token.tokenHash, token.id)
        const ids = refreshTokens.byLogin.get(token.loginId)
        if (ids === undefined) {
          log.set(refreshTokens.byLogin, token.loginId, [token.id])
        } else {
          ids.push(token.id)
          log.record(() => ids.pop())
        }
        return token
      }),

    findByHash: ({ tokenHash }) =>
      statement(() => {
        const id = refreshTokens.byHash.get(storedText(tokenHash))
        return id === undefined ? null : (refreshTokens.rows.get(id) ?? null)
      }),

    markUsed: ({ id, at }) =>
      statement((log) => {
        const token = refreshTokens.rows.get(storedUuid(id))
        if (token === undefined || token.usedAt !== undefined || token.revokedAt !== undefined) return false
        // As on PostgreSQL: a login with a revoked token is revoked, whatever came after.
        const ofLogin = refreshTokens.byLogin.get(token.loginId) ?? []
        if (ofLogin.some((id) => refreshTokens.rows.get(id)?.revokedAt !== undefined)) return false
        log.set(refreshTokens.rows, token.id, snapshot<RefreshToken>({ ...token, usedAt: at.toISOString() }))
        return true
      }),

    revokeLogin: ({ loginId, at }) =>
      statement((log) => {
        const revokedAt = at.toISOString()
        for (const id of refreshTokens.byLogin.get(storedText(loginId)) ?? []) {
          const token = refreshTokens.rows.get(id)!
          if (token.revokedAt !== undefined) continue
          log.set(refreshTokens.rows, id, snapshot<RefreshToken>({ ...token, revokedAt }))
        }
      }),

    revokeUser: ({ userId: anyCaseId, at }) =>
      statement((log) => {
        // A UUID in capitals names the same user, as PostgreSQL's uuid reads it.
        const userId = anyCaseId.toLowerCase()
        const revokedAt = at.toISOString()
        for (const token of refreshTokens.rows.values()) {
          if (token.userId !== userId || token.revokedAt !== undefined) continue
          log.set(refreshTokens.rows, token.id, snapshot<RefreshToken>({ ...token, revokedAt }))
        }
      }),
  }
}
