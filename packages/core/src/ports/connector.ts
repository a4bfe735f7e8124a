import type { Message, Session } from '../domain/session.js'
import type { Integration } from './storage.js'

/** How a send ended. A retryable failure is tried again on the outbox schedule. */
export type SendOutcome =
  | { readonly ok: true }
  | { readonly ok: false; readonly retryable: boolean; readonly error: string }

export interface HumanTransferRequest {
  readonly integration: Integration
  readonly session: Session
  readonly operatorId?: number
  readonly groupId?: number
  readonly systemMessage: boolean
}

export type HumanTransferOutcome =
  | { readonly ok: true; readonly externalReference?: string }
  | { readonly ok: false; readonly error: string }

export interface StatusHooksRequest {
  readonly integration: Integration
  readonly url: string
  readonly events: readonly string[]
}

/** `error` is shown to the API caller who asked for the registration: no internals of this server. */
export type StatusHooksOutcome = { readonly ok: true } | { readonly ok: false; readonly error: string }

/**
 * A messaging channel. `send` delivers one outgoing message of a session; the channel's optional
 * abilities are optional methods, checked with the `supports…` guards.
 */
export interface Connector {
  /** The integration `type` this connector serves, e.g. `msgplatform`. */
  readonly type: string
  /**
   * `session.customer` is addressed to the channel of the message being answered,
   * which may not be the one the customer wrote from last.
   */
  send(options: { integration: Integration; session: Session; message: Message }): Promise<SendOutcome>
  transferToHuman?(request: HumanTransferRequest): Promise<HumanTransferOutcome>
  /** Asks the platform to send the named status events of the integration's dialogs to `url`. */
  registerStatusHooks?(options: StatusHooksRequest): Promise<StatusHooksOutcome>
}

export function supportsHumanTransfer(
  connector: Connector,
): connector is Connector & Required<Pick<Connector, 'transferToHuman'>> {
  return typeof connector.transferToHuman === 'function'
}

export function supportsStatusHooks(
  connector: Connector,
): connector is Connector & Required<Pick<Connector, 'registerStatusHooks'>> {
  return typeof connector.registerStatusHooks === 'function'
}
