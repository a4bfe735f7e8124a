import type { KnowledgeDocumentInput, KnowledgeIndex } from '../ports/knowledge-index.js'
import type { KnowledgePassage } from '../ports/llm-provider.js'
import { splitPassages } from './split-passages.js'
import { contentWords } from './text-words.js'

/** Okapi BM25's usual constants: how fast repeats stop adding, and how much length matters. */
const TERM_SATURATION = 1.2
const LENGTH_NORMALISATION = 0.75

interface IndexedPassage {
  readonly text: string
  /** How often each content word occurs in the passage. */
  readonly wordCounts: ReadonlyMap<string, number>
  /** The number of content words, repeats included. */
  readonly length: number
}

interface IndexedDocument {
  readonly companyId: number
  readonly agentId: number
  readonly documentId: string
  readonly passages: readonly IndexedPassage[]
}

/**
 * A knowledge index held in memory, ranking passages with BM25 over their content words. Word
 * statistics are taken over the searched agent's passages only, so one agent's documents never
 * change another's ranking.
 */
export function createMemoryKnowledgeIndex(): KnowledgeIndex {
  // A Map keeps insertion order, which breaks ties between equally scored passages.
  const documents = new Map<string, IndexedDocument>()

  return {
    async add(document: KnowledgeDocumentInput): Promise<void> {
      const key = documentKey(document.companyId, document.documentId)
      // Deleting first moves a replaced document to the end, as a fresh insertion would be.
      documents.delete(key)
      documents.set(key, {
        companyId: document.companyId,
        agentId: document.agentId,
        documentId: document.documentId,
        passages: splitPassages(document.content).map(indexPassage),
      })
    },

    async remove(options: { companyId: number; documentId: string }): Promise<void> {
      documents.delete(documentKey(options.companyId, options.documentId))
    },

    async search(options: {
      companyId: number
      agentId: number
      query: string
      limit: number
    }): Promise<KnowledgePassage[]> {
      if (!(options.limit >= 1)) return []
      const candidates: { documentId: string; passage: IndexedPassage }[] = []
      for (const document of documents.values()) {
        if (document.companyId !== options.companyId || document.agentId !== options.agentId) continue
        for (const passage of document.passages) candidates.push({ documentId: document.documentId, passage })
      }
      // Most agents have no documents: their turns skip splitting the query into words.
      if (candidates.length === 0) return []
      const queryWords = new Set(contentWords(options.query))
      if (queryWords.size === 0) return []

      const passageCount = candidates.length
      const averageLength = candidates.reduce((sum, { passage }) => sum + passage.length, 0) / passageCount

      const inverseDocumentFrequency = new Map<string, number>()
      for (const word of queryWords) {
        const containing = candidates.filter(({ passage }) => passage.wordCounts.has(word)).length
        // The "+ 1" form of BM25 keeps the weight positive even for a word in every passage, so
        // any passage sharing a word with the query scores above zero.
        inverseDocumentFrequency.set(
          word,
          Math.log(1 + (passageCount - containing + 0.5) / (containing + 0.5)),
        )
      }

      const scored: { passage: KnowledgePassage; position: number }[] = []
      candidates.forEach(({ documentId, passage }, position) => {
        let score = 0
        for (const [word, weight] of inverseDocumentFrequency) {
          const count = passage.wordCounts.get(word) ?? 0
          if (count === 0) continue
          const lengthFactor =
            1 - LENGTH_NORMALISATION + (LENGTH_NORMALISATION * passage.length) / averageLength
          score += (weight * count * (TERM_SATURATION + 1)) / (count + TERM_SATURATION * lengthFactor)
        }
        if (score > 0) scored.push({ passage: { documentId, text: passage.text, score }, position })
      })

      scored.sort((left, right) => right.passage.score - left.passage.score || left.position - right.position)
      return scored.slice(0, Math.floor(options.limit)).map(({ passage }) => passage)
    },
  }
}

function documentKey(companyId: number, documentId: string): string {
  return JSON.stringify([companyId, documentId])
}

function indexPassage(text: string): IndexedPassage {
  const words = contentWords(text)
  const wordCounts = new Map<string, number>()
  for (const word of words) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1)
  return { text, wordCounts, length: words.length }
}
