import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  createAgentService,
  createIntegrationService,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
  createSystemClock,
  type Switchboard,
  signWebhookBody,
} from '@switchboard/core'
import { createScriptedModel, reply, type ScriptedModel } from '@switchboard/core/testing'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  createTicketDeskConnector,
  createTicketDeskReceiver,
  TICKET_DESK_SIGNATURE_HEADER,
  TICKET_DESK_TYPE,
} from '../src/index.js'

const SECRET = 'ticket-desk-shared-secret'

interface DeskCall {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: unknown
}

/** The ticket desk's API on a real socket: records replies, answers `status`. */
async function startDesk() {
  const calls: DeskCall[] = []
  const desk = { calls, status: 200, server: null as Server | null, url: '' }
  const server = createServer((request, response) => {
    let text = ''
    request.on('data', (chunk: Buffer) => {
      text += chunk.toString()
    })
    request.on('end', () => {
      calls.push({ path: request.url ?? '', headers: request.headers, body: JSON.parse(text) })
      response.writeHead(desk.status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  desk.server = server
  desk.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return desk
}

let desk: Awaited<ReturnType<typeof startDesk>>
let switchboard: Switchboard
let model: ScriptedModel
let agentId: number
let integrationId: string
let companyId: number

beforeEach(async () => {
  desk = await startDesk()
  model = createScriptedModel()
  const storage = createMemoryStorage()
  switchboard = createSwitchboard({
    storage,
    model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [createTicketDeskConnector()],
  })
  // What an app's own admin screen would do: a company, an agent and an integration of the new type.
  const clock = createSystemClock()
  const company = await storage.companies.create({
    companyName: 'Desk Co',
    publicId: crypto.randomUUID(),
    at: clock.now(),
  })
  const agent = await createAgentService({ storage, clock }).create(company.id, { name: 'Support' })
  agentId = agent._unsafeUnwrap().id
  companyId = company.id
  const integration = await storage.integrations.create({
    companyId: company.id,
    type: TICKET_DESK_TYPE,
    name: 'Help desk',
    active: true,
    entryAgentId: agentId,
    config: { baseUrl: desk.url, apiToken: 'desk-key' },
    webhookSecret: SECRET,
    at: clock.now(),
  })
  integrationId = integration.id
})

afterEach(async () => {
  await switchboard.stop()
  model.assertDone()
  await new Promise<void>((resolve) => desk.server?.close(() => resolve()))
})

/** A delivery as the desk makes it: JSON bytes, signed in its own header. */
function delivery(ticket: unknown, secret = SECRET) {
  const rawBody = new TextEncoder().encode(JSON.stringify(ticket))
  return {
    integrationId,
    rawBody,
    headers: { [TICKET_DESK_SIGNATURE_HEADER]: signWebhookBody(rawBody, secret) },
  }
}

async function waitForReplies(count: number) {
  const deadline = Date.now() + 5000
  while (desk.calls.length < count) {
    if (Date.now() > deadline) throw new Error(`expected ${count} replies, got ${desk.calls.length}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe('the ticket-desk connector', () => {
  it('takes a signed ticket, lets the agent answer, and posts the reply to the desk', async () => {
    const receiver = createTicketDeskReceiver({ switchboard })
    model.script(agentId, reply('We are on it.'))

    const answer = await receiver.handle(
      delivery({ from: 'ann@example.com', body: 'My printer is on fire', id: 't-1' }),
    )
    expect(answer).toEqual({ status: 200, body: { ok: true } })

    await waitForReplies(1)
    expect(desk.calls[0]).toMatchObject({
      path: '/api/replies',
      headers: { authorization: 'Bearer desk-key' },
      body: { to: 'ann@example.com', body: 'We are on it.' },
    })
  })

  it('keeps the desk key out of what the integrations API shows', async () => {
    const integrations = createIntegrationService({
      storage: switchboard.storage,
      clock: createSystemClock(),
      connectors: (type) => switchboard.connector(type),
      publicUrl: 'https://chat.example.com',
    })
    const shown = (await integrations.get(companyId, integrationId))._unsafeUnwrap()
    expect(shown.config).toEqual({ baseUrl: desk.url })
    expect(shown.webhookUrl).toBe(`https://chat.example.com/api/webhook/ticket-desk/${integrationId}`)
  })

  it('stores a redelivered ticket once', async () => {
    const receiver = createTicketDeskReceiver({ switchboard })
    model.script(agentId, reply('Once.'))
    const ticket = { from: 'bo@example.com', body: 'Hello', id: 't-2' }
    expect((await receiver.handle(delivery(ticket))).body).toEqual({ ok: true })
    expect((await receiver.handle(delivery(ticket))).body).toEqual({ ok: true, duplicate: true })
    await waitForReplies(1)
    await switchboard.idle()
    expect(desk.calls).toHaveLength(1)
  })

  it('refuses a bad signature and an unknown integration; ignores a signed non-ticket', async () => {
    const receiver = createTicketDeskReceiver({ switchboard })
    const ticket = { from: 'cy@example.com', body: 'Hi', id: 't-3' }
    expect((await receiver.handle(delivery(ticket, 'not-the-secret'))).status).toBe(401)
    expect((await receiver.handle({ ...delivery(ticket), integrationId: '999' })).status).toBe(404)
    expect(await receiver.handle(delivery({ hello: 'world' }))).toEqual({
      status: 200,
      body: { ok: true, ignored: 'not a ticket message' },
    })
    expect(await receiver.handleVerification({ integrationId })).toEqual({
      status: 200,
      body: { ok: true, verified: true },
    })
  })

  it('tells the outbox which desk failures are worth retrying', async () => {
    const connector = createTicketDeskConnector()
    const integration = (await switchboard.storage.integrations.get({ id: integrationId }))!
    const receiver = createTicketDeskReceiver({ switchboard })
    model.script(agentId, reply('first'))
    await receiver.handle(delivery({ from: 'di@example.com', body: 'Hi', id: 't-4' }))
    await waitForReplies(1)
    await switchboard.idle()
    const session = (await switchboard.storage.sessions.findOpen({
      integrationId,
      clientId: 'di@example.com',
    }))!
    const [, sent] = await switchboard.storage.messages.list({ sessionId: session.id, limit: 10 })

    desk.status = 503
    expect(await connector.send({ integration, session, message: sent! })).toMatchObject({
      ok: false,
      retryable: true,
    })
    desk.status = 422
    expect(await connector.send({ integration, session, message: sent! })).toMatchObject({
      ok: false,
      retryable: false,
    })
  })
})
