import { MAX_HISTORY_WINDOW, runTurn, type TurnOutcome } from '../agent/run-turn.js'
import type { Agent } from '../domain/agent.js'
import { type AgentPathEntry, pathEntry } from '../domain/agent-path.js'
import { isoTimestamp } from '../domain/iso-timestamp.js'
import type { Message, Session, SessionErrorRecord, SessionMetadata } from '../domain/session.js'
import { transition, withState } from '../domain/session-state-machine.js'
import { applySharedContextChanges } from '../domain/shared-context.js'
import { storableText } from '../domain/storable-text.js'
import { supportsHumanTransfer } from '../ports/connector.js'
import type { Integration, JobLease } from '../ports/storage.js'
import { blockPending } from './block-pending.js'
import type { DeliveryService } from './deliver-outbox.js'
import { addHumanTransfer, type HumanTransferService, type HumanTransferTicket } from './human-transfer.js'
import { emitSafely, listening, type RuntimeContext } from './runtime-context.js'
import { updateSession } from './update-session.js'

/** What leaves after a turn's commit: replies through the outbox, then a transfer to a human. */
export interface OutgoingServices {
  readonly delivery: DeliveryService
  readonly transfers: HumanTransferService
}

/** Thrown inside the commit when the job's lease was taken over: nothing of the turn lands. */
export class LeaseLost extends Error {
  override readonly name = 'LeaseLost'
}

function mergeOutcome(
  current: Session,
  started: Session,
  outcome: TurnOutcome,
  now: Date,
  silenced: boolean,
): Session {
  // The turn's agent change (routing, handoffs and their path entries) stands only if nobody
  // reassigned the session meanwhile, not even back to the agent it started with (every reassign
  // adds to the path, which only grows), and nobody paused or closed it: a paused session keeps
  // its activeAgentId and its resume returns to that agent (spec), a closed one changes no more.
  const agentChanges = !silenced && current.metadata.agentPath.length === started.metadata.agentPath.length
  const metadata = current.metadata
  const agentPath =
    agentChanges && outcome.pathEntries.length > 0
      ? [...metadata.agentPath, ...outcome.pathEntries]
      : metadata.agentPath
  const sharedContext = applySharedContextChanges(metadata.sharedContext, outcome)
  const routing = agentChanges && outcome.routing !== undefined ? outcome.routing : metadata.routing
  const errors = outcome.errors.length === 0 ? metadata.errors : [...metadata.errors, ...outcome.errors]
  // The session and its metadata are spelled out rather than spread: both are stored records, and
  // V8 copies a spread of a frozen object on its slow path, several times the cost of a literal.
  // A turn that only replied changes none of the metadata: the stored one is kept as it is, which
  // the save then neither copies nor freezes again.
  let nextMetadata: SessionMetadata = metadata
  if (
    agentPath !== metadata.agentPath ||
    sharedContext !== metadata.sharedContext ||
    routing !== metadata.routing ||
    errors !== metadata.errors
  ) {
    const changed: { -readonly [Key in keyof SessionMetadata]: SessionMetadata[Key] } = {
      agentPath,
      sharedContext,
      errors,
    }
    if (routing !== undefined) changed.routing = routing
    if (metadata.pauses !== undefined) changed.pauses = metadata.pauses
    nextMetadata = changed
  }
  const next: { -readonly [Key in keyof Session]: Session[Key] } = {
    id: current.id,
    companyId: current.companyId,
    integrationId: current.integrationId,
    customer: current.customer,
    state: current.state,
    activeAgentId: agentChanges ? outcome.activeAgentId : current.activeAgentId,
    entryAgentId: current.entryAgentId,
    metadata: nextMetadata,
    createdAt: current.createdAt,
    updatedAt: isoTimestamp(now),
    version: current.version,
  }
  if (current.pauseState !== undefined) next.pauseState = current.pauseState
  return next
}

/**
 * What the process that committed a job knows of it as committed (a new session's first message,
 * its entry agent and integration): the turn starts from it instead of reading it again. Anything
 * that changed since, a pause say, is found when the turn commits, as for a change during the turn.
 */
export interface KnownJob {
  readonly session: Session
  readonly message: Message
  readonly agent: Agent
  readonly integration: Integration
  /** The session's messages before this one, oldest first, at most the history window. */
  readonly priorMessages: readonly Message[]
}

/** The job's session, message, active agent, integration and history, as stored now. */
async function readJob(
  context: RuntimeContext,
  lease: JobLease,
): Promise<
  (Omit<KnownJob, 'agent' | 'integration'> & { agent: Agent | null; integration: Integration | null }) | null
> {
  const { storage } = context
  // Reads that do not depend on each other start together: a storage that pipelines or pools
  // statements answers each group in one round trip.
  const [session, message] = await Promise.all([
    storage.sessions.get({ id: lease.sessionId }),
    storage.messages.get({ id: lease.messageId }),
  ])
  if (session === null || message === null || session.state !== 'ongoing') return null
  const [agent, integration, priorMessages] = await Promise.all([
    storage.agents.get({ companyId: session.companyId, id: session.activeAgentId }),
    storage.integrations.get({ id: session.integrationId }),
    storage.messages.history({
      sessionId: session.id,
      currentSequence: message.sequence,
      limit: MAX_HISTORY_WINDOW,
    }),
  ])
  return { session, message, agent, integration, priorMessages }
}

/**
 * One job: answer one customer message. The turn runs outside any transaction; its results, the
 * job's completion (fenced by the lease token) and the outgoing messages commit together. Replies
 * are sent after the commit; a pause someone else made meanwhile blocks them.
 */
export async function processJob(
  context: RuntimeContext,
  { delivery, transfers }: OutgoingServices,
  lease: JobLease,
  known?: KnownJob,
): Promise<void> {
  const { storage } = context
  const balance = context.enforceCredits ? storage.billing.getBalance({ companyId: lease.companyId }) : null
  // A job skipped below never waits for the balance; its failure must not go unheard then.
  balance?.catch(() => undefined)
  const job = known ?? (await readJob(context, lease))
  if (job === null) return skip(context, lease)
  const { session, message, integration, priorMessages } = job
  const active = job.agent
  const loadAgent = createAgentLoader(context, session.companyId, active ?? session.activeAgentId)
  let activeAgent = active
  /** The path entry of the entry agent taking over from an active agent that was deleted. */
  let takeover: AgentPathEntry | undefined
  if (activeAgent === null) {
    // Deleting an agent that still holds conversations is allowed (CONTRACT §4 refuses only entry
    // agents and targets); its customers are answered by the integration's entry agent instead.
    const entryAgentId = integration?.entryAgentId
    activeAgent = entryAgentId === undefined ? null : await loadAgent(entryAgentId)
    if (activeAgent !== null) {
      takeover = pathEntry(activeAgent, 'manual', context.clock.now(), {
        reason: `agent ${session.activeAgentId} was deleted`,
      })
    }
  }
  if (activeAgent === null || activeAgent.kind === 'human') return skip(context, lease)

  if (balance !== null && (await balance) <= 0) return recordCreditsExhausted(context, lease, activeAgent.id)

  const connector = integration === null ? undefined : context.connectors.get(integration.type)
  const firstCustomerMessage =
    session.metadata.routing === undefined && !priorMessages.some((prior) => prior.role === 'customer')

  const event = { companyId: session.companyId, sessionId: session.id }
  if (listening(context, 'turn-started')) {
    emitSafely(context, 'turn-started', { ...event, messageId: message.id, agentId: activeAgent.id })
  }

  const turn = await runTurn({
    companyId: session.companyId,
    sessionId: session.id,
    activeAgent,
    sharedContext: session.metadata.sharedContext,
    message,
    priorMessages,
    firstCustomerMessage,
    humanTransferSupported: connector !== undefined && supportsHumanTransfer(connector),
    model: context.model,
    tools: context.tools,
    knowledge: context.knowledge,
    loadAgent,
    now() {
      return context.clock.now()
    },
  })

  const outcome = takeover === undefined ? turn : { ...turn, pathEntries: [takeover, ...turn.pathEntries] }

  // From the session the turn started from: the save fails if anyone changed it meanwhile, and
  // the next attempt reads it again, so a turn's commit reads nothing in the common case.
  const committed = await updateSession(storage, { sessionId: session.id, known: session }, (current, tx) => {
    const now = context.clock.now()
    // Someone else paused or closed the session while the agents worked, even if it was resumed
    // since: their replies stay unsent (CONTRACT §8), and the agent stays the one it was paused with.
    const silenced = current.state !== 'ongoing' || current.metadata.pauses !== session.metadata.pauses
    let next = mergeOutcome(current, session, outcome, now, silenced)
    let transferring = false
    if (
      !silenced &&
      outcome.humanTransfer !== undefined &&
      next.activeAgentId === outcome.humanTransfer.agentId
    ) {
      const paused = transition(next, { type: 'transfer', at: now })
      if (paused.isOk()) {
        next = withState(next, paused.value)
        transferring = true
      }
    }
    // Every write of the turn starts now, in this order, without waiting for the one before: the
    // ids are ours, so a storage that pipelines statements sends them, the session's save and the
    // charge in one round trip. A lease taken over fails the transaction, taking them all back.
    const completing = tx.jobs.complete({ jobId: lease.jobId, token: lease.token })
    // Paused for the human: earlier replies that have not left stay unsent, and no longer hold
    // back this turn's announcement, which goes out before the transfer.
    const blocking = transferring ? blockPending(tx, current.id, ['agent', 'system'], now) : undefined
    const writes: Promise<unknown>[] = []
    const inserting: Promise<Message>[] = []
    const outgoingIds: string[] = []
    for (const outgoing of outcome.outgoing) {
      const id = context.ids.uuid()
      outgoingIds.push(id)
      inserting.push(
        tx.messages.insert({
          id,
          companyId: current.companyId,
          sessionId: current.id,
          integrationId: current.integrationId,
          role: outgoing.role,
          text: storableText(outgoing.text),
          agentId: outgoing.agentId,
          at: now,
          // Back on the channel of the message answered, wherever the customer wrote from since;
          // undefined when it has none, which every storage stores as no channel. Not spread from
          // `channelOf`: a spread is a property copy of its own, per reply.
          channelId: message.channelId,
          transport: message.transport,
          delivery: silenced ? 'blocked' : 'pending',
        }),
      )
      if (!silenced) {
        writes.push(
          tx.outbox.add({
            messageId: id,
            sessionId: current.id,
            companyId: current.companyId,
            integrationId: current.integrationId,
            availableAt: now,
          }),
        )
      }
    }
    // Kept until it is made, so a process that dies after this commit leaves it to another; it
    // follows this turn's messages, the announcement, out.
    let transfer: HumanTransferTicket | undefined
    if (transferring && outcome.humanTransfer !== undefined) {
      const added = addHumanTransfer(context, tx, next, outcome.humanTransfer, outgoingIds)
      transfer = added.ticket
      writes.push(added.adding)
    }
    const value = { stored: [] as Message[], silenced, transfer }
    const replies = inserting.length
    if (blocking !== undefined) writes.push(blocking)
    return {
      session: next,
      value,
      // The completion, the replies, then the other writes.
      pending: [completing, ...inserting, ...writes],
      written: (results) => {
        if (results[0] !== true) throw new LeaseLost()
        value.stored = results.slice(1, 1 + replies) as Message[]
      },
      // Charged last: every turn of the company updates its one balance row, which stays locked
      // from this write to COMMIT, so the company's other turns wait only for this commit.
      beforeCommit: (last) =>
        outcome.usage.map((call) =>
          last.billing.recordUsage({
            id: context.ids.uuid(),
            companyId: current.companyId,
            sessionId: current.id,
            model: call.model,
            inputTokens: call.usage.inputTokens,
            outputTokens: call.usage.outputTokens,
            costUsd: context.prices.cost(call.model, call.usage),
            at: now,
          }),
        ),
    }
  })
  if (committed.isErr()) return

  const { session: saved, previous, value } = committed.value
  announceOutcome(context, saved, previous, outcome, value.stored)
  warnOfModelFailures(context, saved.id, outcome.errors)
  const deliverable = value.silenced ? [] : value.stored.map((reply) => reply.id)
  if (value.transfer !== undefined) {
    // The announcement reaches the customer before the conversation leaves for the human queue.
    await transfers.makeAfter(value.transfer)
  } else {
    delivery.deliverSoon(
      deliverable,
      integration === null ? undefined : { session: saved, integration, messages: value.stored },
    )
  }
  if (listening(context, 'turn-completed')) {
    emitSafely(context, 'turn-completed', {
      ...event,
      messageId: message.id,
      replied: outcome.outgoing.some((outgoing) => outgoing.role === 'agent') && !value.silenced,
    })
  }
}

/** Nothing to answer: the job is done without a turn. */
async function skip(context: RuntimeContext, lease: JobLease): Promise<void> {
  await context.storage.transaction(async (tx) => {
    if (!(await tx.jobs.complete({ jobId: lease.jobId, token: lease.token }))) throw new LeaseLost()
  })
}

/**
 * Loads each agent of the company once per job, however often the turn asks for it. `loaded` is
 * the agent the job read already, or the id of one it found missing.
 */
function createAgentLoader(
  context: RuntimeContext,
  companyId: number,
  loaded: Agent | number,
): (id: number) => Promise<Agent | null> {
  const agents = new Map<number, Agent | null>()
  if (typeof loaded === 'number') agents.set(loaded, null)
  else agents.set(loaded.id, loaded)
  return async (id) => {
    if (!agents.has(id)) agents.set(id, await context.storage.agents.get({ companyId, id }))
    return agents.get(id) ?? null
  }
}

/** No credits left: the message stays stored, nothing answers, and the session says why. */
async function recordCreditsExhausted(
  context: RuntimeContext,
  lease: JobLease,
  agentId: number,
): Promise<void> {
  const error: SessionErrorRecord = {
    code: 'CREDITS_EXHAUSTED',
    message: 'the company has no credits left; agents stopped replying',
    agentId,
    at: context.clock.now().toISOString(),
  }
  const recorded = await updateSession(
    context.storage,
    { sessionId: lease.sessionId },
    async (current, tx) => {
      if (!(await tx.jobs.complete({ jobId: lease.jobId, token: lease.token }))) throw new LeaseLost()
      return {
        session: {
          ...current,
          metadata: { ...current.metadata, errors: [...current.metadata.errors, error] },
        },
        value: null,
      }
    },
  )
  if (recorded.isOk()) {
    emitSafely(context, 'session-error-recorded', {
      companyId: recorded.value.session.companyId,
      sessionId: lease.sessionId,
      error,
    })
  }
}

/**
 * Besides the session's errors and their event: an app listening to neither (the reference server)
 * still learns of a wrong API key or an outage, which otherwise shows only as fallback replies.
 * After the commit, so a turn redone after a lost lease is not told twice.
 */
function warnOfModelFailures(
  context: RuntimeContext,
  sessionId: string,
  errors: readonly SessionErrorRecord[],
): void {
  for (const error of errors) {
    if (error.code !== 'MODEL_UNAVAILABLE') continue
    context.logger.warn(
      { sessionId, agentId: error.agentId, error: error.message },
      'a model call failed for good; recorded on the session as MODEL_UNAVAILABLE',
    )
  }
}

function announceOutcome(
  context: RuntimeContext,
  saved: Session,
  previous: Session,
  outcome: TurnOutcome,
  stored: readonly Message[],
): void {
  const event = { companyId: saved.companyId, sessionId: saved.id }
  if (listening(context, 'llm-usage')) {
    for (const usage of outcome.usage) emitSafely(context, 'llm-usage', { ...event, ...usage })
  }
  if (listening(context, 'handoff-rejected')) {
    for (const rejected of outcome.rejectedHandoffs)
      emitSafely(context, 'handoff-rejected', { ...event, ...rejected })
  }
  if (listening(context, 'session-error-recorded')) {
    for (const error of outcome.errors as SessionErrorRecord[])
      emitSafely(context, 'session-error-recorded', { ...event, error })
  }
  if (saved.activeAgentId !== previous.activeAgentId && listening(context, 'agent-changed')) {
    const last = outcome.pathEntries[outcome.pathEntries.length - 1]
    emitSafely(context, 'agent-changed', {
      ...event,
      fromAgentId: previous.activeAgentId,
      toAgentId: saved.activeAgentId,
      via: last?.via ?? 'handoff_tool',
    })
  }
  if (saved.state !== previous.state && listening(context, 'session-state-changed')) {
    emitSafely(context, 'session-state-changed', {
      ...event,
      from: previous.state,
      to: saved.state,
      version: saved.version,
    })
  }
  if (listening(context, 'message-created')) {
    for (const message of stored) emitSafely(context, 'message-created', { ...event, message })
  }
}
