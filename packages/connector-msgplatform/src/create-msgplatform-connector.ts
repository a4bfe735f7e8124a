import {
  type Connector,
  type HumanTransferOutcome,
  type HumanTransferRequest,
  PAUSE_REASON_MAX,
  type SendOutcome,
  type StatusHooksOutcome,
  type StatusHooksRequest,
} from '@switchboard/core'
import {
  describeResult,
  describeResultPublicly,
  isSuccess,
  type PlatformClientOptions,
  postToPlatform,
} from './platform-client.js'
import { MSGPLATFORM_TYPE, readPlatformConfig } from './platform-config.js'

export interface MsgPlatformConnectorOptions {
  /** How long one call to the platform may take. Default 10 s. */
  readonly timeoutMs?: number
  /** Replaces the built-in `fetch`, e.g. to add a proxy or to observe calls. */
  readonly fetch?: typeof globalThis.fetch
}

/** The msgplatform connector: every optional ability of the Connector port is present. */
export type MsgPlatformConnector = Connector &
  Required<Pick<Connector, 'transferToHuman' | 'registerStatusHooks'>>

const DEFAULT_TIMEOUT_MS = 10_000

/**
 * The outbound side of the msgplatform channel: replies, transfer to a human operator and the
 * status-hooks registration, each a `POST` to the integration's `apiBaseUrl` with its token.
 */
export function createMsgPlatformConnector(options: MsgPlatformConnectorOptions = {}): MsgPlatformConnector {
  const client: PlatformClientOptions = {
    fetch: options.fetch ?? globalThis.fetch,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  }

  return {
    type: MSGPLATFORM_TYPE,

    async send({ integration, session, message }): Promise<SendOutcome> {
      const config = readPlatformConfig(integration)
      if (config === null) return { ok: false, retryable: false, error: missingConfig(integration.id) }
      const result = await postToPlatform(client, config, '/v1/messages', {
        client_id: session.customer.clientId,
        channel_id: session.customer.channelId,
        transport: session.customer.transport,
        text: message.text,
        type: 'to_client',
      })
      if (isSuccess(result)) return { ok: true }
      // CONTRACT §6: no answer, a timeout or a 5xx is retried; a 4xx is not, 408 and 429 included.
      const retryable = !result.answered || result.status >= 500
      return { ok: false, retryable, error: describeResult(result) }
    },

    async transferToHuman(request: HumanTransferRequest): Promise<HumanTransferOutcome> {
      const config = readPlatformConfig(request.integration)
      if (config === null) return { ok: false, error: missingConfig(request.integration.id) }
      const result = await postToPlatform(client, config, '/v1/dialogs/transfer', {
        client_id: request.session.customer.clientId,
        ...(request.operatorId === undefined ? {} : { operator_id: request.operatorId }),
        ...(request.groupId === undefined ? {} : { group_id: request.groupId }),
        system_message: request.systemMessage,
      })
      // The error becomes the paused session's reason, which the company's operators read: as much
      // of the platform's answer as that reason holds (core cuts the whole text to its bound).
      if (!isSuccess(result)) return { ok: false, error: describeResultPublicly(result, PAUSE_REASON_MAX) }
      const requestId = transferRequestId(result.text)
      return requestId === undefined ? { ok: true } : { ok: true, externalReference: requestId }
    },

    async registerStatusHooks(request: StatusHooksRequest): Promise<StatusHooksOutcome> {
      const config = readPlatformConfig(request.integration)
      if (config === null) return { ok: false, error: missingConfig(request.integration.id) }
      const result = await postToPlatform(client, config, '/v1/webhooks', {
        url: request.url,
        events: [...request.events],
      })
      // The error goes back to the API caller who asked for the registration.
      return isSuccess(result) ? { ok: true } : { ok: false, error: describeResultPublicly(result) }
    },
  }
}

function missingConfig(integrationId: string): string {
  return `integration ${integrationId} has no apiBaseUrl or apiToken in its config`
}

/** `data.request_id` of the transfer's answer, when the platform gave one. */
function transferRequestId(text: string): string | undefined {
  let answer: unknown
  try {
    answer = JSON.parse(text)
  } catch {
    // The transfer was accepted; a body we cannot read only means there is no reference to keep.
    return undefined
  }
  const data = isRecord(answer) ? answer.data : undefined
  const requestId = isRecord(data) ? data.request_id : undefined
  if (typeof requestId === 'string' && requestId !== '') return requestId
  if (typeof requestId === 'number' && Number.isFinite(requestId)) return String(requestId)
  return undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
