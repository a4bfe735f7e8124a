import {
  type Switchboard,
  verifyWebhookSignature,
  type WebhookAnswer,
  type WebhookReceiver,
} from '@switchboard/core'
import { TICKET_DESK_TYPE } from './ticket-desk-connector.js'

/** The desk signs each delivery as `sha256=<hex>` of HMAC-SHA256 over the body, in this header. */
export const TICKET_DESK_SIGNATURE_HEADER = 'x-ticket-desk-signature'

/**
 * The inbound half, framework-free: the HTTP edge (e.g. `createRouter({ webhooks })` of
 * `@switchboard/adapter-express`) hands over the raw bytes, this verifies, normalises and ingests.
 * Answer 200 only once `ingest` resolved: then the message is stored and its turn queued.
 */
export function createTicketDeskReceiver(options: { switchboard: Switchboard }): WebhookReceiver {
  const { switchboard } = options

  const findIntegration = async (integrationId: string) => {
    if (!/^\d{1,18}$/.test(integrationId)) return null
    const integration = await switchboard.storage.integrations.get({ id: integrationId })
    return integration?.type === TICKET_DESK_TYPE ? integration : null
  }

  return {
    async handle({ integrationId, rawBody, headers }) {
      const integration = await findIntegration(integrationId)
      if (integration === null) return failure(404, 'NOT_FOUND', 'integration not found')
      // Core's check reads `x-webhook-signature`; hand it the desk's own header under that name.
      const signature = headers[TICKET_DESK_SIGNATURE_HEADER]
      const signed = verifyWebhookSignature({
        rawBody,
        secret: integration.webhookSecret ?? '',
        headers: { 'x-webhook-signature': signature },
      })
      if (!signed) return failure(401, 'INVALID_SIGNATURE', 'bad or missing signature')
      if (!integration.active) return failure(403, 'INTEGRATION_INACTIVE', 'the integration is not active')

      const ticket = readTicket(rawBody)
      // Signed but unusable: answering 200 stops the desk from resending what can never work.
      if (ticket === null) return { status: 200, body: { ok: true, ignored: 'not a ticket message' } }

      // Throws if storage is down: the edge answers 500 and the desk retries later.
      const ingested = await switchboard.ingest({
        integrationId: integration.id,
        clientId: ticket.from,
        text: ticket.body,
        // The desk's message id makes a redelivery a no-op.
        externalId: ticket.id,
      })
      if (ingested.isErr()) throw new Error(`${ingested.error.code}: ${ingested.error.message}`)
      return { status: 200, body: ingested.value.duplicate ? { ok: true, duplicate: true } : { ok: true } }
    },

    async handleVerification({ integrationId }) {
      const integration = await findIntegration(integrationId)
      if (integration === null) return failure(404, 'NOT_FOUND', 'integration not found')
      return { status: 200, body: { ok: true, verified: true } }
    },
  }
}

interface Ticket {
  readonly from: string
  readonly body: string
  readonly id: string
}

function readTicket(rawBody: Uint8Array): Ticket | null {
  let value: unknown
  try {
    value = JSON.parse(new TextDecoder().decode(rawBody))
  } catch {
    return null
  }
  if (typeof value !== 'object' || value === null) return null
  const { from, body, id } = value as Record<string, unknown>
  if (typeof from !== 'string' || from === '' || typeof body !== 'string' || body.trim() === '') return null
  if (typeof id !== 'string' || id === '') return null
  return { from, body, id }
}

function failure(status: number, code: string, message: string): WebhookAnswer {
  return { status, body: { error: { code, message } } }
}
