import type { Company, CompanyRepository } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { isIntegerId, timeParameter, toInteger, toIso } from '../sql-values.js'

function companyOf(row: DbRow): Company {
  return {
    id: toInteger(row.id),
    companyId: String(row.public_id),
    companyName: String(row.name),
    createdAt: toIso(row.created_at),
  }
}

export function createCompanyRepository(client: DbClient): CompanyRepository {
  return {
    async create({ companyName, publicId, at }) {
      // ON CONFLICT DO NOTHING, then a throw: a unique violation would abort the caller's whole
      // transaction, where the memory storage only fails this call.
      const [row] = await client.query(
        `INSERT INTO companies (public_id, name, created_at) VALUES ($1::uuid, $2, $3::timestamptz)
        ON CONFLICT DO NOTHING RETURNING id, public_id, name, created_at`,
        [publicId, companyName, timeParameter(at)],
      )
      if (row === undefined) throw new Error(`Company ${publicId} already exists`)
      return companyOf(row)
    },

    async get({ id }) {
      if (!isIntegerId(id)) return null
      const [row] = await client.query(
        'SELECT id, public_id, name, created_at FROM companies WHERE id = $1',
        [id],
      )
      return row === undefined ? null : companyOf(row)
    },
  }
}
