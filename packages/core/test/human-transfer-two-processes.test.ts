import { afterEach, expect, it } from 'vitest'
import type { SendOutcome } from '../src/index.js'
import { createMemoryKnowledgeIndex, createSwitchboard, type Switchboard } from '../src/index.js'
import {
  type ConversationHarness,
  createConversationHarness,
  createRecordingConnector,
  handoff,
  reply,
} from '../src/testing/index.js'
import { humanTeam } from './support/human-team.js'

// CONTRACT §8: a turn's announcement is delivered before its transfer to a human. With two
// processes, the announcement may leave from the other one: it follows an earlier reply of the
// session that the other process is still sending. Found by runtime-model.test.ts.

let harness: ConversationHarness
let other: Switchboard | undefined
let release: () => void = () => {}

afterEach(async () => {
  release()
  await other?.stop()
  other = undefined
  await harness.finish()
})

it('transfers to a human soon after the announcement left from another process, not at the 25 s limit', async () => {
  harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
  harness.model.script(harness.agent('reception'), reply('hello'), handoff(harness.agent('humans')))
  // This process's first send waits until released: the session's earlier reply, still on its way.
  const held = new Promise<SendOutcome>((resolve) => {
    release = () => resolve({ ok: true })
  })
  const send = harness.connector.send.bind(harness.connector)
  let sends = 0
  harness.connector.send = async (message) => {
    sends += 1
    if (sends === 1) await held
    return send(message)
  }
  const customer = harness.customer()
  await customer.sends('hi')
  await expect.poll(() => harness.connector.sent.length === 0 && sends === 1).toBe(true)

  const otherChannel = createRecordingConnector({ humanTransfer: true })
  other = createSwitchboard({
    storage: harness.storage,
    model: harness.model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [otherChannel],
    clock: harness.clock,
  })
  await other.ingest({
    integrationId: harness.integrationId,
    clientId: customer.clientId,
    text: 'a person please',
  })
  await expect.poll(async () => (await customer.session()).state).toBe('paused')

  // The earlier reply goes, and this process sends the announcement after it.
  release()
  await expect
    .poll(() => harness.connector.sent.map((sent) => sent.text))
    .toEqual(['hello', 'A colleague will take over.'])
  expect(otherChannel.transfers).toEqual([])

  await harness.clock.advance(1_000)
  await expect.poll(() => otherChannel.transfers.length).toBe(1)
  expect(otherChannel.transfers[0]).toMatchObject({ groupId: 7, systemMessage: false })
  expect(harness.connector.transfers).toEqual([])
})
