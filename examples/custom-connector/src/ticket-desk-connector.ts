import type { Connector, Integration } from '@switchboard/core'

/** The integration `type` of this channel. */
export const TICKET_DESK_TYPE = 'ticket-desk'

export interface TicketDeskConnectorOptions {
  /** How long the desk may take to accept a reply. Default 10 s. */
  readonly timeoutMs?: number
}

/**
 * The outbound half: Switchboard's outbox calls `send` once per reply (and again, on its retry
 * schedule, after a retryable failure). Read the integration's config, call the channel, and say
 * whether a failure is worth retrying. Never throw for an answer you understand.
 */
export function createTicketDeskConnector(options: TicketDeskConnectorOptions = {}): Connector {
  const timeoutMs = options.timeoutMs ?? 10_000
  return {
    type: TICKET_DESK_TYPE,
    async send({ integration, session, message }) {
      const config = deskConfig(integration)
      if (config === null) return { ok: false, retryable: false, error: 'config needs baseUrl and apiToken' }
      try {
        const response = await fetch(`${config.baseUrl}/api/replies`, {
          method: 'POST',
          headers: { authorization: `Bearer ${config.apiToken}`, 'content-type': 'application/json' },
          // The session remembers who wrote: `clientId` is what the receiver passed to ingest.
          body: JSON.stringify({ to: session.customer.clientId, body: message.text }),
          signal: AbortSignal.timeout(timeoutMs),
        })
        const text = await response.text()
        if (response.ok) return { ok: true }
        // 5xx may pass; 4xx will not, so it fails at once instead of being retried.
        return {
          ok: false,
          retryable: response.status >= 500,
          error: `desk answered ${response.status}: ${text}`,
        }
      } catch (error) {
        // No answer (timeout, connection refused): the desk may be back in a moment.
        return { ok: false, retryable: true, error: String(error) }
      }
    },
  }
}

/**
 * The desk's API key is kept as `apiToken`: the one config field the integrations API never shows
 * (`GET /api/integrations/{id}` answers the rest of `config` to anyone of the company). Under any
 * other name, a credential would be handed out with the integration.
 */
function deskConfig(integration: Integration): { baseUrl: string; apiToken: string } | null {
  const { baseUrl, apiToken } = integration.config
  if (typeof baseUrl !== 'string' || typeof apiToken !== 'string') return null
  return { baseUrl: baseUrl.replace(/\/+$/, ''), apiToken }
}
