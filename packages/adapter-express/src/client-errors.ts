import { type IncomingMessage, type Server, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import { type SwitchboardError, switchboardError } from '@switchboard/core'
import { ERROR_STATUS } from './error-status.js'

/**
 * The refusal of a request Node's parser rejected. Node's own answer has an empty body; the contract
 * wants its error shape even before a route runs (CONTRACT §2).
 */
function refusalOf(code: string | undefined): SwitchboardError | null {
  if (code === 'HPE_HEADER_OVERFLOW')
    return switchboardError('REQUEST_HEADER_FIELDS_TOO_LARGE', 'request headers are too large')
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW')
    return switchboardError('PAYLOAD_TOO_LARGE', 'chunk extensions are too large')
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return switchboardError('REQUEST_TIMEOUT', 'the request did not arrive in time')
  if (code?.startsWith('HPE_')) return switchboardError('VALIDATION_ERROR', 'malformed HTTP request')
  return null
}

/** A response already begun on the socket cannot be followed by another without garbling both. */
function hasResponseUnderway(socket: Duplex): boolean {
  const underway = (socket as { _httpMessage?: { headersSent?: boolean } | null })._httpMessage
  return underway?.headersSent === true
}

/** A refusal written straight to the socket, in the contract's error shape, then the connection closes. */
function refuseOnSocket(socket: Duplex, refusal: SwitchboardError): void {
  const status = ERROR_STATUS[refusal.code]
  const body = JSON.stringify({ error: { code: refusal.code, message: refusal.message } })
  const answer =
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  // Destroyed once flushed: the server's sockets are half-open, so end() alone would leave the
  // connection to a client that never closes its side.
  socket.end(answer, () => socket.destroy())
}

/**
 * Answers requests Node refuses before the application sees them (headers over its size limit,
 * malformed framing such as two Content-Length headers) in the contract's JSON error shape, then
 * closes the connection: after a framing error the rest of its bytes cannot be trusted. A request
 * whose `Expect` names something other than `100-continue` is served as if it had none (RFC 9110
 * lets a server ignore it), where Node would answer 417 with no body. A `CONNECT`, which Node
 * hands to no route and whose connection it drops unanswered, is answered 404 as any method
 * without a route.
 */
export function answerClientErrors(server: Pick<Server, 'on' | 'emit'>): void {
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    server.emit('request', request, response)
  })
  server.on('connect', (request: IncomingMessage, socket: Duplex) => {
    // The socket is the application's now, without the server's error listener: a client that
    // resets it while the answer is written must not end the process.
    socket.on('error', () => undefined)
    refuseOnSocket(
      socket,
      switchboardError('NOT_FOUND', `no route for ${request.method} ${String(request.url).slice(0, 200)}`),
    )
  })
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const refusal = refusalOf(error.code)
    if (refusal === null || !socket.writable || hasResponseUnderway(socket)) {
      socket.destroy()
      return
    }
    refuseOnSocket(socket, refusal)
  })
}
