import { createServer, type Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { answerClientErrors } from '../src/index.js'

let server: Server
let port: number

beforeAll(async () => {
  const app = express()
  app.get('/ok', (_request, response) => {
    response.json({ ok: true })
  })
  server = createServer(app)
  answerClientErrors(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as AddressInfo).port
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

interface RawAnswer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: unknown
}

/** Sends the bytes as they are and reads until the server closes the connection. */
function sendRaw(bytes: string, { keepOpen = false } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const [head = '', body = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...headerLines] = head.split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body: body === '' ? null : JSON.parse(body),
      })
    })
    // Kept open, the client leaves closing to the server, as one that never hangs up would.
    if (keepOpen) socket.write(bytes)
    else socket.end(bytes)
  })
}

function expectContractError(answer: RawAnswer, status: number, code: string): void {
  expect(answer.status).toBe(status)
  expect(answer.headers['content-type']).toMatch(/^application\/json/)
  expect(answer.headers.connection).toBe('close')
  expect(answer.body).toEqual({ error: { code, message: expect.any(String) } })
  expect(Number(answer.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(answer.body)))
}

describe('requests Node refuses before any route sees them', () => {
  it('answers headers past 16 KiB with 431 in the contract error shape', async () => {
    const answer = await sendRaw(
      `GET /ok HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${'a'.repeat(20_000)}\r\n\r\n`,
    )
    expectContractError(answer, 431, 'REQUEST_HEADER_FIELDS_TOO_LARGE')
  })

  it.each([
    ['two different Content-Length headers', 'Content-Length: 1\r\nContent-Length: 2\r\n'],
    ['an invalid Content-Length', 'Content-Length: abc\r\n'],
    ['Content-Length with Transfer-Encoding', 'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n'],
  ])('answers %s with 400 VALIDATION_ERROR', async (_what, framing) => {
    const answer = await sendRaw(`POST /ok HTTP/1.1\r\nHost: localhost\r\n${framing}\r\n{}`)
    expectContractError(answer, 400, 'VALIDATION_ERROR')
  })

  it('answers a request line that is not HTTP with 400 VALIDATION_ERROR', async () => {
    expectContractError(await sendRaw('NOT HTTP AT ALL\r\n\r\n'), 400, 'VALIDATION_ERROR')
  })

  it('closes the connection itself, even when the client keeps its side open', async () => {
    const answer = await sendRaw('POST /ok HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n', {
      keepOpen: true,
    })
    expectContractError(answer, 400, 'VALIDATION_ERROR')
  })

  it('serves a request whose Expect header names an expectation it does not know', async () => {
    // Node's own answer would be a 417 without a body; RFC 9110 lets a server ignore the expectation.
    const answer = await sendRaw(
      'GET /ok HTTP/1.1\r\nHost: localhost\r\nExpect: something-else\r\nConnection: close\r\n\r\n',
    )
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({ ok: true })
  })

  it('answers a CONNECT, which no route serves, with 404 NOT_FOUND in the contract error shape', async () => {
    // Without a listener of its own, Node drops the connection of a CONNECT with no answer at all.
    const tunnel = 'CONNECT db.example.com:5432 HTTP/1.1\r\nHost: db.example.com:5432\r\n\r\n'
    const answer = await sendRaw(tunnel, { keepOpen: true })
    expectContractError(answer, 404, 'NOT_FOUND')
  })

  it('still answers a well-formed request', async () => {
    const answer = await sendRaw('GET /ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n')
    expect(answer.status).toBe(200)
  })
})
