import type { KnowledgePassage } from './llm-provider.js'

export interface KnowledgeDocumentInput {
  readonly companyId: number
  readonly agentId: number
  readonly documentId: string
  readonly content: string
}

/** Passages of an agent's knowledge documents, searchable by a customer's message. */
export interface KnowledgeIndex {
  add(document: KnowledgeDocumentInput): Promise<void>
  remove(options: { companyId: number; documentId: string }): Promise<void>
  /** Best first; only passages that share at least one word with the query. */
  search(options: {
    companyId: number
    agentId: number
    query: string
    limit: number
  }): Promise<KnowledgePassage[]>
}
