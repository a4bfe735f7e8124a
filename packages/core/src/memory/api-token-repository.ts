import type { ApiToken, ApiTokenRepository } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isCursorTime, isNumberTuple, takePage } from './paging.js'
import { snapshot, storedText } from './snapshot.js'
import { isUuid, storedUuid } from './stored-uuid.js'
import type { Statement } from './undo-log.js'

interface StoredApiToken {
  readonly token: ApiToken
  readonly tokenHash: string
  readonly createdAtMs: number
  /** Deleted tokens stay, as rows would, so their hash is never handed out again. */
  readonly deleted: boolean
}

export interface ApiTokenTable {
  readonly rows: Map<string, StoredApiToken>
  readonly byHash: Map<string, string>
}

export function createApiTokenTable(): ApiTokenTable {
  return { rows: new Map(), byHash: new Map() }
}

/** A time and a token id, which a database holds as a uuid: any letter case names the same one. */
function isPosition(value: unknown): value is [number, string] {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    isNumberTuple([value[0]], 1) &&
    isCursorTime(value[0]) &&
    typeof value[1] === 'string' &&
    isUuid(value[1])
  )
}

/** Oldest first, then by id, the order a database index on (created_at, id) gives. */
function compare(left: StoredApiToken, right: StoredApiToken): number {
  if (left.createdAtMs !== right.createdAtMs) return left.createdAtMs - right.createdAtMs
  return left.token.id < right.token.id ? -1 : left.token.id > right.token.id ? 1 : 0
}

export function createApiTokenRepository(options: {
  apiTokens: ApiTokenTable
  statement: Statement
}): ApiTokenRepository {
  const { apiTokens, statement } = options

  return {
    create: (input) =>
      statement((log) => {
        const id = storedUuid(input.id)
        if (apiTokens.rows.has(id)) throw new Error(`API token ${id} already exists`)
        // The hash as stored, U+FFFD in place of what a text column cannot hold, and so looked up.
        const tokenHash = storedText(input.tokenHash)
        if (apiTokens.byHash.has(tokenHash)) throw new Error('An API token with this hash exists')
        const token = snapshot<ApiToken>({
          id,
          companyId: input.companyId,
          userId: storedUuid(input.userId),
          name: input.name,
          createdAt: input.at.toISOString(),
        })
        log.set(apiTokens.rows, token.id, {
          token,
          tokenHash,
          createdAtMs: input.at.getTime(),
          deleted: false,
        })
        log.set(apiTokens.byHash, tokenHash, token.id)
        return token
      }),

    findByHash: ({ tokenHash }) =>
      statement(() => {
        const id = apiTokens.byHash.get(storedText(tokenHash))
        const stored = id === undefined ? undefined : apiTokens.rows.get(id)
        return stored === undefined || stored.deleted ? null : stored.token
      }),

    list: ({ companyId, limit, cursor }) =>
      statement(() => {
        let isAfterCursor = (_stored: StoredApiToken): boolean => true
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isPosition(position)) return emptyPage<ApiToken>()
          const [createdAtMs, anyCaseId] = position
          const id = anyCaseId.toLowerCase()
          isAfterCursor = (stored) =>
            stored.createdAtMs > createdAtMs || (stored.createdAtMs === createdAtMs && stored.token.id > id)
        }
        const remaining = [...apiTokens.rows.values()]
          .filter(
            (stored) => stored.token.companyId === companyId && !stored.deleted && isAfterCursor(stored),
          )
          .sort(compare)
        const page = takePage(remaining, limit, (stored) =>
          encodeCursor([stored.createdAtMs, stored.token.id]),
        )
        return { items: page.items.map((stored) => stored.token), nextCursor: page.nextCursor }
      }),

    delete: ({ companyId, id: anyCaseId }) =>
      statement((log) => {
        // Ids are stored lower-case; a UUID in capitals is the same one, as PostgreSQL's uuid reads it.
        const id = anyCaseId.toLowerCase()
        const stored = apiTokens.rows.get(id)
        if (stored === undefined || stored.deleted || stored.token.companyId !== companyId) return false
        log.set(apiTokens.rows, id, { ...stored, deleted: true })
        return true
      }),
  }
}
