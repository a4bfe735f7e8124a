import { createHmac } from 'node:crypto'
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
import { readmeBlock, startReadmeApp } from '../../../test-support/readme-app.js'
import { createMsgPlatformConnector, createMsgPlatformWebhookHandler } from '../src/index.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'

const PACKAGE = new URL('..', import.meta.url)
const README = new URL('../README.md', import.meta.url)

let platform: FakePlatform | undefined
afterEach(async () => {
  await platform?.close()
})

// "Wire it into an Express app" as a reader runs it (a file of their own, the packages found by
// name, JWT_SECRET in the environment), bar the port and the platform: the README listens on 3000
// and names a platform that does not exist (with a placeholder token), the test takes any free
// port and a fake platform. Then its curl commands with fetch, the webhook signed as its openssl
// line signs it.
it('runs the README Express app as written: an integration, its status hooks, a signed webhook answered', async () => {
  const code = await readmeBlock(README, '## Wire it into an Express app', 'ts')
  const curls = await readmeBlock(README, '## Wire it into an Express app', 'sh')
  const integrationBody = /-d '(\{"type":"msgplatform"[\s\S]*?\})'/.exec(curls)?.[1]
  const webhookBody = /^body='(.*)'$/m.exec(curls)?.[1]
  if (integrationBody === undefined || webhookBody === undefined)
    throw new Error('the README has no integration or webhook body')
  expect(curls).toContain('localhost:3000/api/integrations/1/status-hooks')
  expect(curls).toContain('localhost:3000/api/webhook/msgplatform/1 -H "x-webhook-signature: $sig"')

  platform = await startFakePlatform()
  const app = await startReadmeApp(PACKAGE, code)
  try {
    const base = app.base
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      })

    // What the README takes from @switchboard/adapter-express's: an access token and an agent.
    const account = { email: 'me@shop.test', password: 'correct horse' }
    expect((await post('/api/auth/register', { ...account, companyName: 'Shop' })).status).toBe(201)
    const { session } = (await (await post('/api/auth/login', account)).json()) as {
      session: { access_token: string }
    }
    const bearer = { authorization: `Bearer ${session.access_token}` }
    expect((await post('/api/agents', { name: 'Support' }, bearer)).status).toBe(201)

    const given = JSON.parse(integrationBody) as object
    const created = await post(
      '/api/integrations',
      // The README's token is a placeholder (…), which no platform would take in a header.
      { ...given, config: { apiBaseUrl: platform.url, apiToken: 'platform-token' } },
      bearer,
    )
    expect(created.status).toBe(201)
    const integration = (await created.json()) as { id: string; webhookUrl: string; webhookSecret: string }
    expect(integration).toMatchObject({
      id: '1',
      webhookUrl: 'https://chat.example.com/api/webhook/msgplatform/1',
    })

    const hooks = await fetch(`${base}/api/integrations/1/status-hooks`, { method: 'POST', headers: bearer })
    expect(await hooks.json()).toEqual({
      registered: ['close_dialog', 'close_request', 'dialog_transferred'],
    })
    expect(platform.callsTo('/v1/webhooks')[0]?.body).toMatchObject({ url: integration.webhookUrl })

    const signature = `sha256=${createHmac('sha256', integration.webhookSecret).update(webhookBody).digest('hex')}`
    const delivered = await fetch(`${base}/api/webhook/msgplatform/1`, {
      method: 'POST',
      headers: { 'x-webhook-signature': signature },
      body: webhookBody,
    })
    expect(await delivered.json()).toEqual({ ok: true })
    const [reply] = await platform.waitForCalls('/v1/messages', 1)
    expect(reply?.body).toMatchObject({ client_id: 'c-1', channel_id: 'ch-1', transport: 'telegram' })
  } finally {
    await app.stop()
  }
}, 60_000)

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
