import { type Server as HttpServer, type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Server as HttpsServer } from 'node:https'
import type { Duplex } from 'node:stream'
import { TLSSocket } from 'node:tls'
import type { ErrorCode, EventBus, RuntimeLogger, Switchboard } from '@switchboard/core'
import { type WebSocket, WebSocketServer } from 'ws'
import { MAX_FRAME_BYTES } from './frames.js'
import { checkHandshake } from './handshake.js'
import { type ConnectionSettings, serveVisitor, type VisitorConnection } from './visitor-connection.js'
import { createWebchatConnector, type WebchatConnector } from './webchat-connector.js'
import { checkWebchatOptions } from './webchat-options.js'

export interface WebchatServerOptions {
  readonly switchboard: Switchboard
  /** Shared by every process of the deployment: replies reach a socket held by any of them. */
  readonly eventBus: EventBus
  /** Any Node HTTP or HTTPS server; the WebSocket shares its port through the `upgrade` event. */
  readonly server: HttpServer | HttpsServer
  /** Where the integrations' sockets live: `{path}/{integrationId}`. Default `/api/webchat`. */
  readonly path?: string
  readonly logger?: RuntimeLogger
  /**
   * How often every socket is pinged; one that has not answered the previous ping is dropped.
   * Each beat also judges the open sockets again on their integrations as stored now, and closes
   * those no longer admitted (a rotated secret, a switched-off or deleted integration, an origin
   * taken off `allowedOrigins`). Default 30 s.
   */
  readonly heartbeatIntervalMs?: number
  /** Typing turns off by itself after this long. Default 30 s. */
  readonly typingTimeoutMs?: number
  /** Messages a connection may send per window. Default 20 per 10 s. */
  readonly rateLimit?: { readonly messages: number; readonly windowMs: number }
  /** A socket whose unsent data passes this is dropped. Default 1 MiB. */
  readonly maxBufferedBytes?: number
}

export interface WebchatServer {
  /** Registered on the switchboard under `webchat`. */
  readonly connector: WebchatConnector
  /** Visitor connections open in this process. */
  connectionCount(): number
  /** Refuses new connections, closes the open ones (1001, so widgets reconnect elsewhere). */
  close(): Promise<void>
}

const DEFAULT_PATH = '/api/webchat'
const CLOSE_GRACE_MS = 1000

/**
 * The webchat channel on an existing HTTP server: the handshake's refusals are
 * answered as plain HTTP before any upgrade, then each visitor's socket speaks the frame protocol.
 * Also creates the webchat connector and registers it on the switchboard. Throws a `ConfigError`
 * when switchboard, eventBus or server is missing.
 */
export function createWebchatServer(options: WebchatServerOptions): WebchatServer {
  checkWebchatOptions('createWebchatServer', options)
  const { switchboard, eventBus, server, logger } = options
  const prefix = (options.path ?? DEFAULT_PATH).replace(/\/+$/, '')
  const settings: ConnectionSettings = {
    typingTimeoutMs: options.typingTimeoutMs ?? 30_000,
    rateLimit: options.rateLimit ?? { messages: 20, windowMs: 10_000 },
    maxBufferedBytes: options.maxBufferedBytes ?? 1024 * 1024,
  }
  const connector = createWebchatConnector({
    switchboard,
    eventBus,
    ...(logger === undefined ? {} : { logger }),
  })
  switchboard.registerConnector(connector)
  // The default maxPayload is 100 MiB; a larger frame closes the connection with 1009.
  const sockets = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, clientTracking: false })
  // ws refuses a request that is no valid WebSocket handshake (no Sec-WebSocket-Key, a version it
  // does not speak) with a text body; with this listener it leaves the answer to us, in the
  // contract's error shape (CONTRACT §2).
  sockets.on('wsClientError', (error: Error, socket: Duplex) =>
    refuse(socket, 400, 'VALIDATION_ERROR', `not a valid WebSocket handshake: ${error.message}`),
  )
  const alive = new Map<WebSocket, boolean>()
  const connections = new Map<WebSocket, VisitorConnection>()
  let closing = false

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer): void => {
    // Node hands every request that asks to upgrade to this listener, whatever to. One asking for
    // anything but a WebSocket (h2c, which curl --http2 and Java's HttpClient ask for on http://)
    // is served as if it had not asked (RFC 9110 §7.8), unless another listener may want it.
    if (!asksForWebSocket(request) && server.listenerCount('upgrade') === 1) {
      serveAsPlainHttp(server, request, socket, head)
      return
    }
    // A request target that is no URL (`//[`) names no socket here; throwing would end the process.
    const target = request.url ?? '/'
    const url = URL.canParse(target, 'http://localhost') ? new URL(target, 'http://localhost') : null
    const match = url?.pathname.startsWith(`${prefix}/`) ? url.pathname.slice(prefix.length + 1) : null
    if (url === null || match === null) {
      // Another upgrade listener may serve this path; alone, say so rather than leave the client hanging.
      if (server.listenerCount('upgrade') === 1) refuse(socket, 404, 'NOT_FOUND', 'no WebSocket here')
      return
    }
    socket.on('error', () => undefined)
    if (closing) {
      refuse(socket, 503, 'INTERNAL_ERROR', 'the server is shutting down')
      return
    }
    const integrationId = match.replace(/\/$/, '')
    checkHandshake({
      storage: switchboard.storage,
      integrationId,
      origin: request.headers.origin,
      token: url.searchParams.get('token'),
    })
      .then((verdict) => {
        if (!verdict.ok) return refuse(socket, verdict.status, verdict.code, verdict.message)
        if (closing || socket.destroyed) return socket.destroy()
        sockets.handleUpgrade(request, socket, head, (webSocket) => {
          alive.set(webSocket, true)
          webSocket.on('pong', () => alive.set(webSocket, true))
          webSocket.on('close', () => {
            alive.delete(webSocket)
            connections.delete(webSocket)
          })
          const connection = serveVisitor({
            socket: webSocket,
            switchboard,
            eventBus,
            integration: verdict.integration,
            origin: request.headers.origin,
            visitorId: verdict.visitorId,
            visitorToken: verdict.visitorToken,
            settings,
            logger,
          })
          if (webSocket.readyState === webSocket.OPEN) connections.set(webSocket, connection)
        })
      })
      .catch((error: unknown) => {
        logger?.error({ integrationId, error: String(error) }, 'webchat: handshake failed')
        refuse(socket, 500, 'INTERNAL_ERROR', 'internal error')
      })
  }
  server.on('upgrade', onUpgrade)

  /**
   * A socket is admitted once, at its handshake; what revokes a visitor later must reach the
   * sockets already open too, or a leaked token stays good on its socket for as long as it is kept
   * alive. One read of the integrations of this process's sockets per beat.
   */
  let rechecking = false
  const recheck = async (): Promise<void> => {
    if (rechecking || connections.size === 0) return
    rechecking = true
    try {
      const open = [...connections.values()]
      const ids = [...new Set(open.map((connection) => connection.integrationId))]
      const found = new Map(
        (await switchboard.storage.integrations.getMany({ ids })).map((integration) => [
          integration.id,
          integration,
        ]),
      )
      if (closing) return
      for (const connection of open) connection.recheck(found.get(connection.integrationId) ?? null)
    } catch (error) {
      // Tried again at the next beat.
      logger?.warn({ error: String(error) }, 'webchat: could not check the open sockets')
    } finally {
      rechecking = false
    }
  }

  const heartbeat = setInterval(() => {
    for (const [webSocket, answered] of alive) {
      if (!answered) {
        webSocket.terminate()
        continue
      }
      alive.set(webSocket, false)
      webSocket.ping()
    }
    void recheck()
  }, options.heartbeatIntervalMs ?? 30_000)
  heartbeat.unref()

  return {
    connector,
    connectionCount: () => alive.size,
    async close() {
      if (closing) return
      closing = true
      server.off('upgrade', onUpgrade)
      clearInterval(heartbeat)
      connector.close()
      const open = [...alive.keys()]
      await Promise.all(
        open.map(
          (webSocket) =>
            new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                webSocket.terminate()
                resolve()
              }, CLOSE_GRACE_MS)
              webSocket.once('close', () => {
                clearTimeout(timer)
                resolve()
              })
              webSocket.close(1001, 'server shutting down')
            }),
        ),
      )
      await new Promise<void>((resolve) => sockets.close(() => resolve()))
    },
  }
}

function asksForWebSocket(request: IncomingMessage): boolean {
  const protocols = request.headers.upgrade ?? ''
  return protocols.split(',').some((protocol) => protocol.trim().toLowerCase() === 'websocket')
}

/** Headers that ask for the upgrade; a `Connection` header keeps its other options. */
const UPGRADE_HEADERS = new Set(['upgrade', 'http2-settings'])

/**
 * Gives the connection back to the HTTP server with the request as it came but for the headers
 * that asked for the upgrade: the server's parser reads it again, with its body (the bytes
 * already read, `head`, then the socket's), and any later request of the connection. Node left
 * the socket without a parser when it handed it over; a TLS socket is already decrypted, and is
 * handed back where the HTTPS server's parser attaches, after the handshake.
 */
function serveAsPlainHttp(
  server: HttpServer | HttpsServer,
  request: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): void {
  const lines = [`${request.method} ${request.url} HTTP/${request.httpVersion}`]
  const raw = request.rawHeaders
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index]!
    const value = raw[index + 1]!
    const lowerName = name.toLowerCase()
    if (UPGRADE_HEADERS.has(lowerName)) continue
    if (lowerName === 'connection') {
      const options = value
        .split(',')
        .map((option) => option.trim())
        .filter((option) => option !== '' && !UPGRADE_HEADERS.has(option.toLowerCase()))
      if (options.length > 0) lines.push(`${name}: ${options.join(', ')}`)
      continue
    }
    lines.push(`${name}: ${value}`)
  }
  const handBack = () => {
    // Header bytes as they arrived: Node's parser read them as Latin-1.
    socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]))
    server.emit(socket instanceof TLSSocket ? 'secureConnection' : 'connection', socket)
  }
  // A request pipelined behind one still being answered waits for that answer: the fresh parser
  // knows nothing of it, and would queue its own answer behind one it never sees finish. Node
  // keeps the answer under way on the socket as `_httpMessage`.
  const answering = (socket as { _httpMessage?: ServerResponse | null })._httpMessage
  if (answering == null) handBack()
  else answering.once('finish', () => setImmediate(handBack))
}

/** A plain HTTP answer in the contract's error shape, then the socket is done. */
function refuse(socket: Duplex, status: number, code: ErrorCode, message: string): void {
  if (socket.destroyed) return
  // Node's HTTP server drops its own error listener from a socket it hands to `upgrade`: a client
  // that resets the connection while this is written would otherwise end the process.
  socket.on('error', () => undefined)
  const body = JSON.stringify({ error: { code, message } })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      'Connection: close\r\n' +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n` +
      body,
  )
  socket.once('finish', () => socket.destroy())
}
