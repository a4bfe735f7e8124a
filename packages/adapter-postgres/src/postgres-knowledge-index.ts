import { createHash } from 'node:crypto'
import {
  contentWords,
  type KnowledgeIndex,
  type KnowledgePassage,
  type KnowledgeStatistics,
  passageRelevance,
  passageScore,
  splitPassages,
  type WordMatch,
} from '@switchboard/core'
import { assertDbOption, type Db } from './db.js'
import { ensureMigrated } from './migrate.js'
import { isIntegerId, toInteger } from './sql-values.js'
import { storableJson } from './storable-text.js'

export interface PostgresKnowledgeIndexOptions {
  /** The caller closes it. */
  readonly db: Db
}

/** The first key of the advisory lock that makes two adds of one document wait for each other. */
const DOCUMENT_LOCK_KEY = 1_935_762_042
/** The first key of the advisory locks an add takes on the agents whose totals it changes. */
const AGENT_LOCK_KEY = 1_935_762_043

/**
 * A knowledge index on PostgreSQL. Passages and their content words are found exactly as core's
 * memory index finds them (`splitPassages`, `contentWords`), and kept as they are, without
 * stemming or a locale. Triggers keep, in the statement that adds or removes passages, each
 * word's postings (`knowledge_postings`: the passages holding it) and each agent's passage count
 * and word total (`knowledge_agent_totals`), so a search reads the postings of the message's
 * words and one totals row, not every passage of the agent (which took 2.6 s a message for an
 * agent of 533,000 passages). The passages found are ranked as the memory index ranks them
 * (shared words, then BM25 over the searched agent's passages: `passageScore`,
 * `passageRelevance`), so both indexes answer the same passages in the same order; only the best
 * ones' texts are read.
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
        // A document added for another agent moves there, changing both agents' totals rows. Their
        // locks first, in key order, so that two documents moving between the same agents in
        // opposite directions wait for each other instead of deadlocking. The agent it is in stays
        // put while the document's lock is held, and this statement's snapshot follows that lock.
        await client.query(
          `SELECT count(pg_advisory_xact_lock($1, lock_key)) AS locked FROM (
            SELECT DISTINCT hashtext(company_id || ':' || agent_id) AS lock_key FROM (
              SELECT company_id, agent_id FROM knowledge_passages WHERE company_id = $2 AND document_id = $3
              UNION ALL SELECT $2::integer, $4::integer
            ) AS agents
            ORDER BY lock_key
          ) AS lock_keys`,
          [AGENT_LOCK_KEY, document.companyId, document.documentId, document.agentId],
        )
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
      // One snapshot for the statistics, the postings and the texts, so a document added or
      // removed meanwhile is either wholly counted and found, or not at all.
      return db.transaction(async (client) => {
        const [, totalsRows, postings] = await Promise.all([
          client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY'),
          client.query<TotalsRow>(
            'SELECT passages, words FROM knowledge_agent_totals WHERE company_id = $1 AND agent_id = $2',
            [companyId, agentId],
          ),
          // One primary-key descent per distinct word of the message: a long message costs its
          // words, a common word the passages holding it. OFFSET 0 keeps the planner from turning
          // it into a scan of all the agent's postings filtered by the words (PGlite chose that for
          // a join, PostgreSQL 15 for `word = ANY($3)`).
          client.query<PostingRow>(
            `SELECT query.place, posting.passage_id, posting.occurrences, posting.passage_words
            FROM unnest($3::text[]) WITH ORDINALITY AS query (word, place),
            LATERAL (SELECT passage_id, occurrences, passage_words FROM knowledge_postings
              WHERE company_id = $1 AND agent_id = $2 AND word = query.word OFFSET 0) AS posting`,
            [companyId, agentId, queryWords],
          ),
        ])
        const [totals] = totalsRows
        if (totals === undefined || postings.length === 0) return []
        const passageCount = toInteger(totals.passages)
        const best = rank(postings, {
          passageCount,
          averageLength: toInteger(totals.words) / passageCount,
        }).slice(0, Math.floor(limit))
        const texts = await client.query<TextRow>(
          'SELECT id, document_id, text FROM knowledge_passages WHERE id = ANY($1::bigint[])',
          [best.map((passage) => passage.id)],
        )
        const textOf = new Map(texts.map((row) => [toInteger(row.id), row]))
        return best.map(({ id, score }): KnowledgePassage => {
          const row = textOf.get(id)!
          return { documentId: row.document_id, text: row.text, score }
        })
      })
    },
  }
}

/**
 * The longest lexeme a tsvector takes, in bytes; also below the largest key of a B-tree index
 * (about 2,700 bytes), so a stored word always fits the postings' primary key.
 */
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

interface TotalsRow {
  readonly passages: unknown
  readonly words: unknown
}

interface PostingRow {
  /** The word's place among the message's distinct words, from 1. */
  readonly place: unknown
  readonly passage_id: unknown
  readonly occurrences: number
  readonly passage_words: number
}

interface TextRow {
  readonly id: unknown
  readonly document_id: string
  readonly text: string
}

/**
 * The memory index's ranking, over the postings of the message's words: every passage holding one
 * of them is there, so counting its rows per word counts the passages holding the word. Ties go to
 * the passage added first (`knowledge_passages.id`: document insertion, then position).
 */
function rank(
  postings: readonly PostingRow[],
  statistics: KnowledgeStatistics,
): { id: number; score: number }[] {
  const holding = new Map<number, number>()
  const candidates = new Map<number, { length: number; places: { place: number; occurrences: number }[] }>()
  for (const row of postings) {
    const place = toInteger(row.place)
    const id = toInteger(row.passage_id)
    holding.set(place, (holding.get(place) ?? 0) + 1)
    const match = { place, occurrences: row.occurrences }
    const candidate = candidates.get(id)
    if (candidate === undefined) candidates.set(id, { length: row.passage_words, places: [match] })
    else candidate.places.push(match)
  }
  const scored: { id: number; score: number }[] = []
  for (const [id, { length, places }] of candidates) {
    // In the message's order, as the memory index adds them up.
    places.sort((left, right) => left.place - right.place)
    const matches = places.map(
      ({ place, occurrences }): WordMatch => ({ occurrences, passagesHolding: holding.get(place)! }),
    )
    scored.push({ id, score: passageScore(matches.length, passageRelevance(matches, length, statistics)) })
  }
  return scored.sort((left, right) => right.score - left.score || left.id - right.id)
}
