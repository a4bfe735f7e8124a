import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Clock, IdGenerator } from '../ports/clock.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import type { KnowledgeDocument, Page, PageRequest, Storage } from '../ports/storage.js'

export interface KnowledgeDocumentView {
  readonly id: string
  readonly title: string
  readonly content: string
  readonly createdAt: string
}

/** An agent's knowledge base: documents kept in storage, their passages searchable in the index. */
export interface KnowledgeService {
  add(
    target: { companyId: number; agentId: number },
    input: { title: string; content: string },
  ): Promise<Result<KnowledgeDocumentView, SwitchboardError>>
  list(
    target: { companyId: number; agentId: number },
    page: PageRequest,
  ): Promise<Result<Page<KnowledgeDocumentView>, SwitchboardError>>
  remove(target: {
    companyId: number
    agentId: number
    documentId: string
  }): Promise<Result<null, SwitchboardError>>
}

const agentNotFound = () => switchboardError('NOT_FOUND', 'agent not found')

function view(document: KnowledgeDocument): KnowledgeDocumentView {
  return { id: document.id, title: document.title, content: document.content, createdAt: document.createdAt }
}

export function createKnowledgeService(options: {
  storage: Storage
  knowledge: KnowledgeIndex
  clock: Clock
  ids: IdGenerator
}): KnowledgeService {
  const { storage, knowledge } = options
  const agentExists = async (companyId: number, agentId: number) =>
    (await storage.agents.get({ companyId, id: agentId })) !== null

  return {
    async add({ companyId, agentId }, input) {
      if (!(await agentExists(companyId, agentId))) return err(agentNotFound())
      const document = await storage.knowledgeDocuments.create({
        id: options.ids.uuid(),
        companyId,
        agentId,
        title: input.title,
        content: input.content,
        at: options.clock.now(),
      })
      try {
        await knowledge.add({ companyId, agentId, documentId: document.id, content: document.content })
      } catch (error) {
        // A document that cannot be searched must not look stored.
        await storage.knowledgeDocuments.delete({ companyId, agentId, id: document.id })
        throw error
      }
      return ok(view(document))
    },

    async list({ companyId, agentId }, page) {
      if (!(await agentExists(companyId, agentId))) return err(agentNotFound())
      const documents = await storage.knowledgeDocuments.list({ companyId, agentId, ...page })
      return ok({ items: documents.items.map(view), nextCursor: documents.nextCursor })
    },

    async remove({ companyId, agentId, documentId }) {
      if (!(await agentExists(companyId, agentId))) return err(agentNotFound())
      const notFound = () => err(switchboardError('NOT_FOUND', 'document not found'))
      if ((await storage.knowledgeDocuments.get({ companyId, agentId, id: documentId })) === null) {
        return notFound()
      }
      // The passages go first: a failure between the two steps leaves the document listed, so
      // asking again removes it, instead of passages no document names, answering customers for good.
      await knowledge.remove({ companyId, documentId })
      const deleted = await storage.knowledgeDocuments.delete({ companyId, agentId, id: documentId })
      return deleted ? ok(null) : notFound()
    },
  }
}
