import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Message, Session } from '../domain/session.js'
import type { Integration, NewMessage, NewWebhookLog, Repositories } from '../ports/storage.js'
import { type CustomerAddress, followCustomer, openNewSession } from './open-session.js'
import { emitSafely, type RuntimeContext } from './runtime-context.js'

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

export interface IngestOptions {
  /**
   * The message's integration as the caller just read it (a webhook handler checking its
   * signature, say), so ingest does not read it again. It must be the inbound's integration.
   */
  readonly integration?: Integration
  /**
   * The webhook log entry to store for this message once its outcome is known (duplicates
   * included), in the message's transaction: both are stored or neither is.
   */
  readonly webhookLog?: (result: IngestResult) => NewWebhookLog
}

const MAX_ATTEMPTS = 3

/** The row of an inbound message in its session. */
export function customerMessage(
  context: RuntimeContext,
  session: Session,
  inbound: InboundMessage,
  now: Date,
): NewMessage {
  return {
    id: context.ids.uuid(),
    companyId: session.companyId,
    sessionId: session.id,
    integrationId: inbound.integrationId,
    role: 'customer',
    text: inbound.text,
    at: now,
    ...(inbound.externalId === undefined ? {} : { externalId: inbound.externalId }),
  }
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
 * transaction. When this resolves, the message is durable.
 */
export async function ingest(
  context: RuntimeContext,
  inbound: InboundMessage,
  options: IngestOptions = {},
): Promise<Result<IngestResult, SwitchboardError>> {
  if (options.integration !== undefined) assertIntegrationOf(inbound, options.integration)
  const integration =
    options.integration ?? (await context.storage.integrations.get({ id: inbound.integrationId }))
  if (integration === null) return err(switchboardError('NOT_FOUND', 'integration not found'))
  if (!integration.active)
    return err(switchboardError('INTEGRATION_INACTIVE', 'the integration is not active'))

  const store = async (tx: Repositories): Promise<Result<IngestResult, SwitchboardError>> => {
    // Started together: a storage that pipelines statements answers all three in one round trip.
    // The entry agent opens a new session, and is the active agent of most open ones.
    const [existing, open, entryAgent] = await Promise.all([
      inbound.externalId === undefined
        ? null
        : tx.messages.findByExternalId({ integrationId: integration.id, externalId: inbound.externalId }),
      tx.sessions.findOpen({ integrationId: integration.id, clientId: inbound.clientId }),
      tx.agents.get({ companyId: integration.companyId, id: integration.entryAgentId }),
    ])
    if (existing !== null) {
      const session =
        open !== null && open.id === existing.sessionId
          ? open
          : await tx.sessions.get({ id: existing.sessionId })
      if (session !== null) return ok({ session, message: existing, duplicate: true, queued: false })
    }

    const now = context.clock.now()
    let session: Session
    if (open === null) {
      const opened = await openNewSession(context, tx, integration, inbound, now, entryAgent)
      if (opened.isErr()) return err(opened.error)
      session = opened.value.session
    } else {
      session = await followCustomer(tx, open, inbound, now)
    }

    const message = await tx.messages.insert(customerMessage(context, session, inbound, now))

    let queued = false
    if (session.state === 'ongoing') {
      // A new session's active agent is the entry agent, and so is that of most open ones.
      const active =
        entryAgent !== null && entryAgent.id === session.activeAgentId
          ? entryAgent
          : await tx.agents.get({ companyId: session.companyId, id: session.activeAgentId })
      // No agent at all: the one active was deleted, and the job hands the session to the entry agent.
      if (active === null || active.kind !== 'human') {
        await tx.jobs.enqueue({
          companyId: session.companyId,
          sessionId: session.id,
          messageId: message.id,
          availableAt: now,
        })
        queued = true
      }
    }
    return ok({ session, message, duplicate: false, queued })
  }

  for (let attempt = 1; ; attempt += 1) {
    try {
      const result = await context.storage.transaction(async (tx) => {
        const stored = await store(tx)
        if (stored.isOk() && options.webhookLog !== undefined) {
          await tx.webhookLogs.add(options.webhookLog(stored.value))
        }
        return stored
      })
      announceReceived(context, result)
      return result
    } catch (error) {
      // A concurrent ingest may have opened the customer's session or stored the same external
      // id first; the next attempt finds it.
      if (attempt < MAX_ATTEMPTS) continue
      throw error
    }
  }
}
