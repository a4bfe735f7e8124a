import { addressedFor, type Message, type Session } from '../domain/session.js'
import type { Integration, OutboxItem } from '../ports/storage.js'
import { recordOutcome } from './record-outcome.js'
import { emitSafely, type RuntimeContext } from './runtime-context.js'
import { setTimerUntil } from './timer-until.js'

/** Tries per outgoing message: the first, then after 1, 2, 4 and 8 seconds (CONTRACT §6). */
const MAX_DELIVERY_ATTEMPTS = 5
const CLAIM_LEASE_MS = 30_000
const SWEEP_BATCH = 50

function retryDelayMs(failedAttempts: number): number {
  return 1000 * 2 ** (failedAttempts - 1)
}

/**
 * How long `deliverNow` waits at most for a message waiting for its retry: the retry schedule,
 * and a send's time on top.
 */
const LEAVE_WAIT_MS =
  Array.from({ length: MAX_DELIVERY_ATTEMPTS - 1 }, (_, index) => retryDelayMs(index + 1)).reduce(
    (sum, delay) => sum + delay,
    0,
  ) + 10_000
/**
 * How often `deliverNow` looks again at a message it waits for: another process may be the one
 * sending it (behind an earlier message of the session that process sends), and its send is not
 * heard of here.
 */
const LEAVE_POLL_MS = 250

/**
 * What a caller that just committed the messages to deliver (a turn) knows of them: the messages
 * as stored, their session and integration, so the first try reads none of them again. A pause
 * since the commit still blocks them: it takes every message nobody has claimed out of the outbox,
 * so the claim fails, and one claimed already is being sent, which a pause lets finish.
 */
export interface DeliveryContext {
  readonly session: Session
  readonly integration: Integration
  readonly messages: readonly Message[]
}

export interface DeliveryService {
  /** Start delivering these messages without waiting. */
  deliverSoon(messageIds: readonly string[], known?: DeliveryContext): void
  /**
   * Deliver these messages now, and resolve once each left the outbox (sent, failed for good or
   * blocked): a try that fails retryably is tried again on the retry schedule first, as a turn's
   * announcement must reach the customer before the transfer to a human that follows it. One held
   * back behind an earlier message of its session follows that one. The wait ends at `stop`, and
   * after the retry schedule for a message whose retry another process took.
   */
  deliverNow(messageIds: readonly string[]): Promise<void>
  /** Deliver whatever is due, e.g. left behind by a process that died. */
  sweep(): Promise<void>
  /** Resolves when no delivery is in flight. */
  settled(): Promise<void>
  /**
   * Cancels retry timers and starts no new delivery but those `deliverNow` is asked for (a turn
   * still finishing); deliveries in flight still finish.
   */
  stop(): void
}

/**
 * The outbox: an outgoing message is stored with its turn, then sent after the commit. A
 * retryable failure is tried again later; the message is `sent`, `failed` or `blocked` in the end.
 * A session's messages leave in order: storage lets only a session's earliest waiting message be
 * claimed, and whoever finishes one claims the next, so a reply held back behind a slow or
 * failing one goes as soon as that one is done.
 */
export function createDeliveryService(context: RuntimeContext): DeliveryService {
  /** Deliveries under way; `settled` waits until there are none. */
  let inFlight = 0
  let onSettled: Array<() => void> = []
  const timers = new Set<() => void>()
  /**
   * Messages `deliverNow` waits to see leave the outbox, each with its waiter: a message is one
   * turn's, so one `deliverNow` waits for it at most.
   */
  const leaving = new Map<string, () => void>()
  const left = (messageId: string) => {
    const resolve = leaving.get(messageId)
    leaving.delete(messageId)
    resolve?.()
  }
  /** Per session, the drain this process is running for it, so `deliverNow` can wait for it. */
  const draining = new Map<string, Promise<void>>()
  let stopped = false
  const leaseToken = context.ids.uuid()
  /** Types a reply found no connector for, told once each so that a backlog does not flood the log. */
  const missingTypes = new Set<string>()

  // A connector never registered (forgotten, or a typo in its type) looks like one not yet
  // registered, and the replies waiting for it would otherwise fail with no trace in the log.
  const warnNoConnector = (type: string) => {
    if (missingTypes.has(type)) return
    missingTypes.add(type)
    const registeredTypes = [...context.connectors.keys()]
    const registered =
      registeredTypes.length === 0 ? 'none' : registeredTypes.map((name) => JSON.stringify(name)).join(', ')
    context.logger.warn(
      { integrationType: type, registeredTypes },
      `no connector of type ${JSON.stringify(type)} is registered (registered: ${registered}); replies to its integrations wait for one, and fail after the retries`,
    )
  }

  // A count rather than a set of the promises: a set that empties after nearly every delivery
  // makes V8 shrink its table each time.
  const untrack = () => {
    inFlight -= 1
    if (inFlight > 0) return
    const waiting = onSettled
    onSettled = []
    for (const resolve of waiting) resolve()
  }
  const track = (work: Promise<void>) => {
    inFlight += 1
    // `then` with the same callback twice: a `finally()` costs three promises, this one.
    void work.then(untrack, untrack)
    return work
  }

  /** Writes the outcome of a try, again after a storage failure while the claim lasts. */
  const record = <T>(messageId: string, write: () => Promise<T>): Promise<T> =>
    recordOutcome(context, { what: 'a delivery attempt', messageId }, write)

  const scheduleRetry = (messageId: string, availableAt: Date) => {
    if (stopped) return
    const cancel = setTimerUntil(context.clock, availableAt, () => {
      timers.delete(cancel)
      service.deliverSoon([messageId])
    })
    timers.add(cancel)
  }

  /** One try at one claimed message; true when it left the outbox, false when it waits for a retry. */
  async function attempt(item: OutboxItem, known: DeliveryContext | undefined): Promise<boolean> {
    const { storage } = context
    const fresh = known !== undefined && known.session.id === item.sessionId ? known : undefined
    const message =
      fresh?.messages.find((stored) => stored.id === item.messageId) ??
      (await storage.messages.get({ id: item.messageId }))
    const session =
      message === null ? null : (fresh?.session ?? (await storage.sessions.get({ id: item.sessionId })))
    const integration =
      session === null
        ? null
        : fresh !== undefined && fresh.integration.id === item.integrationId
          ? fresh.integration
          : await storage.integrations.get({ id: item.integrationId })
    if (message === null || session === null || integration === null || message.delivery === 'blocked') {
      await record(item.messageId, () => storage.outbox.remove({ messageId: item.messageId, leaseToken }))
      return true
    }
    // Closing blocks the session's pending messages; one found waiting all the same stays unsent.
    if (session.state === 'closed') {
      await record(item.messageId, () =>
        storage.outbox.remove({ messageId: item.messageId, leaseToken, delivery: 'blocked' }),
      )
      return true
    }
    const event = { companyId: item.companyId, sessionId: item.sessionId, messageId: item.messageId }
    const connector = context.connectors.get(integration.type)
    let outcome: Awaited<ReturnType<NonNullable<typeof connector>['send']>>
    if (connector === undefined) {
      // Retryable: a connector may register after start (the webchat one does once the HTTP
      // server listens), and a reply committed before that waits for it on the retry schedule.
      warnNoConnector(integration.type)
      outcome = {
        ok: false,
        retryable: true,
        error: `no connector for integration type "${integration.type}"`,
      }
    } else {
      try {
        // To the channel of the message it answers, not wherever the customer wrote from since.
        outcome = await connector.send({ integration, session: addressedFor(session, message), message })
      } catch (error) {
        outcome = {
          ok: false,
          retryable: true,
          error: error instanceof Error ? error.message : String(error),
        }
      }
    }

    if (outcome.ok) {
      await record(item.messageId, () =>
        storage.outbox.remove({ messageId: item.messageId, leaseToken, delivery: 'sent' }),
      )
      emitSafely(context, 'message-delivered', event)
      return true
    }
    const failedAttempts = item.attempts + 1
    if (outcome.retryable && failedAttempts < MAX_DELIVERY_ATTEMPTS) {
      const delay = retryDelayMs(failedAttempts)
      const availableAt = new Date(context.clock.now().getTime() + delay)
      await record(item.messageId, () =>
        storage.outbox.retryLater({
          messageId: item.messageId,
          leaseToken,
          attempts: failedAttempts,
          availableAt,
        }),
      )
      scheduleRetry(item.messageId, availableAt)
      return false
    }
    await record(item.messageId, () =>
      storage.outbox.remove({ messageId: item.messageId, leaseToken, delivery: 'failed' }),
    )
    // Besides the event: an app listening to none still learns why a customer got nothing.
    context.logger.warn(
      {
        sessionId: item.sessionId,
        messageId: item.messageId,
        attempts: failedAttempts,
        error: outcome.error,
      },
      'a reply was not delivered; it is marked failed',
    )
    emitSafely(context, 'delivery-failed', { ...event, error: outcome.error })
    return true
  }

  /**
   * Sends a claimed message, then the session's next ones while they are due. Ends at a message
   * that waits for a retry (its timer takes over), or one not yet due or claimed elsewhere.
   */
  function drain(first: OutboxItem, known?: DeliveryContext): Promise<void> {
    const { sessionId } = first
    const work = sendInOrder()
    draining.set(sessionId, work)
    return work

    async function sendInOrder(): Promise<void> {
      let item: OutboxItem | null = first
      try {
        // What the caller knew holds for the first message only; later ones may come much later.
        while (item !== null && (await attempt(item, item === first ? known : undefined))) {
          if (leaving.size > 0) left(item.messageId)
          item = await context.storage.outbox.claimNext({
            sessionId,
            now: context.clock.now(),
            leaseMs: CLAIM_LEASE_MS,
            leaseToken,
          })
        }
      } catch (error) {
        // The claim's lease runs out and a sweep picks the message up again.
        context.logger.error(
          { messageId: item?.messageId, sessionId, error: String(error) },
          'delivery failed unexpectedly',
        )
      } finally {
        // Here rather than in a reaction to `work`, which costs a promise more. After an await,
        // so `work` is set and in `draining` by now.
        if (draining.get(sessionId) === work) draining.delete(sessionId)
      }
    }
  }

  function claim(messageId: string): Promise<OutboxItem | null> {
    return context.storage.outbox.claim({
      messageId,
      now: context.clock.now(),
      leaseMs: CLAIM_LEASE_MS,
      leaseToken,
    })
  }

  /**
   * Nothing to do when the message is gone, claimed elsewhere, or behind an earlier one of its
   * session: whoever finishes that one sends this one.
   */
  async function deliverOne(messageId: string, known?: DeliveryContext): Promise<void> {
    try {
      const item = await claim(messageId)
      if (item !== null) await drain(item, known)
    } catch (error) {
      context.logger.error({ messageId, error: String(error) }, 'delivery failed unexpectedly')
    }
  }

  /**
   * Like `deliverOne`, but a message held back behind an earlier one this process is sending
   * waits for it, so the caller knows both were tried. Held back by another process or by a
   * retry's wait, it is left to follow in order.
   */
  async function deliverOneNow(messageId: string): Promise<void> {
    try {
      for (;;) {
        const item = await claim(messageId)
        if (item !== null) return await drain(item)
        const message = await context.storage.messages.get({ id: messageId })
        const earlier = message === null ? undefined : draining.get(message.sessionId)
        if (earlier === undefined) return
        // That drain may send this message too; if it ended before this one was committed, the
        // next claim takes it.
        await earlier
      }
    } catch (error) {
      context.logger.error({ messageId, error: String(error) }, 'delivery failed unexpectedly')
    }
  }

  /**
   * Resolves once the message left the outbox: at once when it did already (or is gone), else
   * when a try of this process takes it out, when a look finds it gone (another process's try),
   * at `stop`, or after `LEAVE_WAIT_MS`.
   */
  async function untilLeft(messageId: string): Promise<void> {
    const giveUpAt = context.clock.now().getTime() + LEAVE_WAIT_MS
    while (!stopped) {
      let resolve: () => void = () => {}
      let looksAgain = false
      const leaves = new Promise<void>((settle) => {
        resolve = settle
      })
      // Listening before the look, so a try that ends in between is heard.
      leaving.set(messageId, resolve)
      const waitMs = Math.min(LEAVE_POLL_MS, giveUpAt - context.clock.now().getTime())
      const cancel = context.clock.setTimer(() => {
        looksAgain = waitMs === LEAVE_POLL_MS
        resolve()
      }, waitMs)
      try {
        const message = await context.storage.messages.get({ id: messageId })
        if (message === null || message.delivery !== 'pending') return
        await leaves
        if (!looksAgain) return
      } catch (error) {
        context.logger.error({ messageId, error: String(error) }, 'delivery failed unexpectedly')
        return
      } finally {
        cancel()
        if (leaving.get(messageId) === resolve) leaving.delete(messageId)
      }
    }
  }

  // After `stop`, messages committed by work still finishing (a request the server was answering
  // as it shut down) stay in the outbox: the next process's sweep sends them, while this one's
  // storage may be closing under them. `deliverNow` still sends: a turn that committed a transfer
  // to a human awaits it, and its announcement must reach the customer before the transfer.
  const service: DeliveryService = {
    deliverSoon(messageIds, known) {
      if (stopped) return
      // Of one session's messages only the first is claimed; sending it sends the others after it.
      for (const id of messageIds) track(deliverOne(id, known))
    },
    async deliverNow(messageIds) {
      for (const id of messageIds) {
        await track(deliverOneNow(id))
        await untilLeft(id)
      }
    },
    async sweep() {
      if (stopped) return
      const items = await context.storage.outbox.claimDue({
        now: context.clock.now(),
        limit: SWEEP_BATCH,
        leaseMs: CLAIM_LEASE_MS,
        leaseToken,
      })
      // The other callers of `drain` are tracked already; tracking it inside as well cost every
      // delivery two more promises.
      await Promise.all(items.map((item) => track(drain(item))))
    },
    async settled() {
      if (inFlight > 0) await new Promise<void>((resolve) => onSettled.push(resolve))
    },
    stop() {
      stopped = true
      for (const cancel of timers) cancel()
      timers.clear()
      for (const messageId of [...leaving.keys()]) left(messageId)
    },
  }
  return service
}
