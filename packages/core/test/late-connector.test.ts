import { describe, expect, it } from 'vitest'
import {
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
} from '../src/index.js'
import { createManualClock, createRecordingConnector, seedChannel } from '../src/testing/index.js'

describe('a connector registered after the switchboard started', () => {
  // The reference server registers the webchat connector once its HTTP server listens; a reply
  // committed before that (work left from the last run) must wait for it, not fail for good.
  it('gets the replies committed before it came, on the retry schedule', async () => {
    const storage = createMemoryStorage()
    const clock = createManualClock()
    const { integration } = await seedChannel(storage, { type: 'late' })
    const switchboard = createSwitchboard({
      storage,
      model: createOfflineProvider(),
      knowledge: createMemoryKnowledgeIndex(),
      clock,
    })
    const failures: unknown[] = []
    switchboard.events.on('delivery-failed', (event) => failures.push(event))
    try {
      const ingested = await switchboard.ingest({
        integrationId: integration.id,
        clientId: 'early',
        text: 'hello',
      })
      const sessionId = ingested._unsafeUnwrap().session.id
      await switchboard.idle()
      const reply = async () =>
        (await storage.messages.list({ sessionId, limit: 10 })).find((message) => message.role === 'agent')
      expect((await reply())?.delivery).toBe('pending')

      const connector = createRecordingConnector({ type: 'late' })
      switchboard.registerConnector(connector)
      await clock.advance(1000)
      await switchboard.idle()

      expect((await reply())?.delivery).toBe('sent')
      expect(connector.sent.map((sent) => sent.text)).toEqual(["I don't have information about that yet."])
      expect(failures).toEqual([])
    } finally {
      await switchboard.stop()
    }
  })

  // Until it comes, the replies wait without a trace but the session's; an app that forgot to
  // register it learns why from its log, once per type however many replies wait.
  it('warns once per integration type that no connector of it is registered', async () => {
    const storage = createMemoryStorage()
    const clock = createManualClock()
    const { integration } = await seedChannel(storage, { type: 'late' })
    const warnings: { object: Record<string, unknown>; message: string }[] = []
    const switchboard = createSwitchboard({
      storage,
      model: createOfflineProvider(),
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [createRecordingConnector({ type: 'sms' })],
      clock,
      logger: { warn: (object, message) => warnings.push({ object, message }), error: () => undefined },
    })
    try {
      for (const clientId of ['first', 'second', 'third']) {
        await switchboard.ingest({ integrationId: integration.id, clientId, text: 'hello' })
      }
      await switchboard.idle()
      await clock.advance(1000)
      await switchboard.idle()

      expect(warnings).toEqual([
        {
          object: { integrationType: 'late', registeredTypes: ['sms'] },
          message:
            'no connector of type "late" is registered (registered: "sms"); replies to its integrations wait for one, and fail after the retries',
        },
      ])
    } finally {
      await switchboard.stop()
    }
  })
})
