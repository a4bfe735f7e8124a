import { switchboardError, type WebhookReceiver } from '@switchboard/core'
import { type RequestHandler, Router } from 'express'
import { handle, type RouteLogger } from '../handle.js'
import { rawBody } from '../middleware.js'
import { sendError } from '../send-error.js'

export interface WebhookRoutesOptions {
  /** Receivers by connector type, the `{connectorType}` of the path. */
  readonly receivers: Readonly<Record<string, WebhookReceiver>>
  /** Refuse webhooks that did not arrive over HTTPS (directly or per a trusted proxy). */
  readonly requireHttps: boolean
  readonly logger: RouteLogger
}

/** Webchat talks over its WebSocket; no webhook path of its exists, whatever follows it. */
export const WEBSOCKET_ONLY_TYPES: ReadonlySet<string> = new Set(['webchat'])

const noSuchWebhook = () => switchboardError('NOT_FOUND', 'no such webhook')

/**
 * `POST|GET /webhook/{connectorType}/{integrationId}` (CONTRACT §6). Mounted before the JSON
 * parser: the receiver verifies a signature over the bytes exactly as they arrived. This only
 * applies the transport rules, in the contract's order — HTTPS, then size (the raw parser's 413),
 * then the connector type — and hands the request to the type's receiver.
 */
export function webhookRoutes(options: WebhookRoutesOptions): Router {
  const router = Router()
  const { receivers, logger } = options

  const websocketOnly: RequestHandler = (request, response, next) => {
    if (WEBSOCKET_ONLY_TYPES.has(String(request.params.connectorType))) {
      return sendError(response, noSuchWebhook())
    }
    next()
  }
  router.use('/webhook/:connectorType', websocketOnly)

  const receiverOf = (connectorType: unknown): WebhookReceiver | undefined =>
    typeof connectorType === 'string' && Object.hasOwn(receivers, connectorType)
      ? receivers[connectorType]
      : undefined

  const httpsRequired = switchboardError('HTTPS_REQUIRED', 'webhooks must be sent over HTTPS')
  const httpsOnly: RequestHandler = (request, response, next) => {
    // `secure` honours Express's `trust proxy`: X-Forwarded-Proto counts only from a trusted proxy.
    if (!options.requireHttps || request.secure) return next()
    const receiver = receiverOf(request.params.connectorType)
    if (request.method !== 'POST' || receiver?.refused === undefined)
      return sendError(response, httpsRequired)
    // A refused delivery is still a delivery: its receiver may log it. The answer waits for that,
    // so whoever reads the log next sees it, and is the same whatever becomes of it.
    receiver
      .refused({ integrationId: String(request.params.integrationId), status: 403, reason: 'https required' })
      .catch((error: unknown) =>
        logger.error({ error: String(error) }, 'webhook receiver failed to note a refusal'),
      )
      .finally(() => sendError(response, httpsRequired))
  }

  router.post(
    '/webhook/:connectorType/:integrationId',
    httpsOnly,
    rawBody,
    handle(logger, async (request, response) => {
      const receiver = receiverOf(request.params.connectorType)
      if (receiver === undefined) return sendError(response, noSuchWebhook())
      // Without a body the raw parser leaves no Buffer; the receiver still gets bytes (none).
      const body: unknown = request.body
      const answer = await receiver.handle({
        integrationId: String(request.params.integrationId),
        rawBody: Buffer.isBuffer(body) ? body : new Uint8Array(0),
        headers: request.headers,
      })
      response.status(answer.status).json(answer.body)
    }),
  )

  router.get(
    '/webhook/:connectorType/:integrationId',
    httpsOnly,
    handle(logger, async (request, response) => {
      const receiver = receiverOf(request.params.connectorType)
      if (receiver === undefined) return sendError(response, noSuchWebhook())
      const answer = await receiver.handleVerification({
        integrationId: String(request.params.integrationId),
      })
      response.status(answer.status).json(answer.body)
    }),
  )

  // Any other method or shape under /webhook names no webhook; it must not reach the JSON parser,
  // whose 400 for a non-JSON body would hide the 404.
  router.use('/webhook', (_request, response) => sendError(response, noSuchWebhook()))
  return router
}
