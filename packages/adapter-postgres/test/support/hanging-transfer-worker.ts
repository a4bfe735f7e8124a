/**
 * A worker process for the crash test of a transfer to a human: a switchboard on PostgreSQL whose
 * model hands every customer to the human agent HUMAN_AGENT_ID, and whose channel sends the
 * announcement but never answers the transfer, so the process hangs between the committed pause
 * and the platform's answer until the test kills it. It prints `transfer-called` when the channel's
 * transfer is called.
 *
 * Environment: DATABASE_URL, SCHEMA (the test's own schema), HUMAN_AGENT_ID.
 */
import { createMemoryKnowledgeIndex, createSwitchboard, type LlmProvider } from '@switchboard/core'
import { createRecordingConnector } from '@switchboard/core/testing'
import { createPgDb, createPostgresStorage } from '../../src/index.js'

const { DATABASE_URL: connectionString, SCHEMA: schema, HUMAN_AGENT_ID: humanAgentId } = process.env
if (connectionString === undefined || schema === undefined || humanAgentId === undefined) {
  throw new Error('hanging-transfer-worker needs DATABASE_URL, SCHEMA and HUMAN_AGENT_ID')
}

const handingOffModel: LlmProvider = {
  name: 'handing-off',
  async complete() {
    const handoff = {
      id: 'call_handoff',
      name: 'handoff_to_agent',
      arguments: JSON.stringify({ targetAgentId: Number(humanAgentId) }),
    }
    return { text: '', toolCalls: [handoff], usage: { inputTokens: 1, outputTokens: 1 } }
  },
}

const connector = createRecordingConnector({ humanTransfer: true })
connector.transferToHuman = () => {
  process.stdout.write('transfer-called\n')
  return new Promise(() => {})
}

const db = createPgDb({ connectionString, max: 4, options: `-c search_path=${schema}` })
const storage = await createPostgresStorage({ db })
createSwitchboard({
  storage,
  model: handingOffModel,
  knowledge: createMemoryKnowledgeIndex(),
  connectors: [connector],
  pollMs: 100,
  concurrency: 1,
})
process.stdout.write('ready\n')
