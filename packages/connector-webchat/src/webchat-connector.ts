import type {
  Connector,
  EventBus,
  RuntimeLogger,
  SendOutcome,
  Switchboard,
  SwitchboardEvents,
} from '@switchboard/core'
import { messageFrame } from './frames.js'
import { type SessionEvent, sessionTopic } from './session-events.js'
import { checkWebchatOptions } from './webchat-options.js'

export const WEBCHAT_TYPE = 'webchat'

export interface WebchatConnectorOptions {
  readonly switchboard: Switchboard
  /** Shared by every process of the deployment, so any of them reaches the visitor's socket. */
  readonly eventBus: EventBus
  readonly logger?: RuntimeLogger
}

/**
 * The webchat channel as the runtime sees it. It has no `transferToHuman` (a handoff to a human
 * agent records HUMAN_TRANSFER_UNSUPPORTED).
 */
export interface WebchatConnector extends Connector {
  readonly type: typeof WEBCHAT_TYPE
  /** Stops relaying this process's runtime events to the visitors. */
  close(): void
}

/** Sessions whose type was looked up; a session never changes integration, nor an integration type. */
const KNOWN_SESSIONS_MAX = 10_000

/**
 * `send` publishes an outgoing message on the session's EventBus topic, so the process holding
 * the visitor's socket delivers it, whichever process ran the turn. It also relays the runtime
 * events the widget shows (an agent is typing or will not answer, the session was paused, resumed
 * or closed) from this process to the bus. Every process that runs turns or serves the sessions
 * API needs one.
 */
export function createWebchatConnector(options: WebchatConnectorOptions): WebchatConnector {
  checkWebchatOptions('createWebchatConnector', options)
  const { switchboard, eventBus } = options
  const knownSessions = new Map<string, boolean>()
  const remember = (sessionId: string, webchat: boolean) => {
    if (knownSessions.size >= KNOWN_SESSIONS_MAX && !knownSessions.has(sessionId)) knownSessions.clear()
    knownSessions.set(sessionId, webchat)
  }

  const isWebchatSession = async (sessionId: string): Promise<boolean> => {
    const known = knownSessions.get(sessionId)
    if (known !== undefined) return known
    const session = await switchboard.storage.sessions.get({ id: sessionId })
    if (session === null) return false
    const integration = await switchboard.storage.integrations.get({ id: session.integrationId })
    if (integration === null) return false
    const webchat = integration.type === WEBCHAT_TYPE
    remember(sessionId, webchat)
    return webchat
  }

  /**
   * What this process tells a session, one after the other in the order it happens: the socket
   * reads a turn's start, its reply and its end in that order only if they reach the bus so. A
   * bus may carry publishes made at once in any order (PostgreSQL's sends each on a pooled
   * connection of its own), and a relay looks the session up first.
   */
  const queues = new Map<string, Promise<unknown>>()
  const inOrder = <T>(sessionId: string, task: () => Promise<T>): Promise<T> => {
    const result = (queues.get(sessionId) ?? Promise.resolve()).then(task)
    const settled = result.catch(() => undefined)
    queues.set(sessionId, settled)
    void settled.then(() => {
      if (queues.get(sessionId) === settled) queues.delete(sessionId)
    })
    return result
  }

  const relay = (sessionId: string, event: SessionEvent) => {
    inOrder(sessionId, async () => {
      if (await isWebchatSession(sessionId)) await eventBus.publish(sessionTopic(sessionId), event)
    }).catch((error: unknown) =>
      // A lost typing or state notice is cosmetic: the next frame or a `history` catches up.
      options.logger?.warn({ sessionId, error: String(error) }, 'webchat: could not relay a session event'),
    )
  }

  const onTurnStarted = (event: SwitchboardEvents['turn-started'][0]) =>
    relay(event.sessionId, { kind: 'typing', on: true, messageId: event.messageId })
  // Every end is told, with whether a reply follows: the socket then knows which turns still work.
  const onTurnCompleted = (event: SwitchboardEvents['turn-completed'][0]) =>
    relay(event.sessionId, { kind: 'typing', on: false, messageId: event.messageId, replied: event.replied })
  const onStateChanged = (event: SwitchboardEvents['session-state-changed'][0]) =>
    relay(event.sessionId, { kind: 'state', state: event.to, version: event.version })
  // Without credits the job runs no turn, so no turn's end turns off the typing its ack turned on.
  const onErrorRecorded = (event: SwitchboardEvents['session-error-recorded'][0]) => {
    if (event.error.code === 'CREDITS_EXHAUSTED') relay(event.sessionId, { kind: 'typing', on: false })
  }

  switchboard.events.on('turn-started', onTurnStarted)
  switchboard.events.on('turn-completed', onTurnCompleted)
  switchboard.events.on('session-state-changed', onStateChanged)
  switchboard.events.on('session-error-recorded', onErrorRecorded)

  return {
    type: WEBCHAT_TYPE,
    async send({ session, message }): Promise<SendOutcome> {
      remember(session.id, true)
      try {
        const event: SessionEvent = { kind: 'message', frame: messageFrame(message) }
        await inOrder(session.id, () => eventBus.publish(sessionTopic(session.id), event))
        // Published is delivered as far as the outbox goes: a visitor who is not connected gets
        // the message from `history` when the widget comes back.
        return { ok: true }
      } catch (error) {
        return { ok: false, retryable: true, error: error instanceof Error ? error.message : String(error) }
      }
    },
    close() {
      switchboard.events.off('turn-started', onTurnStarted)
      switchboard.events.off('turn-completed', onTurnCompleted)
      switchboard.events.off('session-state-changed', onStateChanged)
      switchboard.events.off('session-error-recorded', onErrorRecorded)
    },
  }
}
