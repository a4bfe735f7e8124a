import type { Company, CompanyRepository } from '../ports/storage.js'
import { snapshot } from './snapshot.js'
import type { Statement } from './undo-log.js'

export interface CompanyTable {
  readonly rows: Map<number, Company>
  /** Company ids by public UUID, which is unique. */
  readonly byPublicId: Map<string, number>
  /** Like a database sequence, not taken back by a rollback, so an id is never handed out twice. */
  lastId: number
}

export function createCompanyTable(): CompanyTable {
  return { rows: new Map(), byPublicId: new Map(), lastId: 0 }
}

export function createCompanyRepository(options: {
  companies: CompanyTable
  statement: Statement
}): CompanyRepository {
  const { companies, statement } = options

  return {
    create: ({ companyName, publicId, at }) =>
      statement((log) => {
        if (companies.byPublicId.has(publicId)) throw new Error(`Company ${publicId} already exists`)
        companies.lastId += 1
        const company = snapshot<Company>({
          id: companies.lastId,
          companyId: publicId,
          companyName,
          createdAt: at.toISOString(),
        })
        log.set(companies.rows, company.id, company)
        log.set(companies.byPublicId, publicId, company.id)
        return company
      }),

    get: ({ id }) => statement(() => companies.rows.get(id) ?? null),
  }
}
