import type { MessageRole } from '../domain/session.js'
import type {
  Connector,
  HumanTransferOutcome,
  HumanTransferRequest,
  SendOutcome,
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

export interface RecordingConnector extends Connector {
  readonly sent: readonly SentMessage[]
  readonly transfers: readonly RecordedTransfer[]
  /** The next `count` sends fail (retryable unless said otherwise). */
  failNextSends(count: number, options?: { retryable?: boolean }): void
  /** The next transfer to a human fails with this text. */
  failNextTransfer(error: string): void
}

/**
 * A channel that keeps what it is asked to send. With `humanTransfer: true` it can also transfer
 * to a human, like the msgplatform connector; without, it cannot, like webchat.
 */
export function createRecordingConnector(
  options: { type?: string; humanTransfer?: boolean; externalReference?: string } = {},
): RecordingConnector {
  const sent: SentMessage[] = []
  const transfers: RecordedTransfer[] = []
  let failures = 0
  let failuresRetryable = true
  let transferFailure: string | null = null

  const connector: RecordingConnector = {
    type: options.type ?? 'recording',
    sent,
    transfers,
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
