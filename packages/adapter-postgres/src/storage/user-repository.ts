import type { User, UserRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isUuid, timeParameter, toInteger, toIso } from '../sql-values.js'

const COLUMNS = 'id, email, company_id, password_hash, created_at'

function userOf(row: DbRow): User {
  return {
    id: String(row.id),
    email: String(row.email),
    companyId: toInteger(row.company_id),
    passwordHash: String(row.password_hash),
    createdAt: toIso(row.created_at),
  }
}

/** The unique key of an email, lower-cased here rather than in SQL (see the users table). */
function emailKey(email: string): string {
  return email.toLowerCase()
}

export function createUserRepository(client: DbClient): UserRepository {
  return {
    async create(input) {
      const [row] = await client.query(
        `INSERT INTO users (id, email, email_key, company_id, password_hash, created_at)
        VALUES ($1::uuid, $2, $3, $4, $5, $6::timestamptz)
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [
          input.id,
          input.email,
          emailKey(input.email),
          input.companyId,
          input.passwordHash,
          timeParameter(input.at),
        ],
      )
      // The address stays out of the message: errors end up in logs.
      if (row === undefined) throw new Error('A user with this email or id already exists')
      return userOf(row)
    },

    async findByEmail({ email }) {
      const [row] = await client.query(`SELECT ${COLUMNS} FROM users WHERE email_key = $1`, [emailKey(email)])
      return row === undefined ? null : userOf(row)
    },

    async get({ id }) {
      if (!isUuid(id)) return null
      const [row] = await client.query(`SELECT ${COLUMNS} FROM users WHERE id = $1::uuid`, [id])
      return row === undefined ? null : userOf(row)
    },
  }
}
