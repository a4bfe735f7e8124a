import type { KnowledgeDocument, KnowledgeDocumentRepository } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from './paging.js'
import { snapshot } from './snapshot.js'
import type { Statement } from './undo-log.js'

interface StoredDocument {
  readonly document: KnowledgeDocument
  readonly order: number
}

export interface KnowledgeDocumentTable {
  readonly rows: Map<string, StoredDocument>
  /** Like a database sequence, not taken back by a rollback. */
  lastOrder: number
}

export function createKnowledgeDocumentTable(): KnowledgeDocumentTable {
  return { rows: new Map(), lastOrder: 0 }
}

export function createKnowledgeDocumentRepository(options: {
  documents: KnowledgeDocumentTable
  statement: Statement
}): KnowledgeDocumentRepository {
  const { documents, statement } = options
  const owned = (stored: StoredDocument | undefined, companyId: number, agentId: number) =>
    stored !== undefined && stored.document.companyId === companyId && stored.document.agentId === agentId

  return {
    create: ({ at, ...fields }) =>
      statement((log) => {
        if (documents.rows.has(fields.id)) throw new Error(`knowledge document ${fields.id} already exists`)
        documents.lastOrder += 1
        const document = snapshot<KnowledgeDocument>({ ...fields, createdAt: at.toISOString() })
        log.set(documents.rows, fields.id, { document, order: documents.lastOrder })
        return document
      }),

    get: ({ companyId, agentId, id }) =>
      statement(() => {
        const stored = documents.rows.get(id)
        return owned(stored, companyId, agentId) ? stored!.document : null
      }),

    list: ({ companyId, agentId, limit, cursor }) =>
      statement(() => {
        let after = 0
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isNumberTuple(position, 1)) return emptyPage<KnowledgeDocument>()
          after = position[0]!
        }
        const remaining = [...documents.rows.values()]
          .filter((stored) => owned(stored, companyId, agentId) && stored.order > after)
          .sort((a, b) => a.order - b.order)
        const page = takePage(remaining, limit, (stored) => encodeCursor([stored.order]))
        return { items: page.items.map((stored) => stored.document), nextCursor: page.nextCursor }
      }),

    delete: ({ companyId, agentId, id }) =>
      statement((log) => {
        if (!owned(documents.rows.get(id), companyId, agentId)) return false
        log.delete(documents.rows, id)
        return true
      }),
  }
}
