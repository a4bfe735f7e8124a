import { describe, expect, it } from 'vitest'
import {
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
  type JobLease,
  type LlmProvider,
} from '../src/index.js'
import { createManualClock, createRecordingConnector, seedChannel } from '../src/testing/index.js'

describe('a turn whose job another worker took over meanwhile', () => {
  it('commits nothing: no reply stored or sent, no charge, the session unchanged, the job still held', async () => {
    const storage = createMemoryStorage()
    const connector = createRecordingConnector()
    const { integration } = await seedChannel(storage, { type: connector.type })
    const clock = createManualClock()
    const leases: JobLease[] = []
    const lease = storage.jobs.lease
    storage.jobs.lease = async (options) => {
      const leased = await lease(options)
      if (leased !== null) leases.push(leased)
      return leased
    }
    // While the model answers, this worker's lease ends and another worker leases the job.
    const model: LlmProvider = {
      name: 'overtaken',
      async complete() {
        const ours = leases[0]!
        await storage.jobs.renew({ jobId: ours.jobId, token: ours.token, now: clock.now(), leaseMs: 0 })
        await lease({ now: clock.now(), leaseMs: 60_000, token: 'another-worker' })
        return { text: 'too late', toolCalls: [], usage: { inputTokens: 10, outputTokens: 5 } }
      },
    }
    const switchboard = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock,
    })
    try {
      const ingested = await switchboard.ingest({
        integrationId: integration.id,
        clientId: 'ann',
        text: 'hello',
      })
      const { session } = ingested._unsafeUnwrap()
      await switchboard.idle()

      expect(leases).toHaveLength(1)
      const messages = await storage.messages.list({ sessionId: session.id, limit: 10 })
      expect(messages.map((message) => message.role)).toEqual(['customer'])
      expect(connector.sent).toEqual([])
      expect(await storage.sessions.get({ id: session.id })).toEqual(session)
      const usage = await storage.billing.listUsage({ companyId: session.companyId, limit: 10 })
      expect(usage.items).toEqual([])
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)
    } finally {
      await switchboard.stop()
    }
  })
})
