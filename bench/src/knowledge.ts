/**
 * The cost of one knowledge search: an agent with one 100,000-character document of short
 * passages, searched with messages of 20, 4,000 and 100,000 characters, on the memory index and,
 * with DATABASE_URL set, on PostgreSQL. Prints milliseconds per search (median of 5).
 */
import { createPgDb, createPostgresKnowledgeIndex, type Db } from '@switchboard/adapter-postgres'
import { createMemoryKnowledgeIndex, type KnowledgeIndex } from '@switchboard/core'

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
  const scope = { companyId: 1, agentId: 1 + Math.floor(Math.random() * 1_000_000) }
  await index.add({ ...scope, documentId: `faq-${scope.agentId}`, content: textOf(100_000, 0, '\n\n') })
  for (const characters of [20, 4_000, 100_000]) {
    const query = textOf(characters, 500, ' ')
    const times: number[] = []
    for (let round = 0; round < 5; round++) {
      const start = performance.now()
      await index.search({ ...scope, query, limit: 3 })
      times.push(performance.now() - start)
    }
    const median = times.sort((left, right) => left - right)[2]!
    console.log(`${name.padEnd(10)} message ${String(characters).padStart(7)} chars: ${median.toFixed(1)} ms`)
  }
}

await measure('memory', createMemoryKnowledgeIndex())
const connectionString = process.env.DATABASE_URL
if (connectionString !== undefined) {
  const db: Db = createPgDb({ connectionString })
  await measure('postgres', await createPostgresKnowledgeIndex({ db }))
  await db.close()
}
