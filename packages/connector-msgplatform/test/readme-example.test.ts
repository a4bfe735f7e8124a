import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  agentInputSchema,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  signWebhookBody,
} from '@switchboard/core'
import { afterEach, expect, it } from 'vitest'
import { createMsgPlatformConnector, createMsgPlatformWebhookHandler } from '../src/index.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'

let platform: FakePlatform | undefined
afterEach(async () => {
  await platform?.close()
})

// The README's node:http example, kept honest: a signed webhook in, the offline model's reply out.
it('serves the webhook with node:http alone and replies through the platform', async () => {
  platform = await startFakePlatform()
  const storage = createMemoryStorage()
  const knowledge = createMemoryKnowledgeIndex()
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge,
    connectors: [createMsgPlatformConnector()],
  })
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Support' }),
    companyId: 1,
    at: new Date(),
  })
  await knowledge.add({ companyId: 1, agentId: agent.id, documentId: 'faq', content: 'Returns are free.' })
  const integration = await storage.integrations.create({
    companyId: 1,
    type: 'msgplatform',
    name: 'Shop',
    active: true,
    entryAgentId: agent.id,
    config: { apiBaseUrl: platform.url, apiToken: 'token' },
    webhookSecret: 'a-secret-of-16-chars-or-more',
    at: new Date(),
  })

  const handler = createMsgPlatformWebhookHandler({ switchboard })
  const server = createServer(async (request, response) => {
    const match = /^\/api\/webhook\/msgplatform\/([^/]+)$/.exec(request.url ?? '')
    if (match === null || request.method !== 'POST') return response.writeHead(404).end()
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    try {
      const answer = await handler.handle({
        integrationId: match[1]!,
        rawBody: Buffer.concat(chunks),
        headers: request.headers,
      })
      response.writeHead(answer.status, { 'content-type': 'application/json' })
      response.end(JSON.stringify(answer.body))
    } catch {
      response.writeHead(500, { 'content-type': 'application/json' })
      response.end('{"error":{"code":"INTERNAL_ERROR","message":"internal server error"}}')
    }
  }).listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))

  try {
    const body = JSON.stringify({
      text: 'are returns free?',
      client_id: 'c-1',
      channel_id: 'ch',
      transport: 'sms',
    })
    const response = await fetch(
      `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/webhook/msgplatform/${integration.id}`,
      {
        method: 'POST',
        headers: { 'x-webhook-signature': signWebhookBody(body, 'a-secret-of-16-chars-or-more') },
        body,
      },
    )
    expect(await response.json()).toEqual({ ok: true })
    const [reply] = await platform.waitForCalls('/v1/messages', 1)
    expect(reply?.body).toMatchObject({ client_id: 'c-1', text: 'Returns are free.', type: 'to_client' })
  } finally {
    await switchboard.stop()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
})
