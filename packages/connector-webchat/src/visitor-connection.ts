import { randomUUID } from 'node:crypto'
import type {
  EventBus,
  Integration,
  Message,
  RuntimeLogger,
  Session,
  SessionState,
  Switchboard,
} from '@switchboard/core'
import { type RawData, WebSocket } from 'ws'
import { type ClientFrame, messageFrame, parseClientFrame, type ServerFrame } from './frames.js'
import { judgeHandshake } from './handshake.js'
import { createRateLimiter } from './rate-limiter.js'
import { isSessionEvent, type SessionEvent, sessionTopic } from './session-events.js'

export interface ConnectionSettings {
  readonly typingTimeoutMs: number
  readonly rateLimit: { readonly messages: number; readonly windowMs: number }
  readonly maxBufferedBytes: number
}

export interface VisitorConnectionOptions {
  readonly socket: WebSocket
  readonly switchboard: Switchboard
  readonly eventBus: EventBus
  /** As the handshake read it. */
  readonly integration: Integration
  /** The handshake's `Origin` header, judged again with the token when the integration changes. */
  readonly origin: string | undefined
  readonly visitorId: string
  readonly visitorToken: string
  readonly settings: ConnectionSettings
  readonly logger?: RuntimeLogger | undefined
}

/** What the server holding the socket keeps of it. */
export interface VisitorConnection {
  readonly integrationId: string
  /**
   * Judges the socket again on the integration as read now (null: deleted), with the handshake's
   * origin and the visitor's token; one the integration no longer admits gets an error frame and
   * is closed with 1008.
   */
  recheck(integration: Integration | null): void
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const HISTORY_PAGE = 100
/**
 * Frames read but not handled yet. One past it is refused at once with `RATE_LIMITED` and not kept,
 * so a client that sends faster than storage answers costs memory for this many frames only, and
 * the error frames it does not read are bounded by the send buffer cap.
 */
const MAX_QUEUED_FRAMES = 64

/**
 * One visitor's socket: its session frame first, then the client's frames handled one at a time
 * in order (so acks come in the order the messages were sent), and the session's events from the
 * bus turned into frames.
 */
export function serveVisitor(options: VisitorConnectionOptions): VisitorConnection {
  const { socket, switchboard, eventBus, integration, visitorId, settings, logger } = options
  /** The integration as last read and judged: messages are stored against this copy. */
  let current = integration
  const connectionId = randomUUID()
  const messageLimiter = createRateLimiter({
    limit: settings.rateLimit.messages,
    windowMs: settings.rateLimit.windowMs,
  })
  const historyLimiter = createRateLimiter({
    limit: settings.rateLimit.messages,
    windowMs: settings.rateLimit.windowMs,
  })
  let session: { readonly id: string; state: SessionState } | null = null
  let unsubscribe: (() => Promise<void>) | null = null
  let typing = false
  let typingTimer: NodeJS.Timeout | undefined
  let closed = false
  let queued = 0
  let work: Promise<void> = Promise.resolve()
  /**
   * Frames refused for a full queue before the session frame went out: their errors follow it,
   * as the session frame comes first (CONTRACT §7). A count, so refusing keeps nothing of them.
   */
  let refusedBeforeSession: number | null = 0

  /**
   * Frames of the session that come before its `session` frame went out (from the bus, while the
   * connection reads the session): they follow it, as the session frame comes first (CONTRACT
   * §7). A widget shown a reply first would ask for history since that reply and skip the rest.
   */
  let held: ServerFrame[] | null = []
  /**
   * Messages this socket sent, or whose ack it sent: a catch-up after the bus lost events (`onMissed`)
   * sends only the others.
   */
  const transmitted = new Set<string>()

  const send = (frame: ServerFrame): void => {
    if (held !== null) {
      held.push(frame)
      return
    }
    transmit(frame)
  }

  /**
   * Frames of the session's events while a message of this socket waits for its ack: they follow
   * the ack (CONTRACT §7: typing "on after the ack"), as a new session's first turn may start,
   * and even end, before its message's store has answered.
   */
  let heldForAck: ServerFrame[] | null = null
  /** Messages whose turn ended while their ack was due: typing stays off for them after it. */
  const endedBeforeAck = new Set<string>()
  const sendFromSession = (frame: ServerFrame): void => {
    if (heldForAck !== null) heldForAck.push(frame)
    else send(frame)
  }

  const transmit = (frame: ServerFrame): void => {
    if (socket.readyState !== WebSocket.OPEN) return
    socket.send(JSON.stringify(frame))
    if (frame.type === 'message') transmitted.add(frame.messageId)
    if (socket.bufferedAmount > settings.maxBufferedBytes) {
      // A reader this slow would hold the process's memory hostage; the widget reconnects and
      // catches up with `history`.
      logger?.warn(
        { integrationId: integration.id, bufferedBytes: socket.bufferedAmount },
        'webchat: dropping a slow socket',
      )
      socket.terminate()
    }
  }

  /** Sends and resolves once the frame has left for the network, so a long history cannot pile up. */
  const sendFlushed = (frame: ServerFrame): Promise<void> =>
    new Promise((resolve) => {
      if (socket.readyState !== WebSocket.OPEN) return resolve()
      socket.send(JSON.stringify(frame), () => resolve())
    })

  const sendError = (code: 'VALIDATION_ERROR' | 'RATE_LIMITED' | 'INTERNAL_ERROR', message: string) =>
    send({ type: 'error', code, message })
  // CONTRACT §7: an error frame, and the connection stays open.
  const refuseFrame = () =>
    sendError('RATE_LIMITED', 'too many frames at once; wait for the answers to those sent')

  /**
   * The handshake's checks again, on `fresh` (the integration read now, null when deleted) with
   * this socket's origin and token: the copy to use from now on, or null when the visitor is no
   * longer admitted (a rotated secret, a switched-off or deleted integration, an origin taken off
   * `allowedOrigins`), and the socket is told why and closed.
   */
  const readmit = (fresh: Integration | null): Integration | null => {
    const verdict = judgeHandshake(fresh, options.origin, options.visitorToken)
    if (verdict.ok && verdict.visitorId === visitorId) {
      current = verdict.integration
      return current
    }
    if (!closed && socket.readyState === WebSocket.OPEN) {
      const { code, message } = verdict.ok
        ? { code: 'UNAUTHORIZED' as const, message: 'the visitor token is not valid here' }
        : verdict
      // Not held behind a session frame still to come: the socket closes now.
      transmit({ type: 'error', code, message })
      socket.close(1008, code)
    }
    closed = true
    return null
  }
  const readmitFresh = async (): Promise<Integration | null> =>
    readmit(await switchboard.integration(current.id))

  /**
   * What this socket heard of its session's turns: those started and not ended, by the message they
   * answer (a job tried again after a failure starts the same turn again, and only its last try
   * ends), and the replies of ended turns not shown yet, below zero while a reply overtook the end
   * of its turn. Typing stays on while a turn works or a reply is due, so the reply of one turn
   * does not hide the work of the next, which may have started before that reply got here.
   */
  const turnsWorking = new Set<string>()
  let repliesDue = 0
  /**
   * Replies that came when none was due and no turn was heard at work: of a turn whose start came
   * before this socket followed the session. Its end may still come; it then owes nothing.
   */
  let repliesUnclaimed = 0
  /**
   * The version of the followed session whose state this socket shows: processes hear each other's
   * changes in any order, and a change older than it is not shown over it. The versions of state
   * frames held behind the session frame, which says the state as read then.
   */
  let stateVersion = 0
  const stateFrameVersions = new WeakMap<ServerFrame, number>()

  const forgetTurns = (): void => {
    turnsWorking.clear()
    repliesDue = 0
    repliesUnclaimed = 0
  }

  const setTyping = (on: boolean): void => {
    clearTimeout(typingTimer)
    // An agent that never answers must not leave the visitor watching dots forever.
    if (on) typingTimer = setTimeout(stopTyping, settings.typingTimeoutMs)
    if (typing === on) return
    typing = on
    sendFromSession({ type: 'typing', on })
  }
  /** Off for good (a timeout, a pause): what was counted will not be heard of any more. */
  const stopTyping = (): void => {
    forgetTurns()
    setTyping(false)
  }
  const stopTypingIfIdle = (): void => {
    if (turnsWorking.size === 0 && repliesDue <= 0) setTyping(false)
  }

  const onSessionEvent = (sessionId: string, event: SessionEvent): void => {
    if (closed || session === null || session.id !== sessionId) return
    switch (event.kind) {
      case 'message':
        if (event.fromConnection === connectionId) return
        sendFromSession(event.frame)
        if (event.frame.role === 'agent') {
          // With no turn at work, no end can be on its way to settle a debt: a reply whose end
          // this socket never heard of (it connected in between, or a sweep sent it) owes nothing,
          // nor does that end if it comes after all.
          if (turnsWorking.size > 0 || repliesDue > 0) repliesDue -= 1
          else {
            repliesDue = 0
            repliesUnclaimed += 1
          }
          stopTypingIfIdle()
        }
        return
      case 'typing': {
        const turn = event.messageId ?? ''
        if (event.on) {
          if (session.state !== 'ongoing') return
          turnsWorking.add(turn)
          setTyping(true)
          return
        }
        const heardStart = turnsWorking.delete(turn)
        if (heldForAck !== null && event.messageId !== undefined) endedBeforeAck.add(event.messageId)
        // A pause or close blocked the replies that had not left: none is on its way. The end of a
        // turn whose start this socket missed may come after its reply did.
        if (event.replied === true && session.state === 'ongoing') {
          if (!heardStart && repliesUnclaimed > 0) repliesUnclaimed -= 1
          else repliesDue += 1
        }
        stopTypingIfIdle()
        return
      }
      case 'state': {
        if (event.version !== undefined) {
          // Another process's earlier change, carried late: this socket shows a later one already.
          if (event.version <= stateVersion) return
          stateVersion = event.version
        }
        session.state = event.state
        const frame: ServerFrame = { type: 'state', state: event.state }
        if (event.version !== undefined) stateFrameVersions.set(frame, event.version)
        sendFromSession(frame)
        if (event.state !== 'ongoing') stopTyping()
        return
      }
    }
  }

  /**
   * The session's messages after `afterSequence` as `history` shows them, read a page at a time:
   * all but blocked replies, which never reached the visitor and never will.
   */
  async function* visibleMessages(sessionId: string, afterSequence?: number): AsyncGenerator<Message> {
    let after = afterSequence
    for (;;) {
      const page = await switchboard.storage.messages.list({
        sessionId,
        ...(after === undefined ? {} : { afterSequence: after }),
        limit: HISTORY_PAGE,
      })
      for (const message of page) if (message.delivery !== 'blocked') yield message
      const last = page[page.length - 1]
      if (page.length < HISTORY_PAGE || last === undefined) return
      after = last.sequence
    }
  }

  /**
   * The bus lost events of the session (its connection broke and is back): the replies published
   * meanwhile would never reach this socket, and history asked for since a later reply would not
   * send them either. The session's messages this socket has not sent go now, as `history` sends
   * them; the state and typing follow what is stored.
   */
  const catchUp = async (): Promise<void> => {
    const followed = session
    if (closed || followed === null) return
    const stored = await switchboard.storage.sessions.get({ id: followed.id })
    for await (const message of visibleMessages(followed.id)) {
      if (closed || session !== followed || socket.readyState !== WebSocket.OPEN) return
      if (!transmitted.has(message.id)) sendFromSession(messageFrame(message))
    }
    if (stored !== null && session === followed && stored.version >= stateVersion) {
      stateVersion = stored.version
      if (stored.state !== followed.state) {
        followed.state = stored.state
        sendFromSession({ type: 'state', state: stored.state })
      }
    }
    // The end of a turn may be among the events lost: typing stays on only while one may work.
    if (
      followed.state !== 'ongoing' ||
      (await switchboard.storage.jobs.pending({ sessionId: followed.id })) === 0
    ) {
      if (session === followed) stopTyping()
    }
  }
  const catchUpLater = (): void => {
    work = work
      .then(catchUp)
      .catch((error: unknown) =>
        logger?.warn(
          { integrationId: integration.id, error: String(error) },
          'webchat: could not catch up with the events the bus lost',
        ),
      )
  }

  /**
   * Follows `next` on the bus, then tells the client about it. Failing half way, the connection
   * no longer knows what it follows: it says so and closes, and the widget reconnects with its
   * token (what it sent and had no ack for goes again, and is stored once).
   */
  const useSession = async (next: Session): Promise<void> => {
    try {
      await followSession(next)
    } catch (error) {
      held = null
      logger?.error(
        { integrationId: integration.id, sessionId: next.id, error: String(error) },
        'webchat: could not follow the session',
      )
      transmit({ type: 'error', code: 'INTERNAL_ERROR', message: 'something went wrong; reconnecting' })
      socket.close(1011, 'INTERNAL_ERROR')
    }
  }

  const followSession = async (next: Session): Promise<void> => {
    const previous = unsubscribe
    session = { id: next.id, state: next.state }
    stateVersion = next.version
    held ??= []
    // What was counted belongs to the session left behind.
    forgetTurns()
    unsubscribe = await eventBus.subscribe(
      sessionTopic(next.id),
      (payload) => {
        if (isSessionEvent(payload)) onSessionEvent(next.id, payload)
      },
      { onMissed: catchUpLater },
    )
    await previous?.()
    if (closed) return
    // Read again now that the subscription is live: a pause or close in between is not missed.
    const current = await switchboard.storage.sessions.get({ id: next.id })
    if (current !== null && current.version >= stateVersion) {
      session.state = current.state
      stateVersion = current.version
    }
    transmit({
      type: 'session',
      sessionId: next.id,
      visitorToken: options.visitorToken,
      state: session.state,
    })
    const heard = held ?? []
    held = null
    for (const frame of heard) {
      const version = stateFrameVersions.get(frame)
      // A change the session frame shows already.
      if (version === undefined || version > stateVersion) transmit(frame)
    }
    const refused = refusedBeforeSession ?? 0
    refusedBeforeSession = null
    for (let index = 0; index < refused; index += 1) refuseFrame()
  }

  const start = async (): Promise<void> => {
    const opened = await switchboard.openSession({ integrationId: integration.id, clientId: visitorId })
    if (opened.isErr()) {
      transmit({ type: 'error', code: opened.error.code, message: opened.error.message })
      socket.close(opened.error.code === 'VALIDATION_ERROR' ? 1011 : 1008, opened.error.code)
      return
    }
    await useSession(opened.value)
  }

  const receiveMessage = async (frame: Extract<ClientFrame, { type: 'message' }>): Promise<void> => {
    if (!messageLimiter.take(Date.now())) {
      const seconds = Math.ceil(settings.rateLimit.windowMs / 1000)
      return sendError(
        'RATE_LIMITED',
        `more than ${settings.rateLimit.messages} messages in ${seconds} s; wait a moment`,
      )
    }
    heldForAck = []
    try {
      await storeAndAck(frame)
    } finally {
      const heard = heldForAck
      heldForAck = null
      endedBeforeAck.clear()
      for (const held of heard) send(held)
    }
  }

  const storeAndAck = async (frame: Extract<ClientFrame, { type: 'message' }>): Promise<void> => {
    const inbound = {
      integrationId: integration.id,
      clientId: visitorId,
      text: frame.text,
      // Scoped to the visitor: two visitors' widgets may well pick the same ids.
      ...(frame.clientMessageId === undefined
        ? {}
        : { externalId: `webchat:${visitorId}:${frame.clientMessageId}` }),
    }
    // The integration as last read saves reading it for every message; the store checks it is
    // still current. When it changed since (CONFLICT), it is read afresh and the socket judged
    // again on it: the change may have revoked the visitor, whose message is then not stored.
    let result = await switchboard.ingest(inbound, { integration: current })
    if (result.isErr() && result.error.code === 'CONFLICT') {
      const fresh = await readmitFresh()
      if (fresh === null) return
      result = await switchboard.ingest(inbound, { integration: fresh })
      if (result.isErr() && result.error.code === 'CONFLICT') result = await switchboard.ingest(inbound)
    }
    if (result.isErr()) {
      send({ type: 'error', code: result.error.code, message: result.error.message })
      if (result.error.code === 'INTEGRATION_INACTIVE' || result.error.code === 'NOT_FOUND') {
        socket.close(1008, result.error.code)
      }
      return
    }
    const { session: stored, message, duplicate } = result.value
    const opened = !duplicate && stored.id !== session?.id
    // The visitor's session was closed: the message opened a new one, announced before its ack.
    if (opened) {
      // What the session left behind said while the message was stored (its close, say) is of
      // that session: it goes before the new one's frame, as the widget takes it for the one shown.
      const left = heldForAck ?? []
      heldForAck = []
      for (const frame of left) send(frame)
      await useSession(stored)
    }
    send({
      type: 'ack',
      ...(frame.clientMessageId === undefined ? {} : { clientMessageId: frame.clientMessageId }),
      messageId: message.id,
    })
    transmitted.add(message.id)
    if (duplicate) return
    // The visitor's other tabs show the message too.
    const copy: SessionEvent = { kind: 'message', frame: messageFrame(message), fromConnection: connectionId }
    eventBus.publish(sessionTopic(stored.id), copy).catch(() => undefined)
    // A new session's first turn starts as its message is stored, before this socket followed
    // the session: if its job is done already, its end went unheard and typing would stay on.
    if (opened && (await switchboard.storage.jobs.pending({ sessionId: stored.id })) === 0) return
    // Checked after that read, which a turn's end or a pause may have come during. As on the bus,
    // no agent works on a session that is not ongoing.
    if (!result.value.queued || endedBeforeAck.has(message.id) || session?.state !== 'ongoing') return
    setTyping(true)
  }

  const sendHistory = async (frame: Extract<ClientFrame, { type: 'history' }>): Promise<void> => {
    if (session === null) return
    if (!historyLimiter.take(Date.now()))
      return sendError('RATE_LIMITED', 'too many history requests; wait a moment')
    // Only to a visitor the integration still admits: history is the conversation in full.
    if ((await readmitFresh()) === null) return
    let afterSequence: number | undefined
    if (frame.since !== undefined) {
      // Ids are stored lower-case; one in capitals names the same message, as PostgreSQL reads it.
      const since = UUID.test(frame.since)
        ? await switchboard.storage.messages.get({ id: frame.since.toLowerCase() })
        : null
      if (since === null || since.sessionId !== session.id) {
        return sendError('VALIDATION_ERROR', 'since names no message of this conversation')
      }
      afterSequence = since.sequence
    }
    for await (const message of visibleMessages(session.id, afterSequence)) {
      if (socket.readyState !== WebSocket.OPEN) return
      if (socket.bufferedAmount > settings.maxBufferedBytes / 4) await sendFlushed(messageFrame(message))
      else send(messageFrame(message))
    }
  }

  const handle = async (data: RawData, isBinary: boolean): Promise<void> => {
    if (closed) return
    if (isBinary) return sendError('VALIDATION_ERROR', 'frames are JSON text')
    const parsed = parseClientFrame(data.toString())
    if (!parsed.ok) return sendError('VALIDATION_ERROR', parsed.message)
    if (parsed.frame.type === 'message') return receiveMessage(parsed.frame)
    return sendHistory(parsed.frame)
  }

  const enqueue = (task: () => Promise<void>): void => {
    queued += 1
    work = work
      .then(task)
      .catch((error: unknown) => {
        logger?.error({ integrationId: integration.id, error: String(error) }, 'webchat: a frame failed')
        sendError('INTERNAL_ERROR', 'something went wrong; try again')
      })
      .finally(() => {
        queued -= 1
      })
  }

  socket.on('message', (data, isBinary) => {
    if (queued >= MAX_QUEUED_FRAMES) {
      if (refusedBeforeSession === null) refuseFrame()
      else refusedBeforeSession += 1
      return
    }
    enqueue(() => handle(data, isBinary))
  })
  socket.on('error', (error) => {
    // ws reports what ends the connection (an oversized frame closes it with 1009) and then closes.
    logger?.warn({ integrationId: integration.id, error: error.message }, 'webchat: socket error')
  })
  socket.on('close', () => {
    closed = true
    clearTimeout(typingTimer)
    // The chain runs a subscription that arrives after the close, and drops it too.
    enqueue(async () => {
      await unsubscribe?.()
      unsubscribe = null
    })
  })
  enqueue(() =>
    start().catch((error: unknown) => {
      // Without a session the connection is of no use; the widget reconnects.
      logger?.error(
        { integrationId: integration.id, error: String(error) },
        'webchat: could not start a session',
      )
      socket.close(1011, 'INTERNAL_ERROR')
    }),
  )
  return {
    integrationId: integration.id,
    recheck(fresh) {
      if (!closed) readmit(fresh)
    },
  }
}
