import type { KnowledgeDocumentInput, KnowledgeIndex } from '../ports/knowledge-index.js'
import type { KnowledgePassage } from '../ports/llm-provider.js'
import { splitPassages } from './split-passages.js'
import { contentWords, passageScore, sharedWords } from './text-words.js'

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
 * A knowledge index held in memory, ranking passages by how many of the message's content words
 * they share, then by BM25 (`passageScore`). Word
 * statistics are taken over the searched agent's passages only, so one agent's documents never
 * change another's ranking.
 */
export function createMemoryKnowledgeIndex(): KnowledgeIndex {
  // Each agent's documents apart, so a search reads only the searched agent's passages. A Map
  // keeps insertion order, which breaks ties between equally scored passages.
  const agents = new Map<string, Map<string, IndexedDocument>>()
  /** The agent holding each document, so a removal names only the company and the document. */
  const agentOfDocument = new Map<string, string>()

  const remove = (key: string): void => {
    const agent = agentOfDocument.get(key)
    if (agent === undefined) return
    agentOfDocument.delete(key)
    const documents = agents.get(agent)!
    documents.delete(key)
    if (documents.size === 0) agents.delete(agent)
  }

  return {
    async add(document: KnowledgeDocumentInput): Promise<void> {
      const key = documentKey(document.companyId, document.documentId)
      const agent = agentKey(document.companyId, document.agentId)
      const passages = splitPassages(document.content).map(indexPassage)
      // Removing first moves a replaced document to the end, as a fresh insertion would be.
      remove(key)
      let documents = agents.get(agent)
      if (documents === undefined) {
        documents = new Map()
        agents.set(agent, documents)
      }
      documents.set(key, {
        companyId: document.companyId,
        agentId: document.agentId,
        documentId: document.documentId,
        passages,
      })
      agentOfDocument.set(key, agent)
    },

    async remove(options: { companyId: number; documentId: string }): Promise<void> {
      remove(documentKey(options.companyId, options.documentId))
    },

    async search(options: {
      companyId: number
      agentId: number
      query: string
      limit: number
    }): Promise<KnowledgePassage[]> {
      if (!(options.limit >= 1)) return []
      const documents = agents.get(agentKey(options.companyId, options.agentId))
      // Most agents have no documents: their turns skip splitting the query into words.
      if (documents === undefined) return []
      // Each distinct query word with its place in the query.
      const queryWords = new Map<string, number>()
      for (const word of contentWords(options.query))
        if (!queryWords.has(word)) queryWords.set(word, queryWords.size)
      if (queryWords.size === 0) return []

      // One pass finds the query words each passage holds. It walks the smaller of the passage's
      // words and the query's, so a long message costs no more than the passages themselves (it
      // cost their product: a 4,000-character message against one 100,000-character document
      // took 0.3 s, a 100,000-character one 8 s of a blocked event loop).
      let passageCount = 0
      let totalLength = 0
      const containing = new Map<string, number>()
      const matches: { documentId: string; passage: IndexedPassage; words: string[]; position: number }[] = []
      for (const document of documents.values()) {
        for (const passage of document.passages) {
          const words = sharedWords(passage.wordCounts, queryWords)
          if (words.length > 0) {
            for (const word of words) containing.set(word, (containing.get(word) ?? 0) + 1)
            matches.push({ documentId: document.documentId, passage, words, position: passageCount })
          }
          passageCount += 1
          totalLength += passage.length
        }
      }
      const averageLength = totalLength / passageCount

      const scored = matches.map(({ documentId, passage, words, position }) => {
        const lengthFactor =
          1 - LENGTH_NORMALISATION + (LENGTH_NORMALISATION * passage.length) / averageLength
        let score = 0
        for (const word of words) {
          const count = passage.wordCounts.get(word)!
          // The "+ 1" form of BM25 keeps the weight positive even for a word in every passage, so
          // any passage sharing a word with the query scores above zero.
          const held = containing.get(word)!
          const weight = Math.log(1 + (passageCount - held + 0.5) / (held + 0.5))
          score += (weight * count * (TERM_SATURATION + 1)) / (count + TERM_SATURATION * lengthFactor)
        }
        return {
          passage: { documentId, text: passage.text, score: passageScore(words.length, score) },
          position,
        }
      })

      scored.sort((left, right) => right.passage.score - left.passage.score || left.position - right.position)
      return scored.slice(0, Math.floor(options.limit)).map(({ passage }) => passage)
    },
  }
}

/**
 * Keys joined at the first colon, which a number's text never holds, so they stay unambiguous; every
 * turn's search builds one, and `JSON.stringify` of a pair cost about 20 times a concatenation.
 */
function agentKey(companyId: number, agentId: number): string {
  return `${companyId}:${agentId}`
}

function documentKey(companyId: number, documentId: string): string {
  return `${companyId}:${documentId}`
}

function indexPassage(text: string): IndexedPassage {
  const words = contentWords(text)
  const wordCounts = new Map<string, number>()
  for (const word of words) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1)
  return { text, wordCounts, length: words.length }
}
