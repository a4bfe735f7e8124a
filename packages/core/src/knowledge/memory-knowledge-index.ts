import type { KnowledgeDocumentInput, KnowledgeIndex } from '../ports/knowledge-index.js'
import type { KnowledgePassage } from '../ports/llm-provider.js'
import { passageRelevance, type WordMatch } from './passage-relevance.js'
import { splitPassages } from './split-passages.js'
import { contentWords, passageScore } from './text-words.js'

interface IndexedPassage {
  readonly documentId: string
  readonly text: string
  /** Its distinct content words, to find its postings again when it goes. */
  readonly words: readonly string[]
  /** The number of content words, repeats included. */
  readonly length: number
  /** Larger for every passage added later: ties go to the earlier document, then position. */
  readonly insertion: number
}

/** One agent's passages as a search needs them, kept up to date as documents come and go. */
interface AgentKnowledge {
  /** Each content word with the passages holding it and how often each does. */
  readonly postings: Map<string, Map<IndexedPassage, number>>
  passageCount: number
  /** The content words of all its passages, repeats included. */
  wordTotal: number
}

interface IndexedDocument {
  readonly agentKey: string
  readonly agent: AgentKnowledge
  readonly passages: readonly IndexedPassage[]
}

/**
 * A knowledge index held in memory, ranking passages by how many of the message's content words
 * they share, then by BM25 (`passageScore`, `passageRelevance`). Word statistics are taken over
 * the searched agent's passages only, so one agent's documents never change another's ranking.
 *
 * Each agent has an inverted index (word → the passages holding it) and its passage count and word
 * total, kept as documents are added and removed: a search reads the postings of the message's
 * words and nothing else, so it costs the passages sharing a word with the message, not the whole
 * knowledge base (walking every passage of a 533,000-passage agent blocked the server for about a
 * second a message). A word most passages hold still brings in most of them.
 */
export function createMemoryKnowledgeIndex(): KnowledgeIndex {
  const agents = new Map<string, AgentKnowledge>()
  /** Every document, so a removal names only the company and the document. */
  const documents = new Map<string, IndexedDocument>()
  let insertions = 0

  const remove = (key: string): void => {
    const document = documents.get(key)
    if (document === undefined) return
    documents.delete(key)
    const { agent } = document
    for (const passage of document.passages) {
      for (const word of passage.words) {
        const holding = agent.postings.get(word)!
        holding.delete(passage)
        if (holding.size === 0) agent.postings.delete(word)
      }
      agent.passageCount -= 1
      agent.wordTotal -= passage.length
    }
    // An agent whose knowledge is gone (the agent deleted, most likely) leaves nothing behind.
    if (agent.passageCount === 0 && agents.get(document.agentKey) === agent) agents.delete(document.agentKey)
  }

  return {
    async add(document: KnowledgeDocumentInput): Promise<void> {
      const key = documentKey(document.companyId, document.documentId)
      const texts = splitPassages(document.content)
      // Removing first moves a replaced document to the end, as a fresh insertion would be.
      remove(key)
      const agentOfDocument = agentKey(document.companyId, document.agentId)
      let agent = agents.get(agentOfDocument)
      if (agent === undefined) {
        agent = { postings: new Map(), passageCount: 0, wordTotal: 0 }
        agents.set(agentOfDocument, agent)
      }
      const passages: IndexedPassage[] = []
      for (const text of texts) {
        const wordCounts = new Map<string, number>()
        const words = contentWords(text)
        for (const word of words) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1)
        const passage: IndexedPassage = {
          documentId: document.documentId,
          text,
          words: [...wordCounts.keys()],
          length: words.length,
          insertion: insertions++,
        }
        for (const [word, occurrences] of wordCounts) {
          let holding = agent.postings.get(word)
          if (holding === undefined) {
            holding = new Map()
            agent.postings.set(word, holding)
          }
          holding.set(passage, occurrences)
        }
        agent.passageCount += 1
        agent.wordTotal += passage.length
        passages.push(passage)
      }
      documents.set(key, { agentKey: agentOfDocument, agent, passages })
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
      const agent = agents.get(agentKey(options.companyId, options.agentId))
      // Most agents have no documents: their turns skip splitting the query into words.
      if (agent === undefined || agent.passageCount === 0) return []

      // The passages holding each distinct query word, taken in the query's order, so each
      // passage's matches add up in that order. A long message costs a lookup per word.
      const matched = new Map<IndexedPassage, WordMatch[]>()
      for (const word of new Set(contentWords(options.query))) {
        const holding = agent.postings.get(word)
        if (holding === undefined) continue
        for (const [passage, occurrences] of holding) {
          const match = { occurrences, passagesHolding: holding.size }
          const matches = matched.get(passage)
          if (matches === undefined) matched.set(passage, [match])
          else matches.push(match)
        }
      }

      const statistics = {
        passageCount: agent.passageCount,
        averageLength: agent.wordTotal / agent.passageCount,
      }
      const scored: { passage: KnowledgePassage; insertion: number }[] = []
      for (const [passage, matches] of matched) {
        const score = passageScore(matches.length, passageRelevance(matches, passage.length, statistics))
        scored.push({
          passage: { documentId: passage.documentId, text: passage.text, score },
          insertion: passage.insertion,
        })
      }
      scored.sort(
        (left, right) => right.passage.score - left.passage.score || left.insertion - right.insertion,
      )
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
