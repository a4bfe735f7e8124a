import type { Repositories } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { assertPageLimit, decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from '../paging.js'
import { isIntegerId, isUuid, timeParameter, toInteger, toIso } from '../sql-values.js'

// Derived from the port rather than imported: core's index does not export these two names yet.
type KnowledgeDocumentRepository = Repositories['knowledgeDocuments']
type KnowledgeDocument = Awaited<ReturnType<KnowledgeDocumentRepository['create']>>

const COLUMNS = 'id, company_id, agent_id, title, content, created_at, insertion'

function documentOf(row: DbRow): KnowledgeDocument {
  return {
    id: String(row.id),
    companyId: toInteger(row.company_id),
    agentId: toInteger(row.agent_id),
    title: String(row.title),
    content: String(row.content),
    createdAt: toIso(row.created_at),
  }
}

export function createKnowledgeDocumentRepository(client: DbClient): KnowledgeDocumentRepository {
  return {
    async create({ at, ...document }) {
      const [row] = await client.query(
        `INSERT INTO knowledge_documents (id, company_id, agent_id, title, content, created_at)
        VALUES ($1::uuid, $2, $3, $4, $5, $6::timestamptz)
        ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
        [
          document.id,
          document.companyId,
          document.agentId,
          document.title,
          document.content,
          timeParameter(at),
        ],
      )
      if (row === undefined) throw new Error(`Knowledge document ${document.id} already exists`)
      return documentOf(row)
    },

    async get({ companyId, agentId, id }) {
      if (!isUuid(id) || !isIntegerId(agentId)) return null
      const [row] = await client.query(
        `SELECT ${COLUMNS} FROM knowledge_documents WHERE id = $1::uuid AND company_id = $2 AND agent_id = $3`,
        [id, companyId, agentId],
      )
      return row === undefined ? null : documentOf(row)
    },

    async list({ companyId, agentId, limit, cursor }) {
      assertPageLimit(limit)
      if (!isIntegerId(agentId)) return emptyPage<KnowledgeDocument>()
      let after = 0
      if (cursor !== undefined) {
        const position = decodeCursor(cursor)
        if (!isNumberTuple(position, 1)) return emptyPage<KnowledgeDocument>()
        after = position[0]!
      }
      const rows = await client.query(
        `SELECT ${COLUMNS} FROM knowledge_documents
        WHERE company_id = $1 AND agent_id = $2 AND insertion > $3
        ORDER BY insertion LIMIT $4`,
        [companyId, agentId, after, limit + 1],
      )
      return takePage(rows, limit, documentOf, (row) => encodeCursor([toInteger(row.insertion)]))
    },

    async delete({ companyId, agentId, id }) {
      if (!isUuid(id) || !isIntegerId(agentId)) return false
      const rows = await client.query(
        'DELETE FROM knowledge_documents WHERE id = $1::uuid AND company_id = $2 AND agent_id = $3 RETURNING id',
        [id, companyId, agentId],
      )
      return rows.length > 0
    },
  }
}
