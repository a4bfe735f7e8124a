import { expect, it } from 'vitest'
import {
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
} from '../src/index.js'
import { createManualClock, createRecordingConnector, seedChannel } from '../src/testing/index.js'

// A reply given up on is `failed` on its message and a `delivery-failed` event; an app listening
// to neither (the reference server, say) would otherwise never learn why a customer got nothing.
it('warns through the logger of a reply given up on, with why', async () => {
  const storage = createMemoryStorage()
  const { integration } = await seedChannel(storage, { type: 'sms' })
  const connector = createRecordingConnector({ type: 'sms' })
  connector.failNextSends(1, { retryable: false })
  const warnings: { object: Record<string, unknown>; message: string }[] = []
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock: createManualClock(),
    logger: { warn: (object, message) => warnings.push({ object, message }), error: () => undefined },
  })
  try {
    const ingested = await switchboard.ingest({
      integrationId: integration.id,
      clientId: 'ann',
      text: 'hello',
    })
    await switchboard.idle()

    const sessionId = ingested._unsafeUnwrap().session.id
    const [reply] = (await storage.messages.list({ sessionId, limit: 10 })).filter(
      (message) => message.role === 'agent',
    )
    expect(reply?.delivery).toBe('failed')
    expect(warnings).toEqual([
      {
        object: { sessionId, messageId: reply?.id, attempts: 1, error: expect.any(String) },
        message: 'a reply was not delivered; it is marked failed',
      },
    ])
  } finally {
    await switchboard.stop()
  }
})
