import { err, ok, type Result } from 'neverthrow'
import type { Agent } from '../domain/agent.js'
import { pathEntry } from '../domain/agent-path.js'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import { isoTimestamp } from '../domain/iso-timestamp.js'
import type { Session } from '../domain/session.js'
import { emptySharedContext } from '../domain/shared-context.js'
import type { Integration, Repositories } from '../ports/storage.js'
import type { RuntimeContext } from './runtime-context.js'

/** Who a session talks to: one customer on one integration. */
export interface CustomerAddress {
  readonly integrationId: string
  readonly clientId: string
  readonly channelId?: string | undefined
  readonly transport?: string | undefined
}

const MAX_ATTEMPTS = 3

/**
 * Replies go back on the channel and transport of the message they answer (CONTRACT §6), so the
 * session follows a customer who writes from another channel of the same integration.
 */
export async function followCustomer(
  tx: Repositories,
  session: Session,
  customer: CustomerAddress,
  now: Date,
): Promise<Session> {
  const followed = await saveFollowing(tx, session, customer, now)
  if (followed !== null) return followed
  // Another writer (a turn's commit, another message of the customer) saved the session since it
  // was read. It is read again in this transaction and followed once more: a busy session would
  // otherwise fail every attempt of the store, and its message be refused. On PostgreSQL the
  // failed save took the session's lock, which every save takes, so the session stays as read now.
  const fresh = await tx.sessions.get({ id: session.id })
  const again =
    fresh === null || fresh.state === 'closed' ? null : await saveFollowing(tx, fresh, customer, now)
  // Closed meanwhile, or changed again: the caller's transaction is retried on what is stored then.
  if (again === null) throw new Error('the session changed while a message arrived')
  return again
}

/** The session saved with the customer's channel and transport; null when it changed since read. */
async function saveFollowing(
  tx: Repositories,
  session: Session,
  customer: CustomerAddress,
  now: Date,
): Promise<Session | null> {
  const channelId = customer.channelId ?? session.customer.channelId
  const transport = customer.transport ?? session.customer.transport
  if (channelId === session.customer.channelId && transport === session.customer.transport) return session
  return tx.sessions.save({
    ...session,
    customer: {
      clientId: session.customer.clientId,
      ...(channelId === undefined ? {} : { channelId }),
      ...(transport === undefined ? {} : { transport }),
    },
    updatedAt: isoTimestamp(now),
  })
}

export interface FoundSession {
  readonly session: Session
}

/** The customer's open session, or a new one with the integration's entry agent active. */
async function findOrOpenSession(
  context: RuntimeContext,
  tx: Repositories,
  integration: Integration,
  customer: CustomerAddress,
  now: Date,
): Promise<Result<FoundSession, SwitchboardError>> {
  const open = await tx.sessions.findOpen({ integrationId: integration.id, clientId: customer.clientId })
  if (open !== null) return ok({ session: await followCustomer(tx, open, customer, now) })
  return openNewSession(context, tx, integration, customer, now)
}

/** Why a customer of an integration whose entry agent is gone cannot open a session. */
export function noEntryAgent(): SwitchboardError {
  return switchboardError('VALIDATION_ERROR', 'the integration has no entry agent')
}

/** The row of a new session for a customer who has none open, with `entryAgent` active. */
export function newSessionRow(
  context: RuntimeContext,
  integration: Integration,
  customer: CustomerAddress,
  now: Date,
  entryAgent: Agent,
): Omit<Session, 'version'> {
  const at = isoTimestamp(now)
  return {
    id: context.ids.uuid(),
    companyId: integration.companyId,
    integrationId: integration.id,
    customer: {
      clientId: customer.clientId,
      ...(customer.channelId === undefined ? {} : { channelId: customer.channelId }),
      ...(customer.transport === undefined ? {} : { transport: customer.transport }),
    },
    state: 'ongoing',
    activeAgentId: entryAgent.id,
    entryAgentId: entryAgent.id,
    metadata: {
      agentPath: [pathEntry(entryAgent, 'initial', now)],
      sharedContext: emptySharedContext(),
      errors: [],
    },
    createdAt: at,
    updatedAt: at,
  }
}

/**
 * A new session for a customer who has none open, with the integration's entry agent active.
 * `alreadyRead`, the entry agent as the caller read it in this transaction, saves reading it again.
 */
export async function openNewSession(
  context: RuntimeContext,
  tx: Repositories,
  integration: Integration,
  customer: CustomerAddress,
  now: Date,
  alreadyRead?: Agent | null,
): Promise<Result<FoundSession, SwitchboardError>> {
  const entryAgent =
    alreadyRead !== undefined
      ? alreadyRead
      : await tx.agents.get({ companyId: integration.companyId, id: integration.entryAgentId })
  if (entryAgent === null) return err(noEntryAgent())
  const session = await tx.sessions.create(newSessionRow(context, integration, customer, now, entryAgent))
  return ok({ session })
}

/**
 * The customer's open session, opened now if there is none (a closed session is never reused).
 * For channels that show the session before the first message, like webchat.
 */
export async function openSession(
  context: RuntimeContext,
  customer: CustomerAddress,
): Promise<Result<Session, SwitchboardError>> {
  const integration = await context.storage.integrations.get({ id: customer.integrationId })
  if (integration === null) return err(switchboardError('NOT_FOUND', 'integration not found'))
  if (!integration.active)
    return err(switchboardError('INTEGRATION_INACTIVE', 'the integration is not active'))
  for (let attempt = 1; ; attempt += 1) {
    try {
      const found = await context.storage.transaction((tx) =>
        findOrOpenSession(context, tx, integration, customer, context.clock.now()),
      )
      return found.map(({ session }) => session)
    } catch (error) {
      // A concurrent call (another tab, another process) opened the customer's session first.
      if (attempt < MAX_ATTEMPTS) continue
      throw error
    }
  }
}
