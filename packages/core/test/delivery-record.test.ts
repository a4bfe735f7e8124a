import { describe, expect, it } from 'vitest'
import {
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type Storage,
} from '../src/index.js'
import { createManualClock, createRecordingConnector, seedChannel } from '../src/testing/index.js'

// CONTRACT §11: a reply is sent twice only if a process dies between the platform's success and
// the record of it. A database that fails for a moment right after the platform's success is no
// such death: the sender still knows the reply left, and must not leave its claim to run out and
// another sweep to send the reply again.

/** The outbox's writes of an outcome fail `count` times, then work again. */
function failingOutcomeWrites(storage: Storage, count: number) {
  let failures = count
  const { remove, retryLater } = storage.outbox
  storage.outbox.remove = async (options) => {
    if (options.delivery !== undefined && failures > 0) {
      failures -= 1
      throw new Error('terminating connection due to administrator command')
    }
    return remove(options)
  }
  storage.outbox.retryLater = async (options) => {
    if (failures > 0) {
      failures -= 1
      throw new Error('terminating connection due to administrator command')
    }
    return retryLater(options)
  }
  return { left: () => failures }
}

async function start(storage: Storage) {
  const clock = createManualClock()
  const connector = createRecordingConnector({ type: 'sms' })
  const { integration } = await seedChannel(storage, { type: 'sms' })
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock,
  })
  const says = (text: string) => switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text })
  return { clock, connector, switchboard, says }
}

describe('the record of a delivery that the database failed for a moment', () => {
  it('is written once the database is back: the reply is sent once, and is sent', async () => {
    const storage = createMemoryStorage()
    const writes = failingOutcomeWrites(storage, 2)
    const { clock, connector, switchboard, says } = await start(storage)
    try {
      const ingested = (await says('hello'))._unsafeUnwrap()
      await switchboard.idle()
      // Past the claim's lease, with the sweeps that come with it.
      for (let second = 0; second < 40; second += 1) await clock.advance(1000)
      await switchboard.idle()

      expect(writes.left()).toBe(0)
      expect(connector.sent).toHaveLength(1)
      const messages = await storage.messages.list({ sessionId: ingested.session.id, limit: 10 })
      expect(messages.map((message) => [message.role, message.delivery ?? null])).toEqual([
        ['customer', null],
        ['agent', 'sent'],
      ])
    } finally {
      await switchboard.stop()
    }
  })

  it('of a failed try keeps the retry schedule: the next try comes a second later', async () => {
    const storage = createMemoryStorage()
    const { clock, connector, switchboard, says } = await start(storage)
    try {
      connector.failNextSends(1)
      const writes = failingOutcomeWrites(storage, 1)
      await says('hello')
      await switchboard.idle()
      expect(writes.left()).toBe(0)
      expect(connector.sent).toEqual([])

      await clock.advance(1000)
      await switchboard.idle()
      expect(connector.sent).toHaveLength(1)
    } finally {
      await switchboard.stop()
    }
  })
})
