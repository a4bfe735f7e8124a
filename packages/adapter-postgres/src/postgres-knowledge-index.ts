import { createHash } from 'node:crypto'
import {
  contentWords,
  type KnowledgeIndex,
  type KnowledgePassage,
  passageScore,
  sharedWords,
  splitPassages,
} from '@switchboard/core'
import { assertDbOption, type Db } from './db.js'
import { ensureMigrated } from './migrate.js'
import { isIntegerId, toInteger } from './sql-values.js'
import { storableJson } from './storable-text.js'

export interface PostgresKnowledgeIndexOptions {
  /** The caller closes it. */
  readonly db: Db
}

/** Okapi BM25's usual constants, the memory index's: how fast repeats stop adding, how much length matters. */
const TERM_SATURATION = 1.2
const LENGTH_NORMALISATION = 0.75

/** The first key of the advisory lock that makes two adds of one document wait for each other. */
const DOCUMENT_LOCK_KEY = 1_935_762_042

interface Candidate {
  readonly documentId: string
  readonly text: string
  readonly wordCounts: ReadonlyMap<string, number>
  readonly length: number
}

/**
 * A knowledge index on PostgreSQL full-text search. Passages and their content words are found
 * exactly as core's memory index finds them (`splitPassages`, `contentWords`), and kept as they are,
 * without stemming or a locale; a search joins the agent's words with the query's to find the
 * passages that share a word with it (the `search` tsvector and its GIN index are still written,
 * and no longer read). Those passages are then ranked as the memory index ranks them (shared
 * words, then BM25 over the searched agent's passages: `passageScore`), so both indexes answer the
 * same passages in the same order.
 */
export async function createPostgresKnowledgeIndex(
  options: PostgresKnowledgeIndexOptions,
): Promise<KnowledgeIndex> {
  assertDbOption('createPostgresKnowledgeIndex', options)
  const { db } = options
  await ensureMigrated(db)

  return {
    async add(document) {
      const passages = splitPassages(document.content).map((text) => ({
        text,
        words: contentWords(text).map(lexemeOf),
      }))
      await db.transaction(async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [
          DOCUMENT_LOCK_KEY,
          `${document.companyId}:${document.documentId}`,
        ])
        // Removed and added again, so a replaced document ranks after older ones on ties, as a
        // fresh insertion would in the memory index.
        await client.query('DELETE FROM knowledge_passages WHERE company_id = $1 AND document_id = $2', [
          document.companyId,
          document.documentId,
        ])
        if (passages.length === 0) return
        await client.query(
          `INSERT INTO knowledge_passages (company_id, agent_id, document_id, position, text, words)
          SELECT $1, $2, $3, passage.position - 1, passage.value ->> 'text',
            ARRAY(SELECT jsonb_array_elements_text(passage.value -> 'words'))
          FROM jsonb_array_elements($4::jsonb) WITH ORDINALITY AS passage (value, position)
          ORDER BY passage.position`,
          [document.companyId, document.agentId, document.documentId, storableJson(passages)],
        )
      })
    },

    async remove({ companyId, documentId }) {
      if (!isIntegerId(companyId)) return
      await db.query('DELETE FROM knowledge_passages WHERE company_id = $1 AND document_id = $2', [
        companyId,
        documentId,
      ])
    },

    async search({ companyId, agentId, query, limit }) {
      const queryWords = [...new Set(contentWords(query).map(lexemeOf))]
      if (queryWords.length === 0 || !(limit >= 1)) return []
      if (!isIntegerId(companyId) || !isIntegerId(agentId)) return []
      // The agent's passage count and word total come from the same statement, so they describe
      // the same snapshot as the matching passages. Those are found by joining the agent's words
      // with the query's on a hash: the cost is their sum. (A tsquery of every query word was
      // tested against each passage, and so is `= ANY` under the prepared statement's generic
      // plan: their product, 1.3 s of the server for a 100,000-character message against 14,000
      // passages. The GIN index also read the postings of every company's passages.)
      const rows = await db.query<Row>(
        `SELECT document_id, text, words,
          (SELECT count(*) FROM knowledge_passages WHERE company_id = $1 AND agent_id = $2) AS passages,
          (SELECT coalesce(sum(cardinality(words)), 0) FROM knowledge_passages
            WHERE company_id = $1 AND agent_id = $2) AS total_words
        FROM knowledge_passages
        WHERE id IN (SELECT passage.id FROM knowledge_passages passage, unnest(passage.words) AS word
          WHERE passage.company_id = $1 AND passage.agent_id = $2 AND word IN (SELECT unnest($3::text[])))
        ORDER BY id`,
        [companyId, agentId, queryWords],
      )
      const [first] = rows
      if (first === undefined) return []
      const passageCount = toInteger(first.passages)
      const averageLength = toInteger(first.total_words) / passageCount
      return rank(rows.map(candidateOf), queryWords, { passageCount, averageLength }).slice(
        0,
        Math.floor(limit),
      )
    },
  }
}

/** The longest lexeme a tsvector or tsquery takes, in bytes. */
const LEXEME_MAX_BYTES = 2046

/**
 * A content word as the index stores it: itself, or for a word too long to be a lexeme, a digest
 * of it. Content words are letters only, so a digest (with its colon) never equals a real word, and
 * the same long word in a document and in a query still meet.
 */
function lexemeOf(word: string): string {
  if (word.length * 3 <= LEXEME_MAX_BYTES || Buffer.byteLength(word) <= LEXEME_MAX_BYTES) return word
  return `long:${createHash('sha256').update(word).digest('hex')}`
}

interface Row {
  readonly document_id: string
  readonly text: string
  readonly words: string[]
  readonly passages: unknown
  readonly total_words: unknown
}

function candidateOf(row: Row): Candidate {
  const wordCounts = new Map<string, number>()
  for (const word of row.words) wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1)
  return { documentId: row.document_id, text: row.text, wordCounts, length: row.words.length }
}

/**
 * The memory index's BM25, over the passages that share a word with the query: every passage
 * holding a query word is among them, so they are enough to count how many passages hold each
 * word. Ties keep the order of `candidates` (document insertion, then passage position).
 */
function rank(
  candidates: readonly Candidate[],
  queryWords: readonly string[],
  statistics: { passageCount: number; averageLength: number },
): KnowledgePassage[] {
  const { passageCount, averageLength } = statistics
  // Each query word with its place in the query, so a passage's words add up in the query's order.
  const queryPositions = new Map(queryWords.map((word, position) => [word, position]))
  // A passage's query words are found by walking the smaller of its words and the query's: a long
  // message then costs no more than the passages (walking the query for every passage cost their
  // product, 4.9 s for a 100,000-character message against one 100,000-character document).
  const shared = candidates.map((candidate) => sharedWords(candidate.wordCounts, queryPositions))
  const containing = new Map<string, number>()
  for (const words of shared) for (const word of words) containing.set(word, (containing.get(word) ?? 0) + 1)
  const scored = candidates.map((candidate, position) => {
    const lengthFactor = 1 - LENGTH_NORMALISATION + (LENGTH_NORMALISATION * candidate.length) / averageLength
    let score = 0
    for (const word of shared[position]!) {
      const count = candidate.wordCounts.get(word)!
      const held = containing.get(word)!
      const weight = Math.log(1 + (passageCount - held + 0.5) / (held + 0.5))
      score += (weight * count * (TERM_SATURATION + 1)) / (count + TERM_SATURATION * lengthFactor)
    }
    const words = shared[position]!.length
    return {
      passage: { documentId: candidate.documentId, text: candidate.text, score: passageScore(words, score) },
      position,
    }
  })
  return scored
    .filter(({ passage }) => passage.score > 0)
    .sort((left, right) => right.passage.score - left.passage.score || left.position - right.position)
    .map(({ passage }) => passage)
}
