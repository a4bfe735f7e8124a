/**
 * The cost of one knowledge search, on the memory index and on PostgreSQL (in a schema of its own,
 * dropped afterwards). Two parts, each printing milliseconds per search (median of 7) and each as a
 * multiple of the first row of the same index, measured in the same run (after three untimed):
 *
 * - against the length of the customer's message: an agent with one 100,000-character document of
 *   short passages, searched with a 20-character message (the baseline), then 4,000 and 100,000;
 * - against the size of the agent's knowledge base: 1,000 (the baseline), 10,000 and 120,000
 *   passages in documents of 600, searched with a short question whose words are in the same 10
 *   passages at every size, and with a question of a word every passage holds (what a message of
 *   very common words costs).
 *
 *   npm run bench:knowledge -w @switchboard/bench                          PostgreSQL at 127.0.0.1:5432/test
 *   DATABASE_URL=postgres://… npm run bench:knowledge -w @switchboard/bench
 */
import { createPostgresKnowledgeIndex } from '@switchboard/adapter-postgres'
import { createMemoryKnowledgeIndex, type KnowledgeIndex } from '@switchboard/core'
import { inPostgresSchema } from './postgres-schema.js'

const MESSAGE_LENGTHS = [20, 4_000, 100_000]
const BASE_SIZES = [1_000, 10_000, 120_000]
const PASSAGES_PER_DOCUMENT = 600
const WORDS_PER_PASSAGE = 8
/** Each passage's words are drawn from this many, so a word is in about 20 of 120,000 passages. */
const VOCABULARY = 50_000
/** The passages, all in the first document, that hold the short question's words. */
const PLANTED_PASSAGES = 10
const SHORT_QUESTION = 'Where is my parcel refund?'
/** Every passage of the large base holds `stock`: the question of a common word. */
const COMMON_QUESTION = 'Stock levels?'
const ROUNDS = 7
/** Agents of one index: the message-length part's document stays out of the base-size rows. */
const MESSAGES_AGENT = { companyId: 1, agentId: 1 }
const BASE_AGENT = { companyId: 1, agentId: 2 }

/** Distinct words of letters only. */
function numberedWord(index: number): string {
  let word = 'q'
  for (let digit = 0; digit < 4; digit++)
    word += String.fromCharCode(97 + (Math.floor(index / 26 ** digit) % 26))
  return word
}

function textOf(characters: number, first: number, separator: string): string {
  const words: string[] = []
  let length = 0
  for (let index = first; length < characters; index++) {
    const word = `${numberedWord(index * 7_919)} common`
    words.push(word)
    length += word.length + separator.length
  }
  return words.join(separator).slice(0, characters)
}

interface Scope {
  readonly companyId: number
  readonly agentId: number
}

async function medianSearch(index: KnowledgeIndex, scope: Scope, query: string): Promise<number> {
  // Three untimed first, so the first row does not pay for compiling the search.
  for (let warmUp = 0; warmUp < 3; warmUp++) await index.search({ ...scope, query, limit: 3 })
  const times: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const start = performance.now()
    await index.search({ ...scope, query, limit: 3 })
    times.push(performance.now() - start)
  }
  return times.sort((left, right) => left - right)[Math.floor(ROUNDS / 2)]!
}

function line(name: string, what: string, median: number, baseline: number, of: string): void {
  const ratio = (median / baseline).toFixed(1)
  console.log(`${name.padEnd(10)} ${what}: ${median.toFixed(2).padStart(8)} ms  ${ratio.padStart(6)} × ${of}`)
}

async function measureMessageLengths(name: string, index: KnowledgeIndex): Promise<void> {
  await index.add({ ...MESSAGES_AGENT, documentId: 'faq', content: textOf(100_000, 0, '\n\n') })
  let baseline = Number.NaN
  for (const characters of MESSAGE_LENGTHS) {
    const median = await medianSearch(index, MESSAGES_AGENT, textOf(characters, 500, ' '))
    if (characters === MESSAGE_LENGTHS[0]) baseline = median
    line(name, `message ${String(characters).padStart(7)} chars`, median, baseline, 'the 20-char message')
  }
}

/** A small deterministic generator (mulberry32), so every run and index gets the same passages. */
function randomNumbers(seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let value = Math.imul(state ^ (state >>> 15), 1 | state)
    value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296
  }
}

function documentOf(number: number): string {
  const random = randomNumbers(number + 1)
  const passages: string[] = []
  for (let passage = 0; passage < PASSAGES_PER_DOCUMENT; passage++) {
    const words = ['Stock']
    for (let word = 0; word < WORDS_PER_PASSAGE; word++)
      words.push(numberedWord(Math.floor(random() * VOCABULARY)))
    if (number === 0 && passage < PLANTED_PASSAGES) words.push('parcel', 'refund')
    passages.push(`${words.join(' ')}.`)
  }
  return passages.join('\n\n')
}

async function measureBaseSizes(name: string, index: KnowledgeIndex): Promise<void> {
  const search = (query: string) => medianSearch(index, BASE_AGENT, query)
  let documents = 0
  const baselines = { short: Number.NaN, common: Number.NaN }
  for (const size of BASE_SIZES) {
    for (; documents * PASSAGES_PER_DOCUMENT < size; documents++) {
      await index.add({ ...BASE_AGENT, documentId: `document-${documents}`, content: documentOf(documents) })
    }
    const passages = String(documents * PASSAGES_PER_DOCUMENT).padStart(7)
    const short = await search(SHORT_QUESTION)
    const common = await search(COMMON_QUESTION)
    if (size === BASE_SIZES[0]) Object.assign(baselines, { short, common })
    line(name, `${passages} passages, short question`, short, baselines.short, 'the smallest base')
    line(name, `${passages} passages, a word in all `, common, baselines.common, 'the smallest base')
  }
}

await measureMessageLengths('memory', createMemoryKnowledgeIndex())
await measureBaseSizes('memory', createMemoryKnowledgeIndex())

await inPostgresSchema('knowledge', async (db) => {
  const index = await createPostgresKnowledgeIndex({ db })
  await measureMessageLengths('postgres', index)
  await measureBaseSizes('postgres', index)
})
