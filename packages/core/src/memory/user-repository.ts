import type { User, UserRepository } from '../ports/storage.js'
import { snapshot, storedText } from './snapshot.js'
import { storedUuid } from './stored-uuid.js'
import type { Statement } from './undo-log.js'

export interface UserTable {
  readonly rows: Map<string, User>
  /** User ids by lower-cased email: the unique index that makes emails case-insensitive. */
  readonly byEmail: Map<string, string>
}

export function createUserTable(): UserTable {
  return { rows: new Map(), byEmail: new Map() }
}

/** As stored: U+FFFD in place of what a text column cannot hold, so either spelling finds it. */
function emailIndexKey(email: string): string {
  return storedText(email).toLowerCase()
}

export function createUserRepository(options: { users: UserTable; statement: Statement }): UserRepository {
  const { users, statement } = options

  return {
    create: (input) =>
      statement((log) => {
        const id = storedUuid(input.id)
        if (users.rows.has(id)) throw new Error(`User ${id} already exists`)
        const key = emailIndexKey(input.email)
        // The address stays out of the message: errors end up in logs.
        if (users.byEmail.has(key)) throw new Error('A user with this email already exists')
        const user = snapshot<User>({
          id,
          email: input.email,
          companyId: input.companyId,
          passwordHash: input.passwordHash,
          createdAt: input.at.toISOString(),
        })
        log.set(users.rows, user.id, user)
        log.set(users.byEmail, key, user.id)
        return user
      }),

    findByEmail: ({ email }) =>
      statement(() => {
        const id = users.byEmail.get(emailIndexKey(email))
        return id === undefined ? null : (users.rows.get(id) ?? null)
      }),

    // Ids are stored lower-case; a UUID in capitals is the same one, as PostgreSQL's uuid reads it.
    get: ({ id }) => statement(() => users.rows.get(id.toLowerCase()) ?? null),
  }
}
