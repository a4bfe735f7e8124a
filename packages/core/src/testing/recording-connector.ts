import type { MessageRole } from '../domain/session.js'
import type {
  Connector,
  HumanTransferOutcome,
  HumanTransferRequest,
  SendOutcome,
  StatusHooksOutcome,
  StatusHooksRequest,
} from '../ports/connector.js'

export interface SentMessage {
  readonly sessionId: string
  readonly clientId: string
  readonly messageId: string
  readonly role: MessageRole
  readonly text: string
}

export interface RecordedTransfer {
  readonly sessionId: string
  readonly operatorId?: number
  readonly groupId?: number
  readonly systemMessage: boolean
  /** How many messages had been sent when the transfer was called. */
  readonly sentBefore: number
}

export interface RecordedStatusHooks {
  readonly integrationId: string
  readonly url: string
  readonly events: readonly string[]
}

export interface RecordingConnector extends Connector {
  readonly sent: readonly SentMessage[]
  readonly transfers: readonly RecordedTransfer[]
  /** Status-hook registrations asked for (`statusHooks: true` only), refused ones included. */
  readonly statusHooks: readonly RecordedStatusHooks[]
  /** The next status-hook registration is refused with this text. */
  failNextStatusHooks(error: string): void
  /** The next `count` sends fail (retryable unless said otherwise). */
  failNextSends(count: number, options?: { retryable?: boolean }): void
  /** The next transfer to a human fails with this text. */
  failNextTransfer(error: string): void
}

/**
 * A channel that keeps what it is asked to send. With `humanTransfer: true` it can also transfer
 * to a human, like the msgplatform connector; without, it cannot, like webchat. With
 * `statusHooks: true` it can register status hooks, like the msgplatform connector.
 */
export function createRecordingConnector(
  options: { type?: string; humanTransfer?: boolean; externalReference?: string; statusHooks?: boolean } = {},
): RecordingConnector {
  const sent: SentMessage[] = []
  const transfers: RecordedTransfer[] = []
  const statusHooks: RecordedStatusHooks[] = []
  let statusHooksFailure: string | null = null
  let failures = 0
  let failuresRetryable = true
  let transferFailure: string | null = null

  const connector: RecordingConnector = {
    type: options.type ?? 'recording',
    sent,
    transfers,
    statusHooks,
    failNextStatusHooks(error) {
      statusHooksFailure = error
    },
    failNextSends(count, failOptions = {}) {
      failures = count
      failuresRetryable = failOptions.retryable ?? true
    },
    failNextTransfer(error) {
      transferFailure = error
    },
    async send({ session, message }): Promise<SendOutcome> {
      if (failures > 0) {
        failures -= 1
        return { ok: false, retryable: failuresRetryable, error: 'recording connector: scripted failure' }
      }
      sent.push({
        sessionId: session.id,
        clientId: session.customer.clientId,
        messageId: message.id,
        role: message.role,
        text: message.text,
      })
      return { ok: true }
    },
  }
  if (options.statusHooks === true) {
    Object.assign(connector, {
      async registerStatusHooks(request: StatusHooksRequest): Promise<StatusHooksOutcome> {
        statusHooks.push({
          integrationId: request.integration.id,
          url: request.url,
          events: [...request.events],
        })
        if (statusHooksFailure === null) return { ok: true }
        const error = statusHooksFailure
        statusHooksFailure = null
        return { ok: false, error }
      },
    })
  }
  if (options.humanTransfer === true) {
    return Object.assign(connector, {
      async transferToHuman(request: HumanTransferRequest): Promise<HumanTransferOutcome> {
        transfers.push({
          sessionId: request.session.id,
          ...(request.operatorId === undefined ? {} : { operatorId: request.operatorId }),
          ...(request.groupId === undefined ? {} : { groupId: request.groupId }),
          systemMessage: request.systemMessage,
          sentBefore: sent.length,
        })
        if (transferFailure !== null) {
          const error = transferFailure
          transferFailure = null
          return { ok: false, error }
        }
        return options.externalReference === undefined
          ? { ok: true }
          : { ok: true, externalReference: options.externalReference }
      },
    })
  }
  return connector
}
