/**
 * The cost of one knowledge search against the length of the customer's message: an agent with
 * one 100,000-character document of short passages, searched with a 20-character message (the
 * baseline) and with messages of 4,000 and 100,000 characters, on the memory index and on
 * PostgreSQL (in a schema of its own, dropped afterwards). Prints milliseconds per search (median
 * of 7) and each as a multiple of the baseline of the same index, measured in the same run.
 *
 *   npm run bench:knowledge -w @switchboard/bench                          PostgreSQL at 127.0.0.1:5432/test
 *   DATABASE_URL=postgres://… npm run bench:knowledge -w @switchboard/bench
 */
import { createPostgresKnowledgeIndex } from '@switchboard/adapter-postgres'
import { createMemoryKnowledgeIndex, type KnowledgeIndex } from '@switchboard/core'
import { inPostgresSchema } from './postgres-schema.js'

const MESSAGE_LENGTHS = [20, 4_000, 100_000]
const ROUNDS = 7

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

async function measure(name: string, index: KnowledgeIndex): Promise<void> {
  const scope = { companyId: 1, agentId: 1 }
  await index.add({ ...scope, documentId: 'faq', content: textOf(100_000, 0, '\n\n') })
  let baseline = Number.NaN
  for (const characters of MESSAGE_LENGTHS) {
    const query = textOf(characters, 500, ' ')
    await index.search({ ...scope, query, limit: 3 })
    const times: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const start = performance.now()
      await index.search({ ...scope, query, limit: 3 })
      times.push(performance.now() - start)
    }
    const median = times.sort((left, right) => left - right)[Math.floor(ROUNDS / 2)]!
    if (characters === MESSAGE_LENGTHS[0]) baseline = median
    const ratio = (median / baseline).toFixed(1)
    console.log(
      `${name.padEnd(10)} message ${String(characters).padStart(7)} chars: ${median.toFixed(1).padStart(7)} ms  ${ratio.padStart(6)} × the ${MESSAGE_LENGTHS[0]}-char message`,
    )
  }
}

await measure('memory', createMemoryKnowledgeIndex())

await inPostgresSchema('knowledge', async (db) =>
  measure('postgres', await createPostgresKnowledgeIndex({ db })),
)
