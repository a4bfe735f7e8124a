import type { IncomingMessage, ServerResponse } from 'node:http'
import type { TLSSocket } from 'node:tls'
import { ConfigError, type WebhookReceiver } from '@switchboard/core'
import type { RouteLogger } from './handle.js'
import { BODY_LIMIT_BYTES, requestIdFor } from './middleware.js'
import { WEBSOCKET_ONLY_TYPES } from './routes/webhook-routes.js'

/** Express's compiled `trust proxy` setting: whether the `hop`-th address back is a trusted proxy. */
export type TrustProxy = (address: string | undefined, hop: number) => boolean

export interface WebhookLaneOptions {
  /** Receivers by connector type, as given to `createRouter({ webhooks })`. */
  readonly receivers: Readonly<Record<string, WebhookReceiver>>
  /** Where the router is mounted (`'/api'`): the lane takes `POST {mountPath}/webhook/{type}/{id}`. */
  readonly mountPath: string
  /** As `createRouter`'s `requireHttps`. */
  readonly requireHttps?: boolean
  /**
   * The app's `app.get('trust proxy fn')`, so the lane reads `X-Forwarded-Proto` from exactly the
   * proxies the router trusts. Without it no proxy is trusted.
   */
  readonly trustProxy?: TrustProxy
  /** Hears a receiver that threw (answered 500), as `createRouter`'s `logger`. */
  readonly logger?: RouteLogger
}

/**
 * Answers the request and returns true, or returns false having touched nothing, for the app to
 * answer as it would have without the lane.
 */
export type WebhookLane = (request: IncomingMessage, response: ServerResponse) => boolean

const SEGMENT = '([A-Za-z0-9_-]{1,100})'
const MOUNT_PATH = /^(\/[A-Za-z0-9._~-]+)*$/
const noTrust: TrustProxy = () => false
const quietLogger: RouteLogger = { error: () => undefined }
const INTERNAL_ERROR = { error: { code: 'INTERNAL_ERROR', message: 'internal server error' } }

/**
 * Signed webhooks served by `node:http` ahead of Express: a platform's deliveries are the
 * service's busiest requests, and Express's request and response layers cost as much CPU as the
 * signature check, storing and logging together (see bench/README, `bench:webhook`). The lane
 * takes only the plain case — `POST` to the exact path, a known connector type, a `Host`, a
 * `Content-Length` within 1 MiB, no `Content-Encoding`, and HTTPS where it is required — and
 * answers it exactly as the router's webhook route does, with the same receivers. Anything else
 * (a 413, a refusal over plain HTTP, a path in other case, a chunked body) goes to the router,
 * whose rules stay the only ones written out in full.
 *
 *   const lane = createWebhookLane({ receivers, mountPath: '/api', trustProxy: app.get('trust proxy fn') })
 *   createServer((request, response) => lane(request, response) || app(request, response))
 */
export function createWebhookLane(options: WebhookLaneOptions): WebhookLane {
  const { receivers, mountPath } = options ?? {}
  // Checked now: from plain JavaScript, a missing map failed only at the first webhook, as an
  // exception thrown out of the server's request listener.
  if (typeof receivers !== 'object' || receivers === null) {
    throw new ConfigError(
      `createWebhookLane: receivers must be an object of WebhookReceivers by connector type, as createRouter's webhooks, got ${receivers === null ? 'null' : typeof receivers}`,
    )
  }
  if (typeof mountPath !== 'string' || !MOUNT_PATH.test(mountPath)) {
    throw new ConfigError(
      `createWebhookLane: mountPath must be where the router is mounted, such as "/api" (or "" for the root), got ${JSON.stringify(mountPath)}`,
    )
  }
  const path = new RegExp(`^${mountPath.replaceAll('.', '\\.')}/webhook/${SEGMENT}/${SEGMENT}$`)
  const requireHttps = options.requireHttps ?? false
  const trust = options.trustProxy ?? noTrust
  const logger = options.logger ?? quietLogger

  const receiverOf = (type: string): WebhookReceiver | undefined =>
    Object.hasOwn(receivers, type) && !WEBSOCKET_ONLY_TYPES.has(type) ? receivers[type] : undefined

  return (request, response) => {
    if (request.method !== 'POST') return false
    const match = path.exec(request.url ?? '')
    if (match === null) return false
    const receiver = receiverOf(match[1]!)
    const { headers } = request
    if (
      receiver === undefined ||
      headers.host === undefined ||
      headers['content-encoding'] !== undefined ||
      headers['transfer-encoding'] !== undefined ||
      !withinLimit(headers['content-length']) ||
      (requireHttps && !arrivedOverHttps(request, trust))
    ) {
      return false
    }
    const integrationId = match[2]!
    const given = headers['x-request-id']
    const requestId = requestIdFor(typeof given === 'string' ? given : undefined)
    response.setHeader('X-Request-Id', requestId)
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    // A client gone before its body ended has nobody to answer; the error must not go unheard.
    request.on('error', () => undefined)
    request.on('end', () => {
      const rawBody = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      receiver
        .handle({ integrationId, rawBody, headers })
        .then((answer) => writeJson(response, answer.status, answer.body))
        .catch((error: unknown) => {
          logger.error({ err: error, method: request.method, path: request.url, requestId }, 'request failed')
          if (!response.headersSent) writeJson(response, 500, INTERNAL_ERROR)
        })
    })
    return true
  }
}

function withinLimit(contentLength: string | undefined): boolean {
  // Node's parser has refused a malformed Content-Length before any listener runs.
  return contentLength !== undefined && Number(contentLength) <= BODY_LIMIT_BYTES
}

/** Express's `request.secure`: the socket's TLS, or the first `X-Forwarded-Proto` of a trusted proxy. */
function arrivedOverHttps(request: IncomingMessage, trust: TrustProxy): boolean {
  const socket = request.socket as TLSSocket
  const direct = socket.encrypted === true ? 'https' : 'http'
  if (!trust(socket.remoteAddress, 0)) return direct === 'https'
  const header = request.headers['x-forwarded-proto']
  const forwarded = typeof header === 'string' && header !== '' ? header : direct
  const comma = forwarded.indexOf(',')
  return (comma === -1 ? forwarded : forwarded.slice(0, comma)).trim() === 'https'
}

/** As Express's `response.status(status).json(body)`, less the ETag a POST's answer has no use for. */
function writeJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  response.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  })
  response.end(text)
}
