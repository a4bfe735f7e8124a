import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ConfigError, type WebhookReceiver } from '@switchboard/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createWebhookLane, type TrustProxy, type WebhookLaneOptions } from '../src/index.js'
import { createWebhookApp } from './support/webhook-app.js'

/** What a receiver was handed, in a form two servers' calls can be compared in. */
type Call = string

interface Door {
  readonly port: number
  readonly calls: Call[]
  readonly failures: unknown[]
  /** Requests the Express app saw. */
  expressRequests: number
}

interface DoorSettings {
  readonly requireHttps: boolean
  readonly trustProxy?: string
}

/** Answers from what it was handed, so two servers given the same request answer the same. */
function recordingReceiver(calls: Call[]): WebhookReceiver {
  return {
    async handle({ integrationId, rawBody, headers }) {
      calls.push(`handle ${integrationId} ${Buffer.from(rawBody).toString('base64')}`)
      if (integrationId === 'fail') throw new Error('storage is down')
      return {
        status: integrationId === '404' ? 404 : 202,
        body: {
          ok: true,
          id: integrationId,
          bytes: rawBody.length,
          signature: headers['x-webhook-signature'] ?? null,
        },
      }
    },
    async handleVerification({ integrationId }) {
      calls.push(`verify ${integrationId}`)
      return { status: 200, body: { ok: true, verified: true } }
    },
    async refused(refusal) {
      calls.push(`refused ${refusal.integrationId} ${refusal.status}`)
    },
  }
}

const servers: Server[] = []

/** The router alone, or the lane ahead of the same router, as the reference server wires it. */
async function startDoor(settings: DoorSettings, withLane: boolean): Promise<Door> {
  const calls: Call[] = []
  const failures: unknown[] = []
  const receivers = { stub: recordingReceiver(calls), webchat: recordingReceiver(calls) }
  const logger = { error: (object: Record<string, unknown>) => void failures.push(object.err) }
  const door: Door = { port: 0, calls, failures, expressRequests: 0 }
  const app = createWebhookApp({
    receivers,
    ...settings,
    logger,
    before: (_request, _response, next) => {
      door.expressRequests += 1
      next()
    },
  })
  const lane = createWebhookLane({
    receivers,
    mountPath: '/api',
    requireHttps: settings.requireHttps,
    trustProxy: app.get('trust proxy fn') as TrustProxy,
    logger,
  })
  // As the reference server: the app, not node, answers a request without Host.
  const server = createServer({ requireHostHeader: false }, (request, response) => {
    if (!withLane || !lane(request, response)) app(request, response)
  })
  server.listen(0, '127.0.0.1')
  await new Promise<void>((resolve) => server.once('listening', resolve))
  servers.push(server)
  return Object.assign(door, { port: (server.address() as AddressInfo).port })
}

interface Sent {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer
  /** No Content-Length: the body goes chunked. */
  readonly chunked: boolean
  /** Send a Host header (HTTP/1.1 requires one). */
  readonly host: boolean
}

interface Answer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/** One request on a connection of its own, so no answer depends on an earlier one. */
function send(door: Door, sent: Sent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: '127.0.0.1',
        port: door.port,
        method: sent.method,
        path: sent.path,
        headers: sent.chunked
          ? sent.headers
          : { ...sent.headers, 'content-length': String(sent.body.length) },
        setHost: sent.host,
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('end', () =>
          resolve({
            status: response.statusCode!,
            headers: response.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        )
      },
    )
    request.on('error', reject)
    if (sent.chunked) request.write(sent.body)
    request.end(sent.chunked ? undefined : sent.body)
  })
}

const plain = (path: string, body = '{"text":"hi"}'): Sent => ({
  method: 'POST',
  path,
  headers: { 'content-type': 'application/json', 'x-webhook-signature': 'sha256=abc' },
  body: Buffer.from(body),
  chunked: false,
  host: true,
})

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The parts of an answer a client can rely on: Date, ETag and a generated request id vary. */
function comparable(answer: Answer) {
  const requestId = answer.headers['x-request-id']
  return {
    status: answer.status,
    body: answer.headers['content-type']?.startsWith('application/json')
      ? JSON.parse(answer.body)
      : answer.body,
    contentType: answer.headers['content-type'],
    requestId: typeof requestId === 'string' && UUID.test(requestId) ? 'generated' : requestId,
  }
}

const SETTINGS: readonly DoorSettings[] = [
  { requireHttps: false },
  { requireHttps: true },
  { requireHttps: true, trustProxy: 'loopback' },
  { requireHttps: false, trustProxy: 'loopback' },
]
const pairs: { settings: DoorSettings; router: Door; lane: Door }[] = []

beforeAll(async () => {
  for (const settings of SETTINGS) {
    pairs.push({ settings, router: await startDoor(settings, false), lane: await startDoor(settings, true) })
  }
})
afterAll(async () => {
  await Promise.all(
    servers.splice(0).map(
      (server) =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        }),
    ),
  )
})

describe('the webhook lane ahead of the Express router', () => {
  it('answers a plain webhook itself, with the receiver answer, the caller request id and no Express', async () => {
    const { lane } = pairs[0]!
    const before = lane.expressRequests
    const answer = await send(lane, {
      ...plain('/api/webhook/stub/42'),
      headers: { ...plain('').headers, 'x-request-id': 'delivery-1' },
    })
    expect(comparable(answer)).toEqual({
      status: 202,
      body: { ok: true, id: '42', bytes: 13, signature: 'sha256=abc' },
      contentType: 'application/json; charset=utf-8',
      requestId: 'delivery-1',
    })
    expect(lane.calls.at(-1)).toBe(`handle 42 ${Buffer.from('{"text":"hi"}').toString('base64')}`)
    expect(lane.expressRequests).toBe(before)
  })

  it('takes HTTPS from a trusted proxy where HTTPS is required, as the router judges it', async () => {
    const { lane } = pairs[2]!
    const before = lane.expressRequests
    const answer = await send(lane, {
      ...plain('/api/webhook/stub/7'),
      headers: { ...plain('').headers, 'x-forwarded-proto': 'https' },
    })
    expect(answer.status).toBe(202)
    expect(lane.expressRequests).toBe(before)
  })

  it.each([
    ['another method', { ...plain('/api/webhook/stub/1'), method: 'PUT' }],
    ['a GET verification', { ...plain('/api/webhook/stub/1'), method: 'GET' }],
    ['a path in other case', plain('/API/webhook/stub/1')],
    ['a trailing slash', plain('/api/webhook/stub/1/')],
    ['a query', plain('/api/webhook/stub/1?x=1')],
    ['a percent-encoded id', plain('/api/webhook/stub/%31')],
    ['the websocket-only type', plain('/api/webhook/webchat/1')],
    ['an unknown type', plain('/api/webhook/pigeon/1')],
    ['an inherited name', plain('/api/webhook/constructor/1')],
    ['a chunked body', { ...plain('/api/webhook/stub/1'), chunked: true }],
    ['a Content-Encoding', { ...plain('/api/webhook/stub/1'), headers: { 'content-encoding': 'gzip' } }],
    ['no Host', { ...plain('/api/webhook/stub/1'), host: false }],
  ] satisfies [string, Sent][])('leaves %s to the router', async (_name, sent) => {
    const { lane } = pairs[0]!
    const before = lane.expressRequests
    await send(lane, sent)
    expect(lane.expressRequests).toBe(before + 1)
  })

  it('leaves plain HTTP to the router where HTTPS is required, which refuses it and tells the receiver', async () => {
    const { lane } = pairs[1]!
    const before = lane.expressRequests
    const answer = await send(lane, plain('/api/webhook/stub/9'))
    expect(comparable(answer)).toMatchObject({ status: 403, body: { error: { code: 'HTTPS_REQUIRED' } } })
    expect(lane.expressRequests).toBe(before + 1)
    expect(lane.calls.at(-1)).toBe('refused 9 403')
  })

  it('leaves a body over 1 MiB to the router, which answers 413 without calling the receiver', async () => {
    const { lane } = pairs[0]!
    const calls = lane.calls.length
    const answer = await send(lane, plain('/api/webhook/stub/1', 'x'.repeat(1024 * 1024 + 1)))
    expect(comparable(answer)).toMatchObject({ status: 413, body: { error: { code: 'PAYLOAD_TOO_LARGE' } } })
    expect(lane.calls.length).toBe(calls)
  })

  it('answers 500 INTERNAL_ERROR when the receiver throws, and logs it', async () => {
    const { lane } = pairs[0]!
    const answer = await send(lane, plain('/api/webhook/stub/fail'))
    expect(comparable(answer)).toEqual({
      status: 500,
      body: { error: { code: 'INTERNAL_ERROR', message: 'internal server error' } },
      contentType: 'application/json; charset=utf-8',
      requestId: 'generated',
    })
    expect(lane.failures.at(-1)).toEqual(new Error('storage is down'))
  })

  it('hands the receiver nothing for a body the client abandoned, and keeps serving', async () => {
    const { lane } = pairs[0]!
    const calls = lane.calls.length
    await new Promise<void>((resolve) => {
      const request = httpRequest({
        host: '127.0.0.1',
        port: lane.port,
        method: 'POST',
        path: '/api/webhook/stub/5',
        headers: { 'content-length': '100' },
        agent: false,
      })
      request.on('error', () => resolve())
      request.write('only ten b', () => setTimeout(() => request.destroy(), 50))
      request.on('close', () => resolve())
    })
    expect((await send(lane, plain('/api/webhook/stub/6'))).status).toBe(202)
    expect(lane.calls.slice(calls)).toEqual([`handle 6 ${Buffer.from('{"text":"hi"}').toString('base64')}`])
  })

  it('refuses a mount path that is not one', () => {
    for (const mountPath of ['api', '/api/', '/a(b)', '/api?x']) {
      expect(() => createWebhookLane({ receivers: {}, mountPath })).toThrow(/mountPath/)
    }
    expect(() => createWebhookLane({ receivers: {}, mountPath: '' })).not.toThrow()
  })

  it('refuses to start without receivers, rather than failing at the first webhook', () => {
    const withoutReceivers = { mountPath: '/api' } as unknown as WebhookLaneOptions
    expect(() => createWebhookLane(withoutReceivers)).toThrow(/receivers must be an object/)
    expect(() => createWebhookLane(undefined as unknown as WebhookLaneOptions)).toThrow(ConfigError)
  })

  it('answers every request as the router alone does, and hands the receiver the same (property)', async () => {
    // Mostly what a platform sends, so most requests are the lane's to take; now and then one
    // thing out of the ordinary, which must reach the router and be answered as before.
    const usually = <T>(common: fc.Arbitrary<T>, odd: fc.Arbitrary<T>) =>
      fc.oneof({ weight: 5, arbitrary: common }, { weight: 1, arbitrary: odd })
    const path = fc
      .tuple(
        usually(fc.constant('/api'), fc.constantFrom('/API', '/api/', '/api//', '')),
        usually(
          fc.constant('stub'),
          fc.constantFrom('webchat', 'pigeon', 'constructor', '__proto__', 'Stub', 'stub%20'),
        ),
        usually(
          fc.constantFrom('42', '404', 'fail', 'a_b-C'),
          fc.constantFrom('x'.repeat(100), 'x'.repeat(101), '%34%32', '..', 'a.b', ''),
        ),
        usually(fc.constant(''), fc.constantFrom('/', '?q=1', '/more', '#f')),
      )
      .map(([prefix, connectorType, id, tail]) => `${prefix}/webhook/${connectorType}/${id}${tail}`)
    const sometimes = <T>(value: fc.Arbitrary<T>) => fc.option(value, { freq: 2, nil: undefined })
    const headers = fc
      .record({
        'x-webhook-signature': sometimes(fc.constantFrom('sha256=abc', '')),
        'x-request-id': sometimes(fc.constantFrom('delivery-1', 'not a token!', '', 'x'.repeat(101))),
        'x-forwarded-proto': sometimes(
          fc.constantFrom('https', 'http', 'https, http', 'https ,http', 'HTTPS', ''),
        ),
        'content-encoding': fc.option(fc.constantFrom('identity', 'gzip'), { freq: 6, nil: undefined }),
        'content-type': sometimes(fc.constantFrom('application/json', 'text/plain')),
      })
      .map(
        (given): Record<string, string> =>
          Object.fromEntries(
            Object.entries(given).filter((entry): entry is [string, string] => entry[1] !== undefined),
          ),
      )
    const sent = fc.record({
      method: usually(fc.constant('POST'), fc.constantFrom('GET', 'PUT', 'DELETE')),
      path,
      headers,
      body: fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
      chunked: usually(fc.constant(false), fc.constant(true)),
      host: usually(fc.constant(true), fc.constant(false)),
    })
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: SETTINGS.length - 1 }), sent, async (which, request) => {
        const { router, lane } = pairs[which]!
        const routerCalls = router.calls.length
        const laneCalls = lane.calls.length
        const [alone, ahead] = await Promise.all([send(router, request), send(lane, request)])
        expect(comparable(ahead)).toEqual(comparable(alone))
        expect(lane.calls.slice(laneCalls)).toEqual(router.calls.slice(routerCalls))
      }),
      { numRuns: Number(process.env.WEBHOOK_LANE_RUNS ?? 300) },
    )
  })
})
