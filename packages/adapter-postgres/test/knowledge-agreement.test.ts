import { randomBytes, randomInt } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  contentWords,
  createMemoryKnowledgeIndex,
  createOfflineProvider,
  type KnowledgeIndex,
  type KnowledgePassage,
  storableText,
} from '@switchboard/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, createPgliteDb, createPostgresKnowledgeIndex, type Db } from '../src/index.js'

/**
 * The offline reply is the best passage and the prompt holds the 3 best (CONTRACT §10), so which
 * passages a search answers, and in which order, must not depend on the storage the server runs
 * on. Each run applies one sequence of adds, removes and searches to a fresh memory index and to
 * the SQL index, and every search must answer alike; another makes batches of changes at once.
 * With DATABASE_URL, on PostgreSQL too. For a longer run: KNOWLEDGE_AGREEMENT_RUNS=500, and
 * KNOWLEDGE_AGREEMENT_MAX_OPERATIONS for longer sequences.
 */
const RUNS = Number(process.env.KNOWLEDGE_AGREEMENT_RUNS ?? 10)
const MAX_OPERATIONS = Number(process.env.KNOWLEDGE_AGREEMENT_MAX_OPERATIONS ?? 16)
/** As many passages as a turn puts in the prompt (run-turn's KNOWLEDGE_PASSAGES). */
const PROMPT_PASSAGES = 3
/**
 * Both sides compute scores with the same functions from the same counts, in the same order, so
 * they agree to the last bit today; the order of passages is compared exactly, their scores
 * within this, so summing in another order would not fail a search that answers alike.
 */
const SCORE_TOLERANCE = 1e-9
/** A run takes tens of milliseconds; a slow machine shared with other tests gets ample room. */
const TIMEOUT = 20_000 + RUNS * MAX_OPERATIONS * 50

const connectionString = process.env.DATABASE_URL

/**
 * Two companies with documents and a third without, each with the same agent ids, so a search of
 * another company's or agent's knowledge checks that nothing leaks across.
 */
const COMPANIES = 3
const AGENT_IDS = [1, 2, 3] as const

/** Words that collide once lowercased and composed (NFC), and some that only look alike. */
const TOPIC_WORDS = [
  'refund',
  'Refund',
  'REFUND',
  'refunds',
  'card',
  'CARD',
  'shipping',
  'ship',
  'free',
  'café',
  'cafe\u0301',
  'CAFÉ',
  'cafe',
  'Straße',
  'STRASSE',
  'İstanbul',
  'istanbul',
  'ǅemal',
  'ﬁle',
  'file',
  'возврат',
  'ВОЗВРАТ',
  'किताब',
  'लौटाएँ',
  'שָׁלוֹם',
  '日本語',
  '𝒜𝒷𝒸',
  'ΣΟΦΟΣ',
  'σοφος',
  'naïve',
  'NAÏVE',
]
/** Words the index must not count: stop words, contraction stems, too short, digits. */
const IGNORED_WORDS = ['the', 'and', 'about', 'please', "don't", "isn't", 'will', 'to', 'is', 'a', 'ok']
const DIGIT_WORDS = ['123', '2026', '4th', 'abc123def', 'card2card']
/**
 * U+0000 and lone surrogates included: the SQL index keeps them as U+FFFD, as the storage keeps
 * every text, so the test hands both indexes what they get in the server (`storableText`: the
 * document as stored, the message as ingested). A backslash spelling an escape must stay as it is.
 */
const PUNCTUATION = [
  '.',
  ',',
  '?!',
  '—',
  '…',
  '-',
  '"',
  "'",
  '(',
  ')',
  ':',
  '\uFFFD',
  '\u0301',
  '\u0000',
  '\ud83d',
  '\ude00',
  '\\u0000',
  '\\ud800',
]
/**
 * Around the longest word the SQL index stores as itself (2046 bytes), in letters of one to four
 * bytes, and 2046 letters of two bytes, past the largest key its postings' index takes even
 * compressed (2,704 bytes): longer ones are stored as a digest, and must still meet the same word
 * in a query. Letters vary, as in a real word: one letter repeated compresses to a few bytes.
 */
const LONG_WORDS = [
  ['abcdefghijklmnopqrstuvwxyz', 1],
  ['ABCDEFGHIJKLMNOPQRSTUVWXYZ', 1],
  ['абвгдежзийклмнопрстуфхцчшщъыьэюя', 2],
  ['日本語漢字文書知識検索', 3],
  ['𝒜𝒞𝒟𝒢𝒥𝒦𝒩𝒪𝒫𝒬𝒮𝒯', 4],
].flatMap(([alphabet, bytes]) => {
  const perByte = (total: number) => Math.floor(total / (bytes as number))
  return [...new Set([perByte(2046), perByte(2046) + 1, 2046])].map((count) =>
    scrambled(alphabet as string, count),
  )
})

/** `count` letters of `alphabet` in an order that repeats no short run, the same at every call. */
function scrambled(alphabet: string, count: number): string {
  const letters = [...alphabet]
  let state = 1
  return Array.from({ length: count }, () => {
    state = (state * 48_271) % 2_147_483_647
    return letters[state % letters.length]
  }).join('')
}

/** Between words: spaces of several kinds, line breaks, and blank lines that split passages. */
const SEPARATORS = [
  ' ',
  '  ',
  '\t',
  '\u00a0',
  '\u3000',
  '\u2028',
  '\n',
  '\r\n',
  '\n\n',
  '\n \n',
  '\r\n\r\n',
  '\r\r',
  '\n\t\n\n',
  '\n\u00a0\n',
  '',
]

const topicWord = fc.constantFrom(...TOPIC_WORDS)
const word = fc.oneof(
  { arbitrary: topicWord, weight: 8 },
  // Repeats, which BM25 weighs with diminishing returns.
  {
    arbitrary: fc
      .tuple(topicWord, fc.integer({ min: 2, max: 6 }))
      .map(([repeated, times]) => Array.from({ length: times }, () => repeated).join(' ')),
    weight: 1,
  },
  { arbitrary: fc.constantFrom(...IGNORED_WORDS), weight: 2 },
  { arbitrary: fc.constantFrom(...DIGIT_WORDS), weight: 1 },
  { arbitrary: fc.constantFrom(...PUNCTUATION), weight: 2 },
  { arbitrary: fc.constantFrom(...LONG_WORDS), weight: 2 },
)
const separator = fc.oneof(
  { arbitrary: fc.constant(' '), weight: 6 },
  { arbitrary: fc.constantFrom(...SEPARATORS), weight: 4 },
)
/**
 * Empty and whitespace-only texts come as an empty array or separators alone. `size: 'max'`, here
 * and for sequences: fast-check stops arrays at 10 items otherwise, whatever their maxLength.
 */
const text = (maxLength: number) =>
  fc
    .array(
      fc.tuple(fc.oneof({ arbitrary: word, weight: 4 }, { arbitrary: separator, weight: 1 }), separator),
      {
        maxLength,
        size: 'max',
      },
    )
    .map((parts) => parts.flat().join(''))

const companyWithDocuments = fc.integer({ min: 0, max: COMPANIES - 2 })
const anyCompany = fc.integer({ min: 0, max: COMPANIES - 1 })
const agent = fc.integer({ min: 0, max: AGENT_IDS.length - 2 })
const anyAgent = fc.integer({ min: 0, max: AGENT_IDS.length - 1 })
/** Few, so documents are often replaced and removed; `FAQ` is another document than `faq`. */
const documentId = fc.oneof(
  { arbitrary: fc.constantFrom('faq', 'policy', 'doc:1'), weight: 6 },
  { arbitrary: fc.constantFrom('FAQ', 'dokümént', '', 'f47ac10b-58cc-4372-a567-0e02b2c3d479'), weight: 1 },
)
/** The prompt's 3, and limits a caller could pass by mistake. */
const limit = fc.oneof(
  { arbitrary: fc.constantFrom(1, 2, 3, 5, 100), weight: 6 },
  { arbitrary: fc.constantFrom(0, -1, 2.5, Number.POSITIVE_INFINITY, Number.NaN), weight: 1 },
)

type Change =
  | { readonly kind: 'add'; company: number; agent: number; documentId: string; content: string }
  | { readonly kind: 'remove'; company: number; documentId: string }
type Operation =
  | Change
  | { readonly kind: 'search'; company: number; agent: number; query: string; limit: number }

const add = fc.record({
  kind: fc.constant('add' as const),
  company: companyWithDocuments,
  agent,
  documentId,
  content: text(16),
})
const remove = fc.record({
  kind: fc.constant('remove' as const),
  company: fc.oneof({ arbitrary: companyWithDocuments, weight: 4 }, { arbitrary: anyCompany, weight: 1 }),
  documentId,
})
const search = fc.record({
  kind: fc.constant('search' as const),
  company: anyCompany,
  agent: anyAgent,
  query: text(6),
  limit,
})
const operation: fc.Arbitrary<Operation> = fc.oneof(
  { arbitrary: add, weight: 4 },
  { arbitrary: remove, weight: 2 },
  { arbitrary: search, weight: 3 },
)
/**
 * Changes of distinct documents, which leave the same passages in whatever order they are made:
 * a document added again for the other agent moves there, so two moving in opposite directions
 * at once are likely.
 */
const batch = fc.uniqueArray(fc.oneof({ arbitrary: add, weight: 3 }, { arbitrary: remove, weight: 1 }), {
  selector: (change) => `${change.company}:${change.documentId}`,
  minLength: 1,
  maxLength: 6,
})

/** Every topic word in one message: every passage with a word the index counts is ranked. */
const EVERY_WORD = [...TOPIC_WORDS, ...IGNORED_WORDS, ...DIGIT_WORDS, ...LONG_WORDS].join(' ')

/** Fresh companies for every run, so the runs sharing one SQL index never meet. */
let nextCompanyId = randomInt(1_000_000, 2_000_000_000)

async function runAgainst(sql: KnowledgeIndex, operations: readonly Operation[]): Promise<void> {
  const memory = createMemoryKnowledgeIndex()
  const offline = createOfflineProvider()
  const companyIds = Array.from({ length: COMPANIES }, () => nextCompanyId++)

  const searchBoth = async (
    step: string,
    search: { company: number; agent: number; query: string; limit: number },
  ): Promise<void> => {
    const options = {
      companyId: companyIds[search.company]!,
      agentId: AGENT_IDS[search.agent]!,
      query: storableText(search.query),
      limit: search.limit,
    }
    const [expected, actual] = await Promise.all([memory.search(options), sql.search(options)])
    expectWhatThePortPromises(step, expected, options.query)
    expect(actual.map(withoutScore), step).toEqual(expected.map(withoutScore))
    for (const [position, passage] of actual.entries()) {
      expect(
        Math.abs(passage.score - expected[position]!.score),
        `${step}: score of passage ${position}`,
      ).toBeLessThan(SCORE_TOLERANCE)
    }

    // What the customer would read from the offline provider, given a turn's search of each.
    const turnOptions = { ...options, limit: PROMPT_PASSAGES }
    const [memoryReply, sqlReply] = await Promise.all(
      [memory, sql].map(async (index) => {
        const knowledge = await index.search(turnOptions)
        const completion = await offline.complete({
          model: 'offline',
          messages: [{ role: 'user', content: options.query }],
          knowledge,
        })
        return completion.text
      }),
    )
    expect(sqlReply, `${step}: offline reply`).toBe(memoryReply)
  }

  for (const [position, operation] of operations.entries()) {
    if (operation.kind === 'search') await searchBoth(`operation ${position} (search)`, operation)
    else {
      await apply(memory, companyIds, operation)
      await apply(sql, companyIds, operation)
    }
  }
  // Whatever the sequence searched, every agent's whole ranking is compared once it is over.
  for (let company = 0; company < COMPANIES; company++) {
    for (let agent = 0; agent < AGENT_IDS.length; agent++) {
      await searchBoth(`after the sequence, company ${company} agent ${agent}`, {
        company,
        agent,
        query: EVERY_WORD,
        limit: 1_000,
      })
    }
  }
}

/** Made as the server makes it: the document as stored, with `storableText`. */
async function apply(index: KnowledgeIndex, companyIds: readonly number[], change: Change): Promise<void> {
  const companyId = companyIds[change.company]!
  if (change.kind === 'remove') await index.remove({ companyId, documentId: change.documentId })
  else {
    await index.add({
      companyId,
      agentId: AGENT_IDS[change.agent]!,
      documentId: change.documentId,
      content: storableText(change.content),
    })
  }
}

/**
 * Batches of changes made one after the other in memory and all at once in SQL, where they may
 * commit in any order: each must still succeed, and leave the same passages with the same
 * scores. Only the order of passages of equal score may differ, since ties go to the passage
 * added first and simultaneous adds have no first; scores, computed alike from the same counts,
 * are equal to the last bit, so ties are told exactly.
 */
async function runBatchesAgainst(
  sql: KnowledgeIndex,
  batches: readonly (readonly Change[])[],
): Promise<void> {
  const memory = createMemoryKnowledgeIndex()
  const companyIds = Array.from({ length: COMPANIES }, () => nextCompanyId++)
  for (const [position, changes] of batches.entries()) {
    for (const change of changes) await apply(memory, companyIds, change)
    await Promise.all(changes.map((change) => apply(sql, companyIds, change)))
    for (let company = 0; company < COMPANIES; company++) {
      for (let agent = 0; agent < AGENT_IDS.length; agent++) {
        const options = {
          companyId: companyIds[company]!,
          agentId: AGENT_IDS[agent]!,
          query: EVERY_WORD,
          limit: 1_000,
        }
        const [expected, actual] = await Promise.all([memory.search(options), sql.search(options)])
        expect(tiesInOneOrder(actual), `after batch ${position}, company ${company} agent ${agent}`).toEqual(
          tiesInOneOrder(expected),
        )
      }
    }
  }
}

function tiesInOneOrder(passages: readonly KnowledgePassage[]): KnowledgePassage[] {
  return [...passages].sort(
    (left, right) =>
      right.score - left.score ||
      compareText(left.documentId, right.documentId) ||
      compareText(left.text, right.text),
  )
}

function compareText(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0
}

/** The port's own promise, checked on the memory side: best first, each sharing a word with the query. */
function expectWhatThePortPromises(step: string, passages: readonly KnowledgePassage[], query: string): void {
  const queryWords = new Set(contentWords(query))
  for (const [position, passage] of passages.entries()) {
    expect(
      contentWords(passage.text).some((word) => queryWords.has(word)),
      `${step}: passage ${position} shares a word with the query`,
    ).toBe(true)
    if (position > 0)
      expect(passage.score, `${step}: passage ${position} ranked`).toBeLessThanOrEqual(
        passages[position - 1]!.score,
      )
  }
}

function withoutScore(passage: KnowledgePassage): { documentId: string; text: string } {
  return { documentId: passage.documentId, text: passage.text }
}

/** The cases, against an SQL index the caller's `beforeAll` opens. */
function runAgreementCases(sqlIndex: () => KnowledgeIndex): void {
  it(
    'answer the same passages in the same order, whatever documents come and go',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(operation, { maxLength: MAX_OPERATIONS, size: 'max' }), (operations) =>
          runAgainst(sqlIndex(), operations),
        ),
        { numRuns: RUNS },
      )
    },
    TIMEOUT,
  )

  it(
    'answer the same passages with the same scores when documents change at the same time',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(batch, { maxLength: Math.ceil(MAX_OPERATIONS / 4), size: 'max' }),
          (batches) => runBatchesAgainst(sqlIndex(), batches),
        ),
        { numRuns: RUNS },
      )
    },
    TIMEOUT,
  )
}

describe('the memory and SQL knowledge indexes', () => {
  describe('on PGlite', () => {
    let dataDir: string
    let db: Db
    let sql: KnowledgeIndex

    beforeAll(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'switchboard-knowledge-'))
      db = await createPgliteDb({ dataDir })
      sql = await createPostgresKnowledgeIndex({ db })
    })

    afterAll(async () => {
      await db?.close()
      if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
    })

    runAgreementCases(() => sql)
  })

  describe.runIf(connectionString !== undefined && connectionString !== '')('on PostgreSQL', () => {
    const schema = `switchboard_knowledge_${randomBytes(6).toString('hex')}`
    let admin: Db
    let db: Db
    let sql: KnowledgeIndex

    beforeAll(async () => {
      admin = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
      // Several connections, so changes made at once run in concurrent transactions.
      db = createPgDb({ connectionString, max: 6, options: `-c search_path=${schema}` })
      sql = await createPostgresKnowledgeIndex({ db })
    })

    afterAll(async () => {
      await db?.close()
      await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await admin?.close()
    })

    runAgreementCases(() => sql)
  })
})
