/**
 * A worker process for the crash test: a switchboard on PostgreSQL whose model never answers, so
 * its first turn hangs mid-turn with the job leased (and the lease renewed) until the test kills
 * the process. It prints `model-called <the customer's text>` when a turn reaches
 * the model.
 *
 * Environment: DATABASE_URL, SCHEMA (the test's own schema), LEASE_MS.
 */
import { createMemoryKnowledgeIndex, createSwitchboard, type LlmProvider } from '@switchboard/core'
import { createRecordingConnector } from '@switchboard/core/testing'
import { createPgDb, createPostgresStorage } from '../../src/index.js'

const { DATABASE_URL: connectionString, SCHEMA: schema, LEASE_MS: leaseMs } = process.env
if (connectionString === undefined || schema === undefined || leaseMs === undefined) {
  throw new Error('hanging-worker needs DATABASE_URL, SCHEMA and LEASE_MS')
}

const hangingModel: LlmProvider = {
  name: 'hanging',
  complete(request) {
    const current = request.messages[request.messages.length - 1]
    process.stdout.write(`model-called ${current?.content ?? ''}\n`)
    return new Promise(() => {})
  },
}

const db = createPgDb({ connectionString, max: 4, options: `-c search_path=${schema}` })
const storage = await createPostgresStorage({ db })
createSwitchboard({
  storage,
  model: hangingModel,
  knowledge: createMemoryKnowledgeIndex(),
  connectors: [createRecordingConnector()],
  leaseMs: Number(leaseMs),
  pollMs: 100,
  concurrency: 1,
})
process.stdout.write('ready\n')
