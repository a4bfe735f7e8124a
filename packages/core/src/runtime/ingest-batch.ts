import { err, ok, type Result } from 'neverthrow'
import type { Agent } from '../domain/agent.js'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Message, Session } from '../domain/session.js'
import type { Integration, LeasableJob, NewMessage, NewWebhookLog, Repositories } from '../ports/storage.js'
import type { HandOff } from './hand-off.js'
import {
  announceReceived,
  assertIntegrationOf,
  customerMessage,
  type InboundMessage,
  type IngestDecision,
  type IngestOptions,
  type IngestResult,
  sameIntegration,
} from './ingest.js'
import { type FoundSession, followCustomer, openNewSession } from './open-session.js'
import type { KnownJob } from './process-job.js'
import type { RuntimeContext } from './runtime-context.js'

export interface IngestRequest {
  readonly inbound: InboundMessage
  readonly options: IngestOptions
}

export type IngestOutcome = Result<IngestResult, SwitchboardError>

/** The same message of one integration: what external ids are unique within. */
const keyOf = (integrationId: string, id: string): string => `${integrationId.length}:${integrationId}${id}`

/**
 * `ingest` for several messages in one transaction, with a handful of statements whatever their
 * number: the duplicates and the open sessions are read for all of them at once, the messages,
 * jobs and webhook log entries written at once. The outcome of each is what `ingest` would have
 * answered had they come one after the other, in the order given. Throws when the transaction
 * fails, with nothing stored; the caller then ingests them one by one. With `handOff`, the first
 * job of each session that has no earlier one unfinished is enqueued leased to one of its workers,
 * which the caller starts once this resolves (`handOff.committed()`), after `message-received`.
 */
export async function ingestMany(
  context: RuntimeContext,
  requests: readonly IngestRequest[],
  handOff?: HandOff,
): Promise<IngestOutcome[]> {
  const outcomes: IngestOutcome[] = new Array(requests.length)
  const integrations = await integrationsOf(context, requests)
  const admitted: number[] = []
  requests.forEach(({ inbound }, index) => {
    const integration = integrations.get(inbound.integrationId)
    if (integration === undefined || integration === null) {
      outcomes[index] = err(switchboardError('NOT_FOUND', 'integration not found'))
    } else if (!integration.active) {
      outcomes[index] = err(switchboardError('INTEGRATION_INACTIVE', 'the integration is not active'))
    } else {
      admitted.push(index)
    }
  })
  if (admitted.length === 0) return outcomes

  const stored = await context.storage.transaction(async (tx) => {
    handOff?.attempt()
    const results = new Map<number, IngestOutcome>()
    /** Sessions this transaction opens: their first message's turn needs nothing read back. */
    const openedHere = new Set<string>()
    const earlier = await readEarlier(tx, requests, admitted, integrations)
    // Rare: the batch is then stored message by message, and each caller whose copy is old is
    // told so (CONFLICT) while the others go on.
    if (earlier.integrationChanged) throw new Error('an integration changed since its caller read it')
    const sessions = earlier.sessions
    /** Messages to insert, and for each the request it stores and its session at that point. */
    const planned: NewMessage[] = []
    const plannedFor: number[] = []
    const plannedIn: Session[] = []
    /** An external id met earlier in this batch: the later request is its duplicate. */
    const firstOfExternalId = new Map<string, number>()
    const duplicateOf = new Map<number, number>()

    const opening = await openSessionsOfNewCustomers(context, tx, requests, admitted, integrations, earlier)

    for (const index of admitted) {
      const { inbound } = requests[index]!
      const integration = integrations.get(inbound.integrationId)!
      if (inbound.externalId !== undefined) {
        const key = keyOf(integration.id, inbound.externalId)
        const existing = earlier.duplicates.get(key)
        const session = existing === undefined ? undefined : earlier.sessionsById.get(existing.sessionId)
        if (existing !== undefined && session !== undefined) {
          results.set(index, ok({ session, message: existing, duplicate: true, queued: false }))
          continue
        }
        const first = firstOfExternalId.get(key)
        if (first !== undefined) {
          duplicateOf.set(index, first)
          continue
        }
        firstOfExternalId.set(key, planned.length)
      }
      const customerKey = keyOf(integration.id, inbound.clientId)
      const opener = opening.get(customerKey)
      const now = opener?.index === index ? opener.now : context.clock.now()
      const open = sessions.get(customerKey)
      let session: Session
      if (open === undefined) {
        // Opened above for the customer's first message; opened now only for a message that became
        // the first of its customer after that one was refused.
        const opened =
          opener === undefined || opener.index !== index
            ? await openNewSession(
                context,
                tx,
                integration,
                inbound,
                now,
                earlier.entryAgents.get(integration.id),
              )
            : opener.opened
        if (opened.isErr()) {
          results.set(index, err(opened.error))
          if (inbound.externalId !== undefined)
            firstOfExternalId.delete(keyOf(integration.id, inbound.externalId))
          continue
        }
        session = opened.value.session
        openedHere.add(session.id)
      } else {
        session = await followCustomer(tx, open, inbound, now)
      }
      sessions.set(customerKey, session)
      planned.push(customerMessage(context, session, inbound, now))
      plannedFor.push(index)
      plannedIn.push(session)
    }

    // Whether each message gets a job depends on its session's active agent. The entry agents,
    // read with the earlier rows, are those of new sessions and of most open ones; the others are
    // read now, before anything is written.
    const agents = new Map<string, Agent | null>()
    const agentKey = (session: Session) => `${session.companyId}:${session.activeAgentId}`
    for (const agent of earlier.entryAgents.values()) {
      if (agent !== null) agents.set(`${agent.companyId}:${agent.id}`, agent)
    }
    const agentReads: Promise<void>[] = []
    for (const session of plannedIn) {
      const key = agentKey(session)
      if (session.state !== 'ongoing' || agents.has(key)) continue
      agents.set(key, null)
      agentReads.push(
        tx.agents.get({ companyId: session.companyId, id: session.activeAgentId }).then((agent) => {
          agents.set(key, agent)
        }),
      )
    }
    if (agentReads.length > 0) await Promise.all(agentReads)

    const decisions = new Map<number, IngestDecision>()
    const jobs: LeasableJob[] = []
    /** The message of each job, by its position among the planned ones. */
    const jobPositions: number[] = []
    /** Sessions whose first job of the batch is planned: only that one can be handed over. */
    const sessionsWithJob = new Set<string>()
    let leasing = false
    for (let position = 0; position < planned.length; position++) {
      const message = planned[position]!
      const session = plannedIn[position]!
      let queued = false
      if (session.state === 'ongoing') {
        const active = agents.get(agentKey(session))
        // Null: the active agent was deleted, and the job hands the session to the entry agent.
        if (active !== undefined && (active === null || active.kind !== 'human')) {
          const token = sessionsWithJob.has(session.id) ? undefined : handOff?.token()
          sessionsWithJob.add(session.id)
          if (token !== undefined) leasing = true
          jobs.push({
            companyId: session.companyId,
            sessionId: session.id,
            messageId: message.id,
            availableAt: message.at,
            token,
          })
          jobPositions.push(position)
          queued = true
        }
      }
      decisions.set(plannedFor[position]!, { session, messageId: message.id, duplicate: false, queued })
    }
    for (const [index, first] of duplicateOf) {
      const original = decisions.get(plannedFor[first]!)!
      decisions.set(index, { ...original, duplicate: true, queued: false })
    }
    for (const [index, result] of results) {
      if (!result.isOk()) continue
      const { session, message, duplicate, queued } = result.value
      decisions.set(index, { session, messageId: message.id, duplicate, queued })
    }
    const logs: NewWebhookLog[] = []
    for (const index of admitted) {
      const decision = decisions.get(index)
      const entry = requests[index]!.options.webhookLog
      if (decision !== undefined && entry !== undefined) logs.push(entry(decision))
    }

    // Started together: the ids are ours, so a storage that pipelines statements writes the
    // messages, their jobs and their log entries in one round trip.
    // With a worker kept for a session's first job, it is enqueued leased to that worker.
    const writing = Promise.all([
      // Only into sessions still open: one closed since it was read fails the batch, whose messages
      // are then stored one by one, and that customer's opens a new session.
      tx.messages.insertMany(planned, { intoOpenSession: true }),
      leasing
        ? tx.jobs.enqueueManyLeased(jobs, { now: context.clock.now(), leaseMs: context.leaseMs })
        : tx.jobs.enqueueMany(jobs),
      tx.webhookLogs.addMany(logs),
    ])
    // The batch's last calls: a storage may send its COMMIT with them, a round trip fewer. Nothing
    // below fails but they.
    tx.noMoreCalls?.()
    const [messages, leases] = await writing
    if (leases !== undefined) {
      leases.forEach((lease, index) => {
        if (lease === null) return
        const position = jobPositions[index]!
        const session = plannedIn[position]!
        const inbound = requests[plannedFor[position]!]!.inbound
        // A session opened here: its first job's message is its first, and the entry agent its
        // active agent. It is known as the batch's last message of the customer left it.
        const known: KnownJob | undefined = openedHere.has(session.id)
          ? {
              session: sessions.get(keyOf(inbound.integrationId, inbound.clientId))!,
              message: messages[position]!,
              agent: earlier.entryAgents.get(inbound.integrationId)!,
              integration: integrations.get(inbound.integrationId)!,
              priorMessages: [],
            }
          : undefined
        handOff?.leased(lease, known)
      })
    }
    for (let position = 0; position < messages.length; position++) {
      const index = plannedFor[position]!
      const { session, queued } = decisions.get(index)!
      results.set(index, ok({ session, message: messages[position]!, duplicate: false, queued }))
    }
    for (const [index, first] of duplicateOf) {
      const original = results.get(plannedFor[first]!)!._unsafeUnwrap()
      results.set(
        index,
        ok({ session: original.session, message: original.message, duplicate: true, queued: false }),
      )
    }
    return results
  })

  for (const index of admitted) {
    const outcome = stored.get(index)!
    outcomes[index] = outcome
    announceReceived(context, outcome)
  }
  return outcomes
}

/** The integration of each request: as its caller gave it, or read once per id. */
async function integrationsOf(
  context: RuntimeContext,
  requests: readonly IngestRequest[],
): Promise<Map<string, Integration | null>> {
  const integrations = new Map<string, Integration | null>()
  for (const { inbound, options } of requests) {
    if (options.integration === undefined) continue
    assertIntegrationOf(inbound, options.integration)
    integrations.set(inbound.integrationId, options.integration)
  }
  for (const { inbound } of requests) {
    if (integrations.has(inbound.integrationId)) continue
    integrations.set(
      inbound.integrationId,
      await context.storage.integrations.get({ id: inbound.integrationId }),
    )
  }
  return integrations
}

interface Earlier {
  /** Messages already stored under an external id of the batch, by integration and external id. */
  readonly duplicates: Map<string, Message>
  /** The sessions of those messages, by id. */
  readonly sessionsById: Map<string, Session>
  /** The open sessions of the batch's customers, by integration and client id. */
  readonly sessions: Map<string, Session>
  /** The entry agent of each integration of the batch, by integration id; null when it is gone. */
  readonly entryAgents: Map<string, Agent | null>
  /** An integration a caller gave is no longer the stored one. */
  integrationChanged: boolean
}

/**
 * What the storage holds already for the batch's customers and external ids, and the entry agent
 * that opens new sessions: three reads per integration, started together.
 */
async function readEarlier(
  tx: Repositories,
  requests: readonly IngestRequest[],
  admitted: readonly number[],
  integrations: ReadonlyMap<string, Integration | null>,
): Promise<Earlier> {
  const byIntegration = new Map<string, { externalIds: Set<string>; clientIds: Set<string> }>()
  for (const index of admitted) {
    const { inbound } = requests[index]!
    let wanted = byIntegration.get(inbound.integrationId)
    if (wanted === undefined) {
      wanted = { externalIds: new Set(), clientIds: new Set() }
      byIntegration.set(inbound.integrationId, wanted)
    }
    if (inbound.externalId !== undefined) wanted.externalIds.add(inbound.externalId)
    wanted.clientIds.add(inbound.clientId)
  }
  const earlier: Earlier = {
    duplicates: new Map(),
    sessionsById: new Map(),
    sessions: new Map(),
    entryAgents: new Map(),
    integrationChanged: false,
  }
  // Started together: a storage that can pipeline statements answers them in one round trip.
  const reads: Promise<void>[] = []
  // Every caller's copy is checked: two callers may hold different copies of one integration.
  const copies = admitted.flatMap((index) => requests[index]!.options.integration ?? [])
  if (copies.length > 0) {
    const ids = [...new Set(copies.map((copy) => copy.id))]
    reads.push(
      tx.integrations.getMany({ ids }).then((stored) => {
        const byId = new Map(stored.map((integration) => [integration.id, integration]))
        earlier.integrationChanged = copies.some((copy) => !sameIntegration(copy, byId.get(copy.id) ?? null))
      }),
    )
  }
  for (const [integrationId, wanted] of byIntegration) {
    if (wanted.externalIds.size > 0) {
      reads.push(
        tx.messages
          .findByExternalIds({ integrationId, externalIds: [...wanted.externalIds] })
          .then((found) => {
            for (const message of found)
              earlier.duplicates.set(keyOf(integrationId, message.externalId!), message)
          }),
      )
    }
    const integration = integrations.get(integrationId)!
    reads.push(
      tx.agents.get({ companyId: integration.companyId, id: integration.entryAgentId }).then((agent) => {
        earlier.entryAgents.set(integrationId, agent)
      }),
    )
    reads.push(
      tx.sessions.findOpenMany({ integrationId, clientIds: [...wanted.clientIds] }).then((open) => {
        for (const session of open) {
          earlier.sessions.set(keyOf(integrationId, session.customer.clientId), session)
          earlier.sessionsById.set(session.id, session)
        }
      }),
    )
  }
  await Promise.all(reads)
  for (const message of earlier.duplicates.values()) {
    if (earlier.sessionsById.has(message.sessionId)) continue
    // A repeat of a message whose session has closed since: rare, so read one by one.
    const session = await tx.sessions.get({ id: message.sessionId })
    if (session !== null) earlier.sessionsById.set(session.id, session)
  }
  return earlier
}

interface Opening {
  /** The request whose message opens the session: its customer's first in the batch. */
  readonly index: number
  readonly now: Date
  readonly opened: Result<FoundSession, SwitchboardError>
}

/**
 * A session for each customer of the batch who has none open, all opened at once: a storage that
 * pipelines statements creates them in one round trip instead of one each. Duplicates open none.
 */
async function openSessionsOfNewCustomers(
  context: RuntimeContext,
  tx: Repositories,
  requests: readonly IngestRequest[],
  admitted: readonly number[],
  integrations: ReadonlyMap<string, Integration | null>,
  earlier: Earlier,
): Promise<Map<string, Opening>> {
  const firsts = new Map<string, number>()
  const externalIds = new Set<string>()
  for (const index of admitted) {
    const { inbound } = requests[index]!
    if (inbound.externalId !== undefined) {
      const key = keyOf(inbound.integrationId, inbound.externalId)
      const existing = earlier.duplicates.get(key)
      if (existing !== undefined && earlier.sessionsById.has(existing.sessionId)) continue
      if (externalIds.has(key)) continue
      externalIds.add(key)
    }
    const customerKey = keyOf(inbound.integrationId, inbound.clientId)
    if (!earlier.sessions.has(customerKey) && !firsts.has(customerKey)) firsts.set(customerKey, index)
  }
  const opening = new Map<string, Opening>()
  await Promise.all(
    [...firsts].map(async ([customerKey, index]) => {
      const { inbound } = requests[index]!
      const integration = integrations.get(inbound.integrationId)!
      const now = context.clock.now()
      const entryAgent = earlier.entryAgents.get(integration.id)
      const opened = await openNewSession(context, tx, integration, inbound, now, entryAgent)
      opening.set(customerKey, { index, now, opened })
    }),
  )
  return opening
}
