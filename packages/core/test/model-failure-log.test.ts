import { expect, it } from 'vitest'
import { createMemoryKnowledgeIndex, createMemoryStorage, createSwitchboard } from '../src/index.js'
import {
  createManualClock,
  createRecordingConnector,
  createScriptedModel,
  fail,
  seedChannel,
} from '../src/testing/index.js'

// A model that fails for good (a wrong API key, an outage) leaves MODEL_UNAVAILABLE on the session
// and sends the fallback reply; an operator reading only the logs (the reference server's) must
// see it too, or a wrong key goes unnoticed while every customer gets the fallback.
it('warns through the logger of a model call that failed for good, with why', async () => {
  const storage = createMemoryStorage()
  const { integration, agent } = await seedChannel(storage, { type: 'sms' })
  const model = createScriptedModel().script(agent.id, fail('401 Incorrect API key provided'))
  const warnings: { object: Record<string, unknown>; message: string }[] = []
  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [createRecordingConnector({ type: 'sms' })],
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

    expect(warnings).toEqual([
      {
        object: {
          sessionId: ingested._unsafeUnwrap().session.id,
          agentId: agent.id,
          error: 'the model failed: 401 Incorrect API key provided',
        },
        message: 'a model call failed for good; recorded on the session as MODEL_UNAVAILABLE',
      },
    ])
  } finally {
    await switchboard.stop()
  }
})
