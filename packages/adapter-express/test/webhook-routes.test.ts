import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { WebhookReceiver, WebhookRefusal, WebhookRequest } from '@switchboard/core'
import { afterEach, describe, expect, it } from 'vitest'
import { createWebhookApp } from './support/webhook-app.js'

interface Door {
  readonly baseUrl: string
  readonly received: WebhookRequest[]
  readonly verified: string[]
  readonly refusals: WebhookRefusal[]
}

const servers: Server[] = []
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
  )
})

/**
 * The router with a stub receiver under `stub` (and one under `webchat`, which must never be
 * reached), so these tests see only what the adapter does before and around a receiver.
 */
async function startDoor(
  options: { requireHttps?: boolean; trustProxy?: string; fails?: boolean } = {},
): Promise<Door> {
  const received: WebhookRequest[] = []
  const verified: string[] = []
  const refusals: WebhookRefusal[] = []
  const stub: WebhookReceiver = {
    async refused(refusal) {
      refusals.push(refusal)
      if (options.fails === true) throw new Error('storage is down')
    },
    async handle(request) {
      if (options.fails === true) throw new Error('storage is down')
      received.push(request)
      return { status: 202, body: { ok: true, bytes: request.rawBody.length } }
    },
    async handleVerification({ integrationId }) {
      verified.push(integrationId)
      return { status: 200, body: { ok: true, verified: true } }
    },
  }
  const { fails: _fails, ...settings } = options
  const app = createWebhookApp({ receivers: { stub, webchat: stub }, ...settings })
  const server = app.listen(0, '127.0.0.1')
  await new Promise<void>((resolve) => server.once('listening', resolve))
  servers.push(server)
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    verified,
    refusals,
  }
}

async function send(door: Door, method: string, path: string, init: RequestInit = {}) {
  const response = await fetch(`${door.baseUrl}${path}`, { method, ...init })
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

const errorBody = (code: string) => ({ error: { code, message: expect.any(String) } })

describe('the webhook routes of the Express adapter', () => {
  it('hands the receiver the exact bytes, the headers and the path id, and relays its answer', async () => {
    const door = await startDoor()
    const bytes = Buffer.from('{ "spaced" :  true }\n\u00e9', 'utf8')
    const answer = await send(door, 'POST', '/api/webhook/stub/42', {
      body: bytes,
      headers: { 'content-type': 'text/plain', 'x-webhook-signature': 'sha256=abc', 'Webhook-Id': 'w-1' },
    })
    expect(answer).toEqual({ status: 202, body: { ok: true, bytes: bytes.length } })
    const [request] = door.received
    expect(Buffer.from(request!.rawBody).equals(bytes)).toBe(true)
    expect(request?.integrationId).toBe('42')
    expect(request?.headers['x-webhook-signature']).toBe('sha256=abc')
    expect(request?.headers['webhook-id']).toBe('w-1')
  })

  it('gives the receiver empty bytes for a request without a body', async () => {
    const door = await startDoor()
    await send(door, 'POST', '/api/webhook/stub/1')
    expect(door.received[0]?.rawBody).toHaveLength(0)
  })

  it('answers a GET with the receiver verification', async () => {
    const door = await startDoor()
    expect(await send(door, 'GET', '/api/webhook/stub/7')).toEqual({
      status: 200,
      body: { ok: true, verified: true },
    })
    expect(door.verified).toEqual(['7'])
  })

  it('answers 404 for an unknown connector type, another method, or a deeper path', async () => {
    const door = await startDoor()
    expect(await send(door, 'POST', '/api/webhook/pigeon/1', { body: 'x' })).toEqual({
      status: 404,
      body: errorBody('NOT_FOUND'),
    })
    expect((await send(door, 'GET', '/api/webhook/constructor/1')).status).toBe(404)
    expect((await send(door, 'PUT', '/api/webhook/stub/1', { body: 'not json' })).status).toBe(404)
    expect((await send(door, 'POST', '/api/webhook/stub/1/more', { body: 'not json' })).status).toBe(404)
    expect((await send(door, 'POST', '/api/webhook', { body: 'not json' })).status).toBe(404)
    expect(door.received).toHaveLength(0)
  })

  it('answers 404 under /webhook/webchat, even with a receiver registered for it', async () => {
    const door = await startDoor()
    expect((await send(door, 'POST', '/api/webhook/webchat/1', { body: '{}' })).status).toBe(404)
    expect((await send(door, 'GET', '/api/webhook/webchat/1')).status).toBe(404)
    expect(door.received).toHaveLength(0)
    expect(door.verified).toHaveLength(0)
  })

  it('answers 413 for a body over 1 MiB, before the connector type', async () => {
    const door = await startDoor()
    const big = Buffer.alloc(1024 * 1024 + 1, 0x61)
    for (const path of ['/api/webhook/stub/1', '/api/webhook/pigeon/1']) {
      expect(await send(door, 'POST', path, { body: big })).toEqual({
        status: 413,
        body: errorBody('PAYLOAD_TOO_LARGE'),
      })
    }
    expect(door.received).toHaveLength(0)
  })

  it('answers 500 in the contract shape when the receiver throws, so the platform retries', async () => {
    const door = await startDoor({ fails: true })
    expect(await send(door, 'POST', '/api/webhook/stub/1', { body: '{}' })).toEqual({
      status: 500,
      body: errorBody('INTERNAL_ERROR'),
    })
  })

  it('with requireHttps, refuses plain HTTP first: before size and connector type', async () => {
    const door = await startDoor({ requireHttps: true })
    const big = Buffer.alloc(1024 * 1024 + 1, 0x61)
    for (const [method, path, body] of [
      ['POST', '/api/webhook/stub/1', '{}'],
      ['POST', '/api/webhook/stub/1', big],
      ['POST', '/api/webhook/pigeon/1', '{}'],
      ['GET', '/api/webhook/stub/1', undefined],
    ] as const) {
      expect(await send(door, method, path, body === undefined ? {} : { body })).toEqual({
        status: 403,
        body: errorBody('HTTPS_REQUIRED'),
      })
    }
    expect(door.received).toHaveLength(0)
    // The receiver hears of the POSTs to its type, to log them; not of the GET, not of another type.
    const refusal = { integrationId: '1', status: 403, reason: 'https required' }
    expect(door.refusals).toEqual([refusal, refusal])
    // Other routes are not webhooks: no HTTPS rule of this router applies to them.
    expect((await send(door, 'GET', '/api/health')).status).toBe(200)
  })

  it('with requireHttps, answers 403 even when the receiver fails to note the refusal', async () => {
    const door = await startDoor({ requireHttps: true, fails: true })
    expect(await send(door, 'POST', '/api/webhook/stub/7', { body: '{}' })).toEqual({
      status: 403,
      body: errorBody('HTTPS_REQUIRED'),
    })
    expect(door.refusals).toEqual([{ integrationId: '7', status: 403, reason: 'https required' }])
  })

  it('with requireHttps, trusts X-Forwarded-Proto only from a trusted proxy', async () => {
    const untrusted = await startDoor({ requireHttps: true })
    const forwarded = { body: '{}', headers: { 'x-forwarded-proto': 'https' } }
    expect((await send(untrusted, 'POST', '/api/webhook/stub/1', forwarded)).status).toBe(403)
    const behindProxy = await startDoor({ requireHttps: true, trustProxy: 'loopback' })
    expect((await send(behindProxy, 'POST', '/api/webhook/stub/1', forwarded)).status).toBe(202)
  })

  it('leaves the JSON API as it was: a malformed JSON body elsewhere is still 400', async () => {
    const door = await startDoor()
    const answer = await send(door, 'POST', '/api/auth/login', {
      body: '{"email":',
      headers: { 'content-type': 'application/json' },
    })
    expect(answer).toEqual({ status: 400, body: errorBody('VALIDATION_ERROR') })
  })
})
