import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Message, Session } from '../domain/session.js'
import { storableText } from '../domain/storable-text.js'
import type { Integration, JobLease, NewMessage, NewWebhookLog, Repositories } from '../ports/storage.js'
import { backOff } from './back-off.js'
import { createHandOff } from './hand-off.js'
import { type CustomerAddress, followCustomer, newSessionRow, noEntryAgent } from './open-session.js'
import { emitSafely, type RuntimeContext } from './runtime-context.js'
import type { JobHandOff } from './worker-pool.js'

/** A customer message as every connector normalises it. */
export interface InboundMessage extends CustomerAddress {
  readonly text: string
  /** The channel's id of the message; the same id on one integration is stored once. */
  readonly externalId?: string | undefined
}

export interface IngestResult {
  readonly session: Session
  readonly message: Message
  /** The external id was seen before; nothing was stored. */
  readonly duplicate: boolean
  /** A job was enqueued: false while paused or while a human is the active agent. */
  readonly queued: boolean
}

/**
 * What ingest decided for one message, known before the message is written: what its webhook log
 * entry records, so the entry can be written together with the message.
 */
export interface IngestDecision {
  /** The message's session; a new one as it is about to be stored (version 1), beside the entry. */
  readonly session: Session
  /** The id of the message stored now, or, for a duplicate, of the one stored before. */
  readonly messageId: string
  /** The external id was seen before; nothing is stored but the log entry. */
  readonly duplicate: boolean
  /** A job is enqueued: false while paused or while a human is the active agent. */
  readonly queued: boolean
}

export interface IngestOptions {
  /**
   * The message's integration as the caller read it (a webhook handler checking its signature,
   * say), so ingest does not read it before its transaction. It must be the inbound's integration.
   * The copy may be old: inside the transaction ingest checks that it is still the stored one, and
   * when it is not (changed or deleted since), stores nothing and answers `CONFLICT`, so the caller
   * reads it again and decides on the fresh one.
   */
  readonly integration?: Integration
  /**
   * The webhook log entry to store for this message once its outcome is known (duplicates
   * included), in the message's transaction: both are stored or neither is.
   */
  readonly webhookLog?: (decision: IngestDecision) => NewWebhookLog
}

/**
 * Attempts at storing one message. A failed attempt has mostly lost a race (another process
 * opened the customer's session first or closed it meanwhile), and under a storm of closes from
 * another process three in a row were lost; a storage that is down fails them all within a few
 * hundred milliseconds.
 */
const MAX_ATTEMPTS = 6

/** The row of an inbound message in its session. */
export function customerMessage(
  context: RuntimeContext,
  session: Pick<Session, 'id' | 'companyId'>,
  inbound: InboundMessage,
  now: Date,
): NewMessage {
  return {
    id: context.ids.uuid(),
    companyId: session.companyId,
    sessionId: session.id,
    integrationId: inbound.integrationId,
    role: 'customer',
    text: storableText(inbound.text),
    at: now,
    ...(inbound.externalId === undefined ? {} : { externalId: inbound.externalId }),
    ...(inbound.channelId === undefined ? {} : { channelId: inbound.channelId }),
    ...(inbound.transport === undefined ? {} : { transport: inbound.transport }),
  }
}

/**
 * The message and, when queued, its job, started together: a storage that pipelines statements
 * writes them in one round trip. The message's id is ours, so nothing waits for it. With
 * `leasedTo`, the job is leased to that token when its session has no earlier one unfinished.
 */
function startMessageWrites(
  context: RuntimeContext,
  tx: Repositories,
  session: Pick<Session, 'id' | 'companyId'>,
  planned: NewMessage,
  queued: boolean,
  now: Date,
  leasedTo?: string,
): Promise<unknown>[] {
  // Only while the session is open: a close committed since ingest read it, or while the insert
  // waited for the session, stores nothing, and the next attempt opens a new session (a closed
  // session is never reused, and no message is left unanswered in one).
  const writes: Promise<unknown>[] = [tx.messages.insert(planned, { intoOpenSession: true })]
  if (queued) {
    const job = {
      companyId: session.companyId,
      sessionId: session.id,
      messageId: planned.id,
      availableAt: now,
    }
    writes.push(
      leasedTo === undefined
        ? tx.jobs.enqueue(job)
        : tx.jobs.enqueueLeased(job, { now, leaseMs: context.leaseMs, token: leasedTo }),
    )
  }
  return writes
}

/** Tells listeners of a message stored now (a duplicate stored nothing). */
export function announceReceived(
  context: RuntimeContext,
  outcome: Result<IngestResult, SwitchboardError>,
): void {
  if (outcome.isErr() || outcome.value.duplicate) return
  const { session, message, queued } = outcome.value
  emitSafely(context, 'message-received', {
    companyId: session.companyId,
    sessionId: session.id,
    message,
    queued,
  })
}

/**
 * Whether `stored` is still the integration a caller checked a message against as `given`: the
 * same row, not updated since.
 */
export function sameIntegration(given: Integration, stored: Integration | null): boolean {
  return (
    stored !== null &&
    stored.updatedAt === given.updatedAt &&
    stored.active === given.active &&
    stored.webhookSecret === given.webhookSecret &&
    stored.entryAgentId === given.entryAgentId &&
    stored.companyId === given.companyId &&
    stored.type === given.type
  )
}

function integrationChanged(): SwitchboardError {
  return switchboardError('CONFLICT', 'the integration changed since it was read; read it again')
}

/** A caller handing over another integration than the message's is a bug, not a domain failure. */
export function assertIntegrationOf(inbound: InboundMessage, integration: Integration): void {
  if (integration.id === inbound.integrationId) return
  throw new TypeError(
    `ingest: the integration given (${integration.id}) is not the message's (${inbound.integrationId})`,
  )
}

/**
 * Receive one customer message: find the customer's open session or open one (a closed session
 * is never reused), store the message once per external id, and enqueue its job, all in one
 * transaction. When this resolves, the message is durable; its turn may have started already,
 * on a worker of this process the job was enqueued leased to (`message-received` comes first).
 */
export async function ingest(
  context: RuntimeContext,
  workers: JobHandOff,
  inbound: InboundMessage,
  options: IngestOptions = {},
): Promise<Result<IngestResult, SwitchboardError>> {
  if (options.integration !== undefined) assertIntegrationOf(inbound, options.integration)
  const integration =
    options.integration ?? (await context.storage.integrations.get({ id: inbound.integrationId }))
  if (integration === null) return err(switchboardError('NOT_FOUND', 'integration not found'))
  if (!integration.active)
    return err(switchboardError('INTEGRATION_INACTIVE', 'the integration is not active'))

  // A worker kept for the message's job, which it then runs at once: no lease to look for it, and
  // for a new session no reads of what this transaction wrote.
  const handOff = createHandOff(context, workers)
  const leaseTokenFor = (queued: boolean): string | undefined => (queued ? handOff.token() : undefined)

  const store = async (tx: Repositories): Promise<Result<IngestResult, SwitchboardError>> => {
    handOff.attempt()
    // Started together: a storage that pipelines statements answers them in one round trip. The
    // entry agent opens a new session, and is the active agent of most open ones. A caller's copy
    // of the integration is checked against the stored row.
    const [existing, open, entryAgent, stored] = await Promise.all([
      inbound.externalId === undefined
        ? null
        : tx.messages.findByExternalId({ integrationId: integration.id, externalId: inbound.externalId }),
      tx.sessions.findOpen({ integrationId: integration.id, clientId: inbound.clientId }),
      tx.agents.get({ companyId: integration.companyId, id: integration.entryAgentId }),
      options.integration === undefined ? integration : tx.integrations.get({ id: integration.id }),
    ])
    if (!sameIntegration(integration, stored)) return err(integrationChanged())
    if (existing !== null) {
      const session =
        open !== null && open.id === existing.sessionId
          ? open
          : await tx.sessions.get({ id: existing.sessionId })
      if (session !== null) {
        const decision = { session, messageId: existing.id, duplicate: true, queued: false }
        if (options.webhookLog !== undefined) await tx.webhookLogs.add(options.webhookLog(decision))
        return ok({ session, message: existing, duplicate: true, queued: false })
      }
    }

    const now = context.clock.now()
    if (open === null) {
      if (entryAgent === null) return err(noEntryAgent())
      // A new session needs nothing back from storage before the message's writes: it is stored
      // with them and the log entry, in the same round trip. The decision names it as planned.
      const row = newSessionRow(context, integration, inbound, now, entryAgent)
      const queued = entryAgent.kind !== 'human'
      const leasedTo = leaseTokenFor(queued)
      const planned = customerMessage(context, row, inbound, now)
      const writes = [
        tx.sessions.create(row),
        ...startMessageWrites(context, tx, row, planned, queued, now, leasedTo),
      ]
      if (options.webhookLog !== undefined) {
        const decision = { session: { ...row, version: 1 }, messageId: planned.id, duplicate: false, queued }
        writes.push(tx.webhookLogs.add(options.webhookLog(decision)))
      }
      const [session, message, job] = (await Promise.all(writes)) as [Session, Message, JobLease | null]
      // The session is new: nothing came before its first message.
      if (job) handOff.leased(job, { session, message, agent: entryAgent, integration, priorMessages: [] })
      return ok({ session, message, duplicate: false, queued })
    }

    const session = await followCustomer(tx, open, inbound, now)
    let queued = false
    if (session.state === 'ongoing') {
      // The entry agent is the active agent of most open sessions.
      const active =
        entryAgent !== null && entryAgent.id === session.activeAgentId
          ? entryAgent
          : await tx.agents.get({ companyId: session.companyId, id: session.activeAgentId })
      // No agent at all: the one active was deleted, and the job hands the session to the entry agent.
      queued = active === null || active.kind !== 'human'
    }
    // The log entry is started with the message's writes. A job with no earlier one unfinished is
    // leased to a free worker here, which reads what the turn needs itself: the session's history
    // may change until this commits.
    const leasedTo = leaseTokenFor(queued)
    const planned = customerMessage(context, session, inbound, now)
    const decision = { session, messageId: planned.id, duplicate: false, queued }
    const writes = startMessageWrites(context, tx, session, planned, queued, now, leasedTo)
    if (options.webhookLog !== undefined) writes.push(tx.webhookLogs.add(options.webhookLog(decision)))
    const [message, job] = (await Promise.all(writes)) as [Message, JobLease | null | undefined]
    if (job) handOff.leased(job)
    return ok({ session, message, duplicate: false, queued })
  }

  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const result = await context.storage.transaction(store)
        // Heard before the turn starts: a handed-off turn starts before this resolves.
        announceReceived(context, result)
        if (handOff.committed() === 0 && result.isOk() && result.value.queued) workers.wake()
        return result
      } catch (error) {
        handOff.failed()
        // A concurrent ingest may have opened the customer's session or stored the same external
        // id first, or the session was closed after it was read (`SessionClosedError`, nothing
        // stored): the next attempt finds the session, the message, or none and opens a new one.
        // The first retry at once, later ones spaced out: writers racing again at once would meet
        // again.
        if (attempt >= MAX_ATTEMPTS) throw error
        if (attempt > 1) await backOff(attempt)
      }
    }
  } finally {
    const givingBack = handOff.finish()
    if (givingBack !== undefined) await givingBack
  }
}
