import { connect, type Socket } from 'node:net'
import { TLSSocket, connect as tlsConnect } from 'node:tls'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Service, startService } from './support/start-service.js'
import { connectVisitor, refusal } from './support/visitor.js'

let service: Service
let agentId: number

beforeAll(async () => {
  service = await startService()
  agentId = await service.createAgent({ name: 'Concierge' })
})
afterAll(async () => {
  await service.close()
})

const errorBody = (code: string) => ({ error: { code, message: expect.any(String) } })

const HANDSHAKE_HEADERS = 'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'

/** An upgrade request written by hand, for what a WebSocket client would never send; its raw answer. */
function rawUpgrade(path: string, headers: string): Promise<{ status: number; body: unknown }> {
  const { port } = new URL(service.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n${headers}\r\n`,
      )
    })
    let text = ''
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString()
    })
    socket.on('close', () => {
      const body = text.slice(text.indexOf('\r\n\r\n') + 4)
      let parsed: unknown = body
      try {
        parsed = JSON.parse(body)
      } catch {}
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(text)?.[1]), body: parsed })
    })
    socket.on('error', reject)
  })
}

/** Sends what `send` writes once `socket` is connected; the first `count` answers, then closes it. */
function exchange(
  socket: Socket,
  count: number,
  send: () => void,
): Promise<{ status: number; body: unknown }[]> {
  return new Promise((resolve, reject) => {
    socket.once(socket instanceof TLSSocket ? 'secureConnect' : 'connect', send)
    let received = ''
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString()
      const complete = completeAnswers(received)
      if (complete.length < count) return
      socket.end()
      resolve(complete)
    })
    socket.on('error', reject)
  })
}

/** The HTTP/1.1 answers in `text` whose bodies (by Content-Length) have all arrived. */
function completeAnswers(text: string): { status: number; body: unknown }[] {
  const answers: { status: number; body: unknown }[] = []
  let rest = text
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n')
    if (headEnd === -1) return answers
    const head = rest.slice(0, headEnd)
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
    const bodyText = rest.slice(headEnd + 4, headEnd + 4 + length)
    if (Buffer.byteLength(bodyText) < length) return answers
    answers.push({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]), body: JSON.parse(bodyText) })
    rest = rest.slice(headEnd + 4 + length)
  }
}

describe('the webchat handshake', () => {
  it('answers 404 before the upgrade for an unknown integration, a malformed id or one of another type', async () => {
    const msgplatform = await service.api<{ id: string }>('POST', '/api/integrations', {
      type: 'msgplatform',
      name: 'Platform',
      entryAgentId: agentId,
      config: { apiBaseUrl: 'http://127.0.0.1:9', apiToken: 'secret' },
    })
    for (const id of ['987654321', 'abc', '0', msgplatform.body.id]) {
      expect(await refusal(service.socketUrl(id))).toEqual({ status: 404, body: errorBody('NOT_FOUND') })
    }
    expect((await refusal(`${service.socketUrl('1')}/extra`)).status).toBe(404)
  })

  it('answers 403 for an origin not in allowedOrigins, and for no Origin when the list is set', async () => {
    const integrationId = await service.createWebchat({
      entryAgentId: agentId,
      allowedOrigins: ['https://shop.example.com'],
    })
    const url = service.socketUrl(integrationId)
    expect(await refusal(url, { origin: 'https://evil.example.com' })).toEqual({
      status: 403,
      body: errorBody('FORBIDDEN'),
    })
    expect((await refusal(url, { origin: 'null' })).status).toBe(403)
    expect((await refusal(url)).status).toBe(403)
    const allowed = await connectVisitor(url, { headers: { origin: 'https://shop.example.com' } })
    expect(await allowed.next()).toMatchObject({ type: 'session' })
    await allowed.close()

    // Without a list any origin may connect.
    const open = await service.createWebchat({ entryAgentId: agentId })
    const anyone = await connectVisitor(service.socketUrl(open), { headers: { origin: 'https://a.example' } })
    expect(await anyone.next()).toMatchObject({ type: 'session' })
    await anyone.close()
  })

  it('answers 403 for an inactive integration and drops its open sockets at the next message', async () => {
    const integrationId = await service.createWebchat({ entryAgentId: agentId })
    const before = await connectVisitor(service.socketUrl(integrationId))
    const session = await before.next('session')
    await service.api('PATCH', `/api/integrations/${integrationId}`, { active: false })
    expect(await refusal(service.socketUrl(integrationId))).toEqual({
      status: 403,
      body: errorBody('INTEGRATION_INACTIVE'),
    })
    // Inactive wins over the token check: an unsigned caller learns nothing else.
    expect((await refusal(service.socketUrl(integrationId, session.visitorToken as string))).status).toBe(403)
    before.send({ type: 'message', text: 'anyone?' })
    expect(await before.next('error')).toMatchObject({ code: 'INTEGRATION_INACTIVE' })
    expect(await before.closed).toBe(1008)

    await service.api('PATCH', `/api/integrations/${integrationId}`, { active: true })
    const after = await connectVisitor(service.socketUrl(integrationId, session.visitorToken as string))
    expect(await after.next()).toMatchObject({ type: 'session', sessionId: session.sessionId })
    await after.close()
  })

  it('answers 401 for a bad token and for a token of another integration', async () => {
    const mine = await service.createWebchat({ entryAgentId: agentId })
    const theirs = await service.createWebchat({ entryAgentId: agentId })
    const visitor = await connectVisitor(service.socketUrl(theirs))
    const token = (await visitor.next('session')).visitorToken as string
    await visitor.close()

    expect(await refusal(service.socketUrl(mine, token))).toEqual({
      status: 401,
      body: errorBody('UNAUTHORIZED'),
    })
    // The same visitor id, relabelled for this integration, keeps the other one's signature.
    const relabelled = token.replace(`v1.${theirs}.`, `v1.${mine}.`)
    expect((await refusal(service.socketUrl(mine, relabelled))).status).toBe(401)
    const tampered = `${token.slice(0, -2)}${token.endsWith('AA') ? 'BB' : 'AA'}`
    for (const bad of ['', 'garbage', tampered, `${token}.extra`]) {
      expect((await refusal(service.socketUrl(theirs, bad))).status).toBe(401)
    }

    // Rotating the integration's secret signs its visitors out.
    await service.api('POST', `/api/integrations/${theirs}/rotate-secret`)
    expect((await refusal(service.socketUrl(theirs, token))).status).toBe(401)
  })

  it('answers 404 to an upgrade whose target is no URL, and keeps serving', async () => {
    const answer = await rawUpgrade('//[', HANDSHAKE_HEADERS)
    expect(answer.status).toBe(404)
    expect(answer.body).toEqual(errorBody('NOT_FOUND'))
    expect((await fetch(`${service.url}/api/health`)).status).toBe(200)
  })

  it('answers 400 in the error shape to an upgrade that is no valid WebSocket handshake', async () => {
    const integrationId = await service.createWebchat({ entryAgentId: agentId })
    const path = `/api/webchat/${integrationId}`
    for (const headers of [
      '',
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n',
      'Sec-WebSocket-Version: 7\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n',
    ]) {
      const answer = await rawUpgrade(path, headers)
      expect(answer.status).toBe(400)
      expect(answer.body).toEqual(errorBody('VALIDATION_ERROR'))
    }
  })

  it('survives clients that reset the connection as their upgrade is refused', async () => {
    const { port } = new URL(service.url)
    const resetAfterAsking = (path: string) =>
      new Promise<void>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(
            `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
              'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
          )
          socket.resetAndDestroy()
          resolve()
        })
        socket.on('error', () => resolve())
      })
    for (let attempt = 0; attempt < 100; attempt += 1) {
      await resetAfterAsking(attempt % 2 === 0 ? '/elsewhere' : '/api/webchat/987654321')
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await fetch(`${service.url}/api/health`)).status).toBe(200)
  })

  // What curl --http2 and Java's HttpClient send on http:// URLs. A server that does not speak
  // HTTP/2 answers as if the Upgrade header were absent (RFC 9110 §7.8); Node hands every request
  // with Upgrade to the WebSocket's listener, which refused it with 404 whatever its path.
  it('serves a request asking to upgrade to h2c as plain HTTP, with its body and on a kept-alive connection', async () => {
    const { port } = new URL(service.url)
    const h2c =
      'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n'
    const body = JSON.stringify({ name: 'Asked over h2c' })
    // The second request is pipelined behind the first, its body sent apart: the HTTP parser
    // reads it from the socket after the headers.
    const socket = connect(Number(port), '127.0.0.1')
    const answers = await exchange(socket, 2, () => {
      socket.write(`GET /api/health HTTP/1.1\r\nHost: localhost\r\n${h2c}\r\n`)
      socket.write(
        `POST /api/agents HTTP/1.1\r\nHost: localhost\r\n${h2c}Authorization: Bearer ${service.token}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
      )
      setTimeout(() => socket.write(body), 50)
    })
    expect(answers).toEqual([
      { status: 200, body: expect.objectContaining({ ok: true }) },
      { status: 201, body: expect.objectContaining({ name: 'Asked over h2c' }) },
    ])
  })

  it('leaves plain HTTP on the same path to the HTTP API', async () => {
    const response = await fetch(`${service.url}/api/webchat/1`)
    expect(response.status).toBe(404)
    expect(await response.json()).toEqual(errorBody('NOT_FOUND'))
  })
})

describe('the webchat on an HTTPS server', () => {
  it('speaks over wss on the same port as the HTTPS API', async () => {
    const fixtures = new URL('../../../examples/reference-server/test/__fixtures__/', import.meta.url)
      .pathname
    const secure = await startService({
      TLS_CERT_FILE: `${fixtures}localhost-cert.pem`,
      TLS_KEY_FILE: `${fixtures}localhost-key.pem`,
    })
    try {
      const entry = await secure.createAgent({ name: 'Secure' })
      const integrationId = await secure.createWebchat({ entryAgentId: entry })
      const url = secure.socketUrl(integrationId)
      expect(url).toMatch(/^wss:\/\//)
      const visitor = await connectVisitor(url, { rejectUnauthorized: false })
      expect(await visitor.next()).toMatchObject({ type: 'session', state: 'ongoing' })
      await visitor.close()

      // A request asking to upgrade to anything else is served as plain HTTPS.
      const socket = tlsConnect({ port: Number(new URL(secure.url).port), rejectUnauthorized: false })
      const answers = await exchange(socket, 1, () =>
        socket.write(
          'GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: foo/1\r\n\r\n',
        ),
      )
      expect(answers).toEqual([{ status: 200, body: expect.objectContaining({ ok: true }) }])
    } finally {
      await secure.close()
    }
  })
})

describe('the reference server’s widget routes', () => {
  it('serves the widget script and the demo page', async () => {
    const widget = await fetch(`${service.url}/widget.js`)
    expect(widget.status).toBe(200)
    expect(widget.headers.get('content-type')).toMatch(/^application\/javascript/)
    expect(await widget.text()).toContain('api/webchat/')

    const demo = await fetch(`${service.url}/demo/webchat?integration=12`)
    expect(demo.status).toBe(200)
    expect(demo.headers.get('content-type')).toMatch(/^text\/html/)
    expect(await demo.text()).toContain(
      '<script src="/widget.js" data-integration="12" data-open="true"></script>',
    )

    for (const query of ['', '?integration=', '?integration=<script>', '?integration=1&integration=2']) {
      expect((await fetch(`${service.url}/demo/webchat${query}`)).status).toBe(400)
    }
  })
})
