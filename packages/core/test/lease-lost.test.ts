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
  // A new session's first job is leased to the worker as it is stored; a returning customer's is
  // found by a lease. Either is fenced the same way.
  it.each([
    ['a new customer', false],
    ['a returning customer', true],
  ])(
    'commits nothing for %s: no reply stored or sent, no charge, the session unchanged, the job still held',
    async (_, returning) => {
      const storage = createMemoryStorage()
      const connector = createRecordingConnector()
      const { integration } = await seedChannel(storage, { type: connector.type })
      const clock = createManualClock()
      const takenOver: JobLease[] = []
      // While the model answers, another worker, whose clock runs past this worker's lease, takes the job.
      const model: LlmProvider = {
        name: 'overtaken',
        async complete() {
          const later = new Date(clock.now().getTime() + 120_000)
          const taken = await storage.jobs.lease({ now: later, leaseMs: 60_000, token: 'another-worker' })
          if (taken !== null) takenOver.push(taken)
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
        const customer = { integrationId: integration.id, clientId: 'ann' }
        if (returning) (await switchboard.openSession(customer))._unsafeUnwrap()
        const ingested = await switchboard.ingest({ ...customer, text: 'hello' })
        const { session, message } = ingested._unsafeUnwrap()
        await switchboard.idle()

        expect(takenOver.map((lease) => lease.messageId)).toEqual([message.id])
        const messages = await storage.messages.list({ sessionId: session.id, limit: 10 })
        expect(messages.map((stored) => stored.role)).toEqual(['customer'])
        expect(connector.sent).toEqual([])
        expect(await storage.sessions.get({ id: session.id })).toEqual(session)
        const usage = await storage.billing.listUsage({ companyId: session.companyId, limit: 10 })
        expect(usage.items).toEqual([])
        expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)
      } finally {
        await switchboard.stop()
      }
    },
  )
})
