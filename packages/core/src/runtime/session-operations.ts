import { err, ok, type Result } from 'neverthrow'
import type { Agent } from '../domain/agent.js'
import { pathEntry } from '../domain/agent-path.js'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Message, Session } from '../domain/session.js'
import {
  type SessionCommand,
  transition,
  validateResumeNote,
  withState,
} from '../domain/session-state-machine.js'
import { withJourneyStep } from '../domain/shared-context.js'
import { storableText } from '../domain/storable-text.js'
import { resolveHumanTransferTarget } from '../handoff/human-transfer.js'
import { supportsHumanTransfer } from '../ports/connector.js'
import { type Repositories, TransactionConflictError } from '../ports/storage.js'
import { backOff } from './back-off.js'
import { blockPending } from './block-pending.js'
import type { DeliveryService } from './deliver-outbox.js'
import { addHumanTransfer, type HumanTransferService, type HumanTransferTicket } from './human-transfer.js'
import { emitSafely, type RuntimeContext } from './runtime-context.js'
import { MAX_ATTEMPTS, updateSession } from './update-session.js'

interface SessionTarget {
  readonly companyId: number
  readonly sessionId: string
}

/**
 * The platform's delivery (a `webhook-id`) that asks for a change: recorded in the change's own
 * transaction, so the change lands once per id, and a delivery whose change did not commit (the
 * process died, the database went away) is processed when the platform sends it again. A delivery
 * recorded before answers `CONFLICT` and changes nothing.
 */
export interface WebhookDeliveryKey {
  readonly integrationId: string
  readonly deliveryId: string
  readonly at: Date
}

/** What operators (and platform status hooks) do to a session. Tenancy comes with every call. */
export interface SessionOperations {
  get(target: SessionTarget): Promise<Session | null>
  pause(
    target: SessionTarget & { reason?: string | undefined; externalReference?: string | undefined },
  ): Promise<Result<Session, SwitchboardError>>
  /** The note, if any, becomes the journey step `Operator note: <note>`. */
  resume(target: SessionTarget & { note?: string | undefined }): Promise<Result<Session, SwitchboardError>>
  close(
    target: SessionTarget & { reason?: string | undefined; webhookDelivery?: WebhookDeliveryKey | undefined },
  ): Promise<Result<Session, SwitchboardError>>
  /** Makes `agentId` active; a human agent also pauses the session and calls the channel's transfer. */
  reassign(
    target: SessionTarget & {
      agentId: number
      operatorId?: number | undefined
      groupId?: number | undefined
    },
  ): Promise<Result<Session, SwitchboardError>>
  /** An operator's message, sent to the customer through the channel in any state but closed. */
  sendOperatorMessage(target: SessionTarget & { text: string }): Promise<Result<Message, SwitchboardError>>
  /** The platform moved the dialog to another operator: a journey step, the state unchanged. */
  recordExternalTransfer(
    target: SessionTarget & { step: string; webhookDelivery?: WebhookDeliveryKey | undefined },
  ): Promise<Result<Session, SwitchboardError>>
}

const unknownAgent = () =>
  switchboardError('VALIDATION_ERROR', 'agentId names no agent of this company', [
    { path: 'agentId', message: 'unknown agent' },
  ])

const deliveredBefore = () =>
  switchboardError('CONFLICT', 'this webhook delivery was processed before; nothing changed')

/**
 * Records `delivery`, if any, in the change's transaction: false when it was recorded before, and
 * the caller then changes nothing (so writes nothing, and the transaction holds nothing of it).
 */
async function firstDelivery(tx: Repositories, delivery: WebhookDeliveryKey | undefined): Promise<boolean> {
  return delivery === undefined || (await tx.webhookDeliveries.record(delivery))
}

/** A reassign's agent, and the transfer to a human it added, to make once it committed. */
interface Reassigned {
  readonly agent: Agent
  readonly transfer?: HumanTransferTicket
}

/** Thrown to take back an operator's message whose session was closed before it could commit. */
class ClosedMeanwhile extends Error {}

export function createSessionOperations(
  context: RuntimeContext,
  delivery: DeliveryService,
  transfers: HumanTransferService,
): SessionOperations {
  const now = () => context.clock.now()

  const changeState = async (
    target: SessionTarget,
    command: SessionCommand,
    extra?: (session: Session) => Session,
    delivery?: WebhookDeliveryKey,
  ) => {
    const result = await updateSession(context.storage, target, async (current, tx) => {
      const next = transition(current, command)
      if (next.isErr()) return { error: next.error }
      if (!(await firstDelivery(tx, delivery))) return { error: deliveredBefore() }
      let session: Session = { ...withState(current, next.value), updatedAt: now().toISOString() }
      if (extra !== undefined) session = extra(session)
      // A paused session's agent stays silent; a closed one sends nothing at all.
      if (session.state === 'paused') await blockPending(tx, current.id, ['agent', 'system'], now())
      if (session.state === 'closed') {
        // After the save, which waits for an operator's message holding the session: under READ
        // COMMITTED, blocking before it would miss that message, committed after the look.
        const blockAll = (last: Repositories) => [
          blockPending(last, current.id, ['agent', 'system', 'operator'], now()),
        ]
        return { session, value: null, beforeCommit: blockAll }
      }
      return { session, value: null }
    })
    if (result.isOk() && result.value.previous.state !== result.value.session.state) {
      emitSafely(context, 'session-state-changed', {
        companyId: result.value.session.companyId,
        sessionId: result.value.session.id,
        from: result.value.previous.state,
        to: result.value.session.state,
        version: result.value.session.version,
      })
    }
    return result.map((value) => value.session)
  }

  return {
    get: (target) => context.storage.sessions.get({ id: target.sessionId, companyId: target.companyId }),

    pause: (target) =>
      changeState(target, {
        type: 'pause',
        at: now(),
        ...(target.reason === undefined ? {} : { reason: target.reason }),
        ...(target.externalReference === undefined ? {} : { externalReference: target.externalReference }),
      }),

    async resume(target) {
      const note = validateResumeNote(target.note)
      if (note.isErr()) return err(note.error)
      return changeState(target, { type: 'resume' }, (session) =>
        note.value === undefined || note.value === ''
          ? session
          : {
              ...session,
              metadata: {
                ...session.metadata,
                sharedContext: withJourneyStep(
                  session.metadata.sharedContext,
                  `Operator note: ${note.value}`,
                  now(),
                ),
              },
            },
      )
    },

    close: (target) => changeState(target, { type: 'close' }, undefined, target.webhookDelivery),

    async reassign(target) {
      // Also read, and held, in the transaction below; this answers an unknown agent without one.
      const known = await context.storage.agents.get({ companyId: target.companyId, id: target.agentId })
      if (known === null) return err(unknownAgent())
      const result = await updateSession<Reassigned>(context.storage, target, async (current, tx) => {
        if (current.state === 'closed') {
          return { error: switchboardError('INVALID_STATE', 'cannot reassign a closed session') }
        }
        // Held to the commit: an agent deleted meanwhile is not left active on the session.
        const agent = await tx.agents.get({ companyId: target.companyId, id: target.agentId, lock: 'share' })
        if (agent === null) return { error: unknownAgent() }
        const at = now()
        let session: Session = {
          ...current,
          activeAgentId: agent.id,
          metadata: {
            ...current.metadata,
            agentPath: [...current.metadata.agentPath, pathEntry(agent, 'manual', at)],
          },
          updatedAt: at.toISOString(),
        }
        if (agent.kind !== 'human') return { session, value: { agent } }
        const paused = transition(current, { type: 'transfer', at })
        if (paused.isErr()) return { error: paused.error }
        session = withState(session, paused.value)
        // Paused for the human: the agents' replies that have not left stay unsent (spec: paused).
        await blockPending(tx, current.id, ['agent', 'system'], at)
        // On a channel that can transfer (not webchat), kept until made: a process that dies
        // after this commit leaves it to another.
        const integration = await tx.integrations.get({ id: current.integrationId })
        const connector = integration === null ? undefined : context.connectors.get(integration.type)
        if (connector === undefined || !supportsHumanTransfer(connector)) return { session, value: { agent } }
        const transferTarget = resolveHumanTransferTarget({
          human: agent,
          request: { operatorId: target.operatorId, groupId: target.groupId },
        })
        const { ticket, adding } = addHumanTransfer(context, tx, session, transferTarget, [])
        await adding
        return { session, value: { agent, transfer: ticket } }
      })
      if (result.isErr()) return err(result.error)
      const { session, previous, value } = result.value
      emitSafely(context, 'agent-changed', {
        companyId: session.companyId,
        sessionId: session.id,
        fromAgentId: previous.activeAgentId,
        toAgentId: session.activeAgentId,
        via: 'manual',
      })
      if (previous.state !== session.state) {
        emitSafely(context, 'session-state-changed', {
          companyId: session.companyId,
          sessionId: session.id,
          from: previous.state,
          to: session.state,
          version: session.version,
        })
      }
      if (value.transfer === undefined) return ok(session)
      return ok((await transfers.makeAfter(value.transfer)) ?? session)
    },

    async sendOperatorMessage(target) {
      const refused = () =>
        err(switchboardError('INVALID_STATE', 'cannot send a message on a closed session'))
      const store = () =>
        context.storage.transaction(async (tx): Promise<Result<Message, SwitchboardError>> => {
          const session = await tx.sessions.get({ id: target.sessionId, companyId: target.companyId })
          if (session === null) return err(switchboardError('NOT_FOUND', 'session not found'))
          if (session.state === 'closed') return refused()
          const at = now()
          const message = await tx.messages.insert({
            id: context.ids.uuid(),
            companyId: session.companyId,
            sessionId: session.id,
            integrationId: session.integrationId,
            role: 'operator',
            text: storableText(target.text),
            at,
            delivery: 'pending',
          })
          await tx.outbox.add({
            messageId: message.id,
            sessionId: session.id,
            companyId: session.companyId,
            integrationId: session.integrationId,
            availableAt: at,
          })
          // Held until commit, so a close either committed before this read and is seen here, or
          // saves after this commits and blocks the message. Read after the inserts: they take
          // the session's lock first, as a turn's commit does before its save, so neither waits
          // for the other in a circle.
          const held = await tx.sessions.get({ id: session.id, lock: true })
          if (held === null || held.state === 'closed') throw new ClosedMeanwhile()
          return ok(message)
        })
      let stored: Result<Message, SwitchboardError> | undefined
      for (let attempt = 1; stored === undefined; attempt += 1) {
        try {
          stored = await store()
        } catch (error) {
          if (error instanceof ClosedMeanwhile) stored = refused()
          // Given up by the storage for a concurrent writer (a deadlock): nothing was stored.
          else if (!TransactionConflictError.isInstance(error) || attempt >= MAX_ATTEMPTS) throw error
          // As updateSession does: the first retry at once, then after a random wait.
          else if (attempt > 1) await backOff(attempt)
        }
      }
      if (stored.isOk()) {
        emitSafely(context, 'message-created', {
          companyId: target.companyId,
          sessionId: target.sessionId,
          message: stored.value,
        })
        delivery.deliverSoon([stored.value.id])
      }
      return stored
    },

    async recordExternalTransfer(target) {
      const result = await updateSession(context.storage, target, async (current, tx) => {
        if (current.state === 'closed')
          return { error: switchboardError('INVALID_STATE', 'the session is closed') }
        if (!(await firstDelivery(tx, target.webhookDelivery))) return { error: deliveredBefore() }
        return {
          session: {
            ...current,
            metadata: {
              ...current.metadata,
              sharedContext: withJourneyStep(current.metadata.sharedContext, target.step, now()),
            },
            updatedAt: now().toISOString(),
          },
          value: null,
        }
      })
      return result.map((value) => value.session)
    },
  }
}
