import { expect, it } from 'vitest'
import {
  agentInputSchema,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
} from '../src/index.js'
import { createRecordingConnector } from '../src/testing/index.js'

// The README's first example, kept honest.
it('answers a customer from the knowledge base with the offline model', async () => {
  const storage = createMemoryStorage()
  const knowledge = createMemoryKnowledgeIndex()
  const channel = createRecordingConnector({ type: 'demo' })

  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Support', systemPrompt: 'Help with orders.' }),
    companyId: 1,
    at: new Date(),
  })
  await knowledge.add({
    companyId: 1,
    agentId: agent.id,
    documentId: 'faq',
    content: 'Returns are free within 30 days.',
  })
  const integration = await storage.integrations.create({
    companyId: 1,
    type: 'demo',
    name: 'demo',
    active: true,
    entryAgentId: agent.id,
    config: {},
    webhookSecret: null,
    at: new Date(),
  })

  const switchboard = createSwitchboard({
    storage,
    knowledge,
    model: createOfflineProvider(),
    connectors: [channel],
  })
  await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'Can I make returns?' })
  await switchboard.idle()
  expect(channel.sent.map((message) => message.text)).toEqual(['Returns are free within 30 days.'])
  await switchboard.stop()
})
