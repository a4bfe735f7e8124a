import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Integration, Message, Session } from '@switchboard/core'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createMsgPlatformConnector } from '../src/index.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'

let platform: FakePlatform
beforeEach(async () => {
  platform = await startFakePlatform()
})
afterEach(async () => {
  await platform.close()
})

function integrationAt(apiBaseUrl: string, config: Record<string, unknown> = {}): Integration {
  return {
    id: '12',
    companyId: 1,
    type: 'msgplatform',
    name: 'Platform',
    active: true,
    entryAgentId: 1,
    config: { apiBaseUrl, apiToken: 'tok-1', ...config },
    webhookSecret: 'whsec-0123456789abcdef',
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  }
}

const session: Session = {
  id: '3f1c1b7e-6a0c-4a53-9d1e-0d7a6c1b2e01',
  companyId: 1,
  integrationId: '12',
  customer: { clientId: 'client-9', channelId: 'channel-4', transport: 'whatsapp' },
  state: 'ongoing',
  activeAgentId: 1,
  entryAgentId: 1,
  metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  version: 1,
}

const message: Message = {
  id: '9b2f0e3c-1d4a-4b6e-8f7a-2c3d4e5f6a7b',
  companyId: 1,
  sessionId: session.id,
  role: 'agent',
  text: 'Your order ships today.',
  at: '2026-01-01T00:00:01.000Z',
  sequence: 2,
  delivery: 'pending',
}

/** A server of one test's own on port 0, whatever `handle` answers. */
async function startServer(
  handle: (request: IncomingMessage, response: ServerResponse) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

describe('send', () => {
  it('posts the reply with the customer channel, the bare token and type to_client', async () => {
    const connector = createMsgPlatformConnector()
    expect(connector.type).toBe('msgplatform')
    // A trailing slash on the base URL does not double the path's.
    const outcome = await connector.send({ integration: integrationAt(`${platform.url}/`), session, message })
    expect(outcome).toEqual({ ok: true })
    const [call] = platform.callsTo('/v1/messages')
    expect(call?.headers.authorization).toBe('tok-1')
    expect(call?.body).toEqual({
      client_id: 'client-9',
      channel_id: 'channel-4',
      transport: 'whatsapp',
      text: 'Your order ships today.',
      type: 'to_client',
    })
  })

  it('keeps a path prefix of the base URL', async () => {
    const connector = createMsgPlatformConnector()
    await connector.send({ integration: integrationAt(`${platform.url}/tenant-a`), session, message })
    expect(platform.calls.map((call) => call.path)).toEqual(['/tenant-a/v1/messages'])
  })

  it.each([500, 502, 503])('calls a %i retryable, with the status and body in the error', async (status) => {
    platform.failNext('/v1/messages', 1, status, 'upstream hiccup')
    const outcome = await createMsgPlatformConnector().send({
      integration: integrationAt(platform.url),
      session,
      message,
    })
    expect(outcome).toEqual({
      ok: false,
      retryable: true,
      error: `msgplatform answered ${status}: upstream hiccup`,
    })
  })

  it.each([400, 401, 404, 408, 422, 429])(
    'calls a %i final, as CONTRACT §6 says of every 4xx',
    async (status) => {
      platform.failNext('/v1/messages', 1, status, '{"error":"nope"}')
      const outcome = await createMsgPlatformConnector().send({
        integration: integrationAt(platform.url),
        session,
        message,
      })
      expect(outcome).toMatchObject({ ok: false, retryable: false })
    },
  )

  it('gives up on a platform slower than the timeout, as a retryable failure', async () => {
    platform.delay('/v1/messages', 500)
    const started = Date.now()
    const outcome = await createMsgPlatformConnector({ timeoutMs: 50 }).send({
      integration: integrationAt(platform.url),
      session,
      message,
    })
    expect(Date.now() - started).toBeLessThan(400)
    expect(outcome).toEqual({ ok: false, retryable: true, error: 'msgplatform did not answer within 50 ms' })
  })

  it('calls an unreachable platform a retryable failure', async () => {
    const port = await closedPort()
    const outcome = await createMsgPlatformConnector().send({
      integration: integrationAt(`http://127.0.0.1:${port}`),
      session,
      message,
    })
    expect(outcome).toMatchObject({ ok: false, retryable: true, error: expect.stringMatching(/unreachable/) })
  })

  // A redirect followed by fetch turns the POST into a GET without the reply, whose 200 would
  // have counted as delivered.
  it.each([301, 302, 303, 307, 308])('calls a %i final, without following it', async (status) => {
    const elsewhere = await startServer((_request, response) => {
      response.writeHead(status, { location: `${platform.url}/v1/messages` })
      response.end()
    })
    try {
      const outcome = await createMsgPlatformConnector().send({
        integration: integrationAt(elsewhere.url),
        session,
        message,
      })
      expect(outcome).toEqual({
        ok: false,
        retryable: false,
        error: `msgplatform answered ${status} (a redirect, not followed)`,
      })
      expect(platform.calls).toHaveLength(0)
    } finally {
      await elsewhere.close()
    }
  })

  // Sent again, the reply would reach the customer twice.
  it('counts a 2xx as delivered even when its body never finishes', async () => {
    const stalling = await startServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.write('{"ok":')
    })
    try {
      const outcome = await createMsgPlatformConnector({ timeoutMs: 100 }).send({
        integration: integrationAt(stalling.url),
        session,
        message,
      })
      expect(outcome).toEqual({ ok: true })
    } finally {
      await stalling.close()
    }
  })

  // An answer is read for its first bytes only (an excerpt, a request id): read to its end, a
  // platform that streamed without end filled this server's memory until the timeout.
  it('reads only the start of an endless answer, and reports it at once with an excerpt', async () => {
    let written = 0
    const endless = await startServer((_request, response) => {
      response.writeHead(503, { 'content-type': 'text/plain' })
      const chunk = 'x'.repeat(64 * 1024)
      const more = () => {
        if (response.destroyed) return
        written += chunk.length
        if (response.write(chunk)) setImmediate(more)
        else response.once('drain', more)
      }
      more()
    })
    try {
      const outcome = await createMsgPlatformConnector({ timeoutMs: 3_000 }).send({
        integration: integrationAt(endless.url),
        session,
        message,
      })
      expect(outcome).toEqual({
        ok: false,
        retryable: true,
        error: expect.stringMatching(/^msgplatform answered 503: x+$/),
      })
      expect(written).toBeLessThan(16 * 1024 * 1024)
    } finally {
      await endless.close()
    }
  })

  it('refuses, for good, an integration whose config lacks the token', async () => {
    const outcome = await createMsgPlatformConnector().send({
      integration: integrationAt(platform.url, { apiToken: undefined }),
      session,
      message,
    })
    expect(outcome).toMatchObject({ ok: false, retryable: false })
    expect(platform.calls).toHaveLength(0)
  })

  it('uses the fetch it is given', async () => {
    const seen: string[] = []
    const connector = createMsgPlatformConnector({
      fetch: (input, init) => {
        seen.push(String(input))
        return fetch(input, init)
      },
    })
    await connector.send({ integration: integrationAt(platform.url), session, message })
    expect(seen).toEqual([`${platform.url}/v1/messages`])
  })
})

describe('transferToHuman', () => {
  const request = (overrides: Record<string, unknown> = {}) => ({
    integration: integrationAt(platform.url),
    session,
    systemMessage: false,
    ...overrides,
  })

  it('posts the transfer and keeps data.request_id as the external reference', async () => {
    platform.answer('/v1/dialogs/transfer', 200, { data: { request_id: 'r-1' } })
    const outcome = await createMsgPlatformConnector().transferToHuman(request({ operatorId: 5, groupId: 2 }))
    expect(outcome).toEqual({ ok: true, externalReference: 'r-1' })
    expect(platform.callsTo('/v1/dialogs/transfer')[0]?.body).toEqual({
      client_id: 'client-9',
      operator_id: 5,
      group_id: 2,
      system_message: false,
    })
  })

  it('turns a numeric request_id into a string, and does without one', async () => {
    platform.answer('/v1/dialogs/transfer', 200, { data: { request_id: 314 } })
    expect(await createMsgPlatformConnector().transferToHuman(request())).toEqual({
      ok: true,
      externalReference: '314',
    })
    platform.answer('/v1/dialogs/transfer', 200, 'accepted')
    expect(await createMsgPlatformConnector().transferToHuman(request())).toEqual({ ok: true })
    expect(platform.callsTo('/v1/dialogs/transfer')[1]?.body).toEqual({
      client_id: 'client-9',
      system_message: false,
    })
  })

  // The reason lands in the session's pauseState, which the company's operators read.
  it('reports an unreachable platform without the network details of this server', async () => {
    const port = await closedPort()
    const outcome = await createMsgPlatformConnector().transferToHuman(
      request({ integration: integrationAt(`http://127.0.0.1:${port}`) }),
    )
    expect(outcome).toEqual({
      ok: false,
      error: 'msgplatform could not be reached at the apiBaseUrl of the integration',
    })
  })

  it('reports a refusal or a timeout with its text', async () => {
    platform.answer('/v1/dialogs/transfer', 409, 'dialog already with an operator')
    expect(await createMsgPlatformConnector().transferToHuman(request())).toEqual({
      ok: false,
      error: 'msgplatform answered 409: dialog already with an operator',
    })
    platform.delay('/v1/dialogs/transfer', 300)
    expect(await createMsgPlatformConnector({ timeoutMs: 30 }).transferToHuman(request())).toEqual({
      ok: false,
      error: 'msgplatform did not answer within 30 ms',
    })
  })
})

describe('registerStatusHooks', () => {
  it('posts the URL and the events', async () => {
    const outcome = await createMsgPlatformConnector().registerStatusHooks({
      integration: integrationAt(platform.url),
      url: 'https://chat.example.com/api/webhook/msgplatform/12',
      events: ['close_dialog'],
    })
    expect(outcome).toEqual({ ok: true })
    expect(platform.callsTo('/v1/webhooks')[0]?.body).toEqual({
      url: 'https://chat.example.com/api/webhook/msgplatform/12',
      events: ['close_dialog'],
    })
  })

  it('reports a refusal', async () => {
    platform.answer('/v1/webhooks', 401, 'bad token')
    const outcome = await createMsgPlatformConnector().registerStatusHooks({
      integration: integrationAt(platform.url),
      url: 'https://x.test/hook',
      events: [],
    })
    expect(outcome).toEqual({ ok: false, error: 'msgplatform answered 401: bad token' })
  })

  it('reports an unreachable platform without the network details of this server: its caller sees the text', async () => {
    const port = await closedPort()
    const outcome = await createMsgPlatformConnector().registerStatusHooks({
      integration: integrationAt(`http://127.0.0.1:${port}`),
      url: 'https://x.test/hook',
      events: [],
    })
    expect(outcome).toEqual({
      ok: false,
      error: 'msgplatform could not be reached at the apiBaseUrl of the integration',
    })
    platform.delay('/v1/webhooks', 300)
    expect(
      await createMsgPlatformConnector({ timeoutMs: 30 }).registerStatusHooks({
        integration: integrationAt(platform.url),
        url: 'https://x.test/hook',
        events: [],
      }),
    ).toEqual({ ok: false, error: 'msgplatform did not answer within 30 ms' })
  })
})
