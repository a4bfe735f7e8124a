import { EXTERNAL_REFERENCE_MAX, PAUSE_REASON_MAX, type Session, truncate } from '../domain/session.js'
import type { HumanTransferTarget } from '../handoff/human-transfer.js'
import { supportsHumanTransfer } from '../ports/connector.js'
import type { PendingHumanTransfer, Repositories } from '../ports/storage.js'
import type { DeliveryService } from './deliver-outbox.js'
import { recordOutcome } from './record-outcome.js'
import type { RuntimeContext } from './runtime-context.js'
import { updateSession } from './update-session.js'

/**
 * How long a claim on a transfer lasts before a sweep may take it: the platform's call (the
 * msgplatform connector gives up after 10 s) and the record of its outcome (about 13 s of tries).
 */
const TRANSFER_LEASE_MS = 30_000
/**
 * How long the process that paused a session holds its transfer first: its announcement's tries
 * (up to about 25 s) and the call. A sweep takes the transfer of a process that died after that.
 */
const FIRST_CLAIM_MS = 60_000
const SWEEP_BATCH = 20

/** What the process that added a transfer needs to make it after the commit. */
export interface HumanTransferTicket {
  readonly id: string
  readonly leaseToken: string
  /** The messages to deliver first (a handoff's announcement). */
  readonly after: readonly string[]
}

/**
 * Records the transfer `paused` (the session as the transaction saves it) was paused for, in that
 * transaction: kept until its outcome is recorded, so a process that dies before the call or its
 * record leaves it for another to make. `adding` is the write, for the caller to await with its
 * others.
 */
export function addHumanTransfer(
  context: RuntimeContext,
  tx: Repositories,
  paused: Session,
  target: HumanTransferTarget,
  after: readonly string[],
): { ticket: HumanTransferTicket; adding: Promise<void> } {
  const ticket = { id: context.ids.uuid(), leaseToken: context.ids.uuid(), after }
  const adding = tx.humanTransfers.add({
    id: ticket.id,
    sessionId: paused.id,
    companyId: paused.companyId,
    integrationId: paused.integrationId,
    agentId: target.agentId,
    ...(target.operatorId === undefined ? {} : { operatorId: target.operatorId }),
    ...(target.groupId === undefined ? {} : { groupId: target.groupId }),
    systemMessage: target.systemMessage,
    pauses: paused.metadata.pauses ?? 0,
    after,
    leaseToken: ticket.leaseToken,
    leasedUntil: new Date(context.clock.now().getTime() + FIRST_CLAIM_MS),
  })
  return { ticket, adding }
}

export interface HumanTransferService {
  /**
   * After the commit that added the transfer: delivers the messages it follows, then makes it.
   * Answers the session as the outcome left it; null when the transfer was not made here (another
   * process took it, or its messages are still waiting, and a sweep makes it once they left).
   */
  makeAfter(ticket: HumanTransferTicket): Promise<Session | null>
  /** Makes the transfers left behind, e.g. by a process that died between a pause and its call. */
  sweep(): Promise<void>
  /** Resolves when no transfer is in flight (a sweep's, or one `makeAfter` makes). */
  settled(): Promise<void>
  /** Starts no new sweep; transfers in flight still finish. */
  stop(): void
}

/**
 * Whether the session is still waiting for this transfer: paused by it (not resumed since, nor
 * paused again after a resume), with its human agent active. A session an operator resumed, closed
 * or gave to another agent meanwhile is not transferred.
 */
function awaits(session: Session, transfer: PendingHumanTransfer): boolean {
  return (
    session.state === 'paused' &&
    (session.metadata.pauses ?? 0) === transfer.pauses &&
    session.activeAgentId === transfer.agentId
  )
}

/**
 * The transfers to a human. The call to the platform is made once per transfer that gets an
 * answer: a failed one is recorded in `pauseState.reason` and not tried again (CONTRACT §6 retries
 * replies, not transfers). Only a transfer whose outcome was never recorded (its process died, or
 * its call did not answer within the claim) is made again, by a sweep: at most once after a
 * success is therefore best effort, as for a reply sent just before a crash.
 */
export function createHumanTransferService(
  context: RuntimeContext,
  delivery: DeliveryService,
): HumanTransferService {
  const { storage } = context
  const sweepToken = context.ids.uuid()
  let stopped = false
  const inFlight = new Set<Promise<unknown>>()

  const drop = async (transfer: PendingHumanTransfer) => {
    await recordOutcome(context, { what: 'a dropped transfer', transferId: transfer.id }, () =>
      storage.humanTransfers.remove({ id: transfer.id, leaseToken: transfer.leaseToken }),
    )
  }

  async function make(transfer: PendingHumanTransfer): Promise<Session | null> {
    const session = await storage.sessions.get({ id: transfer.sessionId })
    if (session === null || !awaits(session, transfer)) {
      await drop(transfer)
      return session
    }
    const integration = await storage.integrations.get({ id: transfer.integrationId })
    const connector = integration === null ? undefined : context.connectors.get(integration.type)
    if (integration === null || connector === undefined || !supportsHumanTransfer(connector)) {
      // Added only where the channel could transfer: its integration is gone, or this process
      // lacks the connector the one that paused had.
      context.logger.warn(
        { sessionId: session.id, integrationId: transfer.integrationId },
        'a transfer to a human found no channel to make it; the session stays paused',
      )
      await drop(transfer)
      return session
    }

    let note: { reason?: string; externalReference?: string }
    try {
      const outcome = await connector.transferToHuman({
        integration,
        session,
        ...(transfer.operatorId === undefined ? {} : { operatorId: transfer.operatorId }),
        ...(transfer.groupId === undefined ? {} : { groupId: transfer.groupId }),
        systemMessage: transfer.systemMessage,
      })
      note = outcome.ok
        ? outcome.externalReference === undefined
          ? {}
          : { externalReference: truncate(outcome.externalReference, EXTERNAL_REFERENCE_MAX) }
        : { reason: truncate(`transfer to a human failed: ${outcome.error}`, PAUSE_REASON_MAX) }
    } catch (error) {
      const text = error instanceof Error ? error.message : String(error)
      note = { reason: truncate(`transfer to a human failed: ${text}`, PAUSE_REASON_MAX) }
    }

    // The outcome and the transfer's removal commit together, and only while this claim holds it:
    // a claim taken over after it ran out leaves the record to its new holder.
    const recorded = await recordOutcome(
      context,
      { what: 'a transfer to a human', transferId: transfer.id },
      () =>
        updateSession(storage, { sessionId: transfer.sessionId }, async (current, tx) => {
          const held = await tx.humanTransfers.remove({ id: transfer.id, leaseToken: transfer.leaseToken })
          // On the pause the transfer was made for, even if its agent changed during the call.
          const samePause = current.state === 'paused' && (current.metadata.pauses ?? 0) === transfer.pauses
          if (!held || !samePause || current.pauseState === undefined)
            return { session: current, value: null }
          if (note.reason === undefined && note.externalReference === undefined) {
            return { session: current, value: null }
          }
          return {
            session: {
              ...current,
              pauseState: { ...current.pauseState, ...note },
              updatedAt: context.clock.now().toISOString(),
            },
            value: null,
          }
        }),
    )
    return recorded.isOk() ? recorded.value.session : session
  }

  /** `make`, its failures logged: the transfer stays claimed until its lease runs out, then a sweep takes it. */
  const makeLogged = async (transfer: PendingHumanTransfer): Promise<Session | null> => {
    try {
      return await make(transfer)
    } catch (error) {
      context.logger.error(
        { sessionId: transfer.sessionId, transferId: transfer.id, error: String(error) },
        'transfer to a human failed unexpectedly',
      )
      return null
    }
  }

  const track = <T>(work: Promise<T>): Promise<T> => {
    inFlight.add(work)
    const done = () => inFlight.delete(work)
    void work.then(done, done)
    return work
  }

  return {
    makeAfter(ticket) {
      // Tracked like a sweep's: `stop` waits for it, so that the outcome of a call under way (a
      // reassign's, which no worker holds) is recorded before the storage closes, and not made
      // again by the next process once the claim ran out.
      return track(
        (async () => {
          // The announcement reaches the customer before the conversation leaves for the human queue.
          await delivery.deliverNow(ticket.after)
          let claimed: PendingHumanTransfer | null
          try {
            claimed = await storage.humanTransfers.claim({
              id: ticket.id,
              now: context.clock.now(),
              leaseMs: TRANSFER_LEASE_MS,
              leaseToken: ticket.leaseToken,
            })
          } catch (error) {
            context.logger.error(
              { transferId: ticket.id, error: String(error) },
              'could not claim a transfer to a human; a sweep makes it',
            )
            return null
          }
          return claimed === null ? null : makeLogged(claimed)
        })(),
      )
    },

    async sweep() {
      if (stopped) return
      const due = await storage.humanTransfers.claimDue({
        now: context.clock.now(),
        limit: SWEEP_BATCH,
        leaseMs: TRANSFER_LEASE_MS,
        leaseToken: sweepToken,
      })
      await Promise.all(due.map((transfer) => track(makeLogged(transfer))))
    },

    async settled() {
      await Promise.all([...inFlight])
    },

    stop() {
      stopped = true
    },
  }
}
