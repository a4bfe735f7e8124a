import fc from 'fast-check'
import type { Result } from 'neverthrow'
import { describe, expect, it } from 'vitest'
import { agentInputSchema, DEFAULT_FALLBACK_REPLY } from '../src/domain/agent.js'
import type { SwitchboardError } from '../src/domain/errors.js'
import type { Message, Session } from '../src/domain/session.js'
import { createMemoryKnowledgeIndex } from '../src/knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../src/memory/memory-storage.js'
import type { HumanTransferOutcome, SendOutcome } from '../src/ports/connector.js'
import type { Storage } from '../src/ports/storage.js'
import { createSwitchboard, type Switchboard } from '../src/runtime/create-switchboard.js'
import type { IngestResult } from '../src/runtime/ingest.js'
import {
  createManualClock,
  createRecordingConnector,
  type ManualClock,
  type RecordingConnector,
} from '../src/testing/index.js'
import {
  createRuleModel,
  factKey,
  factValue,
  failure,
  handoffReason,
  MESSAGE_TAGS,
  type MessageTag,
  messageText,
  type RuleModel,
  replyTo,
} from './support/rule-model.js'
import {
  type AgentKey,
  type Delivered,
  type Operation,
  type OperationResult,
  SessionWorlds,
  type StateName,
  type TurnObservation,
} from './support/session-worlds.js'

const COMPANY_ID = 1
/** Sequences per run of the suite; `MODEL_TEST_RUNS` explores further (about 15 ms a sequence). */
const RUNS = Number(process.env.MODEL_TEST_RUNS ?? 300)
const MAX_COMMANDS = Number(process.env.MODEL_TEST_MAX_COMMANDS ?? 20)
const CUSTOMERS = ['ann', 'bob'] as const
/** The agents' `messageHistoryDepth`: the default. */
const HISTORY_DEPTH = 15
/** What each AI agent says when it hands a conversation on. */
const ANNOUNCEMENTS = ['A passes you on.', 'B passes you on.']
type Customer = (typeof CUSTOMERS)[number]

interface Real {
  readonly scheduler: fc.Scheduler
  readonly clock: ManualClock
  /** Two processes on one storage (CONTRACT §1): any of them takes any job, claims any delivery. */
  readonly processes: [Switchboard, Switchboard]
  /** A new process on the same storage. */
  readonly start: () => Switchboard
  /** Processes stopped, whose turns may still be finishing. */
  readonly stopped: Switchboard[]
  /** How many turns committed for each message (`turn-completed`). */
  readonly commits: Map<string, number>
  readonly storage: Storage
  readonly connector: RecordingConnector
  readonly model: RuleModel
  readonly integrationId: string
  readonly agentIds: Readonly<Record<AgentKey, number>>
  /** Sends under way, by session. */
  readonly sending: Map<string, number>
  /** Sessions an operator paused or closed, and how many sends may still start for each. */
  readonly silenced: Map<string, Silence>
  /** What the channel saw that the contract rules out. */
  readonly problems: string[]
}

/** A pause or close: the roles it silences, and how many of their sends may still start. */
interface Silence {
  allowance: number
  readonly roles: readonly string[]
  readonly by: string
}

interface StoredItem {
  readonly number: number
  readonly tag: MessageTag
  readonly text: string
  readonly messageId: string
  readonly queued: boolean
}

interface SessionModel {
  readonly id: string
  readonly worlds: SessionWorlds
  readonly items: StoredItem[]
  /** An operator's messages, and whether a close came after each. */
  readonly operatorMessages: { text: string; closedAfter: boolean }[]
  /** Reassigns to the human agent: each calls the channel's transfer. */
  reassignedToHuman: number
  /** The notes of the resumes that succeeded: journey steps of the SCC, whatever turns commit. */
  readonly notes: string[]
}

interface Model {
  nextNumber: number
  /** A process was stopped: a turn it did not commit is redone, asking the model again. */
  restarted: boolean
  /** The channel failed sends already: once per sequence, so no message fails for good. */
  sendsFailed: boolean
  readonly sessions: Map<Customer, SessionModel[]>
  /** Every external id stored, with the message and session it was stored as. */
  readonly externalIds: Map<string, { messageId: string; sessionId: string }>
  /** Every session id ever answered, of any customer: a new session must be new. */
  readonly sessionIds: Set<string>
}

const handsOver = (tag: MessageTag) => tag === 'toA' || tag === 'toB'

const agentKey = (real: Real, id: number): AgentKey => {
  const found = (Object.keys(real.agentIds) as AgentKey[]).find((key) => real.agentIds[key] === id)
  if (found === undefined) throw new Error(`agent ${id} is none of the test's agents`)
  return found
}

/**
 * The operation's own work; with `letGo`, held answers and deliveries the scheduler picks go on
 * while it runs (its transaction then meets a turn's commit), otherwise they wait for it.
 */
const whileRunning = <T>(real: Real, letGo: boolean, work: Promise<T>): Promise<T> =>
  letGo ? real.scheduler.waitFor(work) : work

const currentSession = (model: Model, customer: Customer): SessionModel | undefined =>
  model.sessions.get(customer)?.at(-1)

function openSessionModel(model: Model, customer: Customer, id: string): SessionModel {
  const opened: SessionModel = {
    id,
    worlds: new SessionWorlds(id),
    items: [],
    operatorMessages: [],
    reassignedToHuman: 0,
    notes: [],
  }
  model.sessionIds.add(id)
  model.sessions.set(customer, [...(model.sessions.get(customer) ?? []), opened])
  return opened
}

/**
 * A runtime on in-memory storage whose model answers and channel sends are held by the scheduler:
 * fast-check decides when each turn's model call returns and each delivery goes out, relative to
 * the customers' messages and the operators' operations.
 */
async function createReal(scheduler: fc.Scheduler): Promise<Real> {
  const storage = createMemoryStorage()
  const clock = createManualClock()
  const at = clock.now()
  const create = async (name: string, kind: 'ai' | 'human') =>
    (await storage.agents.create({ ...agentInputSchema.parse({ name, kind }), companyId: COMPANY_ID, at })).id
  const agentIds = { A: await create('A', 'ai'), B: await create('B', 'ai'), H: await create('H', 'human') }
  for (const [from, other, announcement] of [
    [agentIds.A, agentIds.B, ANNOUNCEMENTS[0]],
    [agentIds.B, agentIds.A, ANNOUNCEMENTS[1]],
  ] as const) {
    const { handoff } = agentInputSchema.pick({ handoff: true }).parse({
      handoff: { enabled: true, allowedTargets: [other, agentIds.H], handoffMessageTemplate: announcement },
    })
    await storage.agents.update({ companyId: COMPANY_ID, id: from, patch: { handoff }, at })
  }
  const connector = createRecordingConnector({ humanTransfer: true })
  const send = connector.send.bind(connector)
  const transfer = connector.transferToHuman!.bind(connector)
  const sending = new Map<string, number>()
  const silenced = new Map<string, Silence>()
  const problems: string[] = []
  const count = (sessionId: string, change: number) =>
    sending.set(sessionId, (sending.get(sessionId) ?? 0) + change)
  Object.assign(connector, {
    send(request: Parameters<typeof send>[0]): Promise<SendOutcome> {
      const { session, message } = request
      const silence = silenced.get(session.id)
      if (silence?.roles.includes(message.role)) {
        silence.allowance -= 1
        if (silence.allowance < 0)
          problems.push(`"${message.text}" left after the ${silence.by} of its session`)
      }
      count(session.id, 1)
      return scheduler
        .schedule(Promise.resolve(), `send "${message.text}"`)
        .then(() => send(request))
        .finally(() => count(session.id, -1))
    },
    async transferToHuman(request: Parameters<typeof transfer>[0]): Promise<HumanTransferOutcome> {
      // The turn's announcement reaches the customer before the conversation leaves (CONTRACT §8).
      const waiting = (await storage.messages.list({ sessionId: request.session.id, limit: 10_000 })).filter(
        (message) => message.role === 'system' && message.delivery === 'pending',
      )
      for (const message of waiting) problems.push(`a transfer to a human came before "${message.text}" left`)
      return transfer(request)
    },
  })
  const integration = await storage.integrations.create({
    companyId: COMPANY_ID,
    type: connector.type,
    name: 'model',
    active: true,
    entryAgentId: agentIds.A,
    config: {},
    webhookSecret: null,
    at,
  })
  const model = createRuleModel({
    aiAgents: { A: agentIds.A, B: agentIds.B },
    humanAgent: agentIds.H,
    hold: (label) => scheduler.schedule(Promise.resolve(), label),
  })
  let uuid = 0
  const ids = { uuid: () => `00000000-0000-4000-8000-${(++uuid).toString(16).padStart(12, '0')}` }
  const knowledge = createMemoryKnowledgeIndex()
  const commits = new Map<string, number>()
  const start = () => {
    const process = createSwitchboard({ storage, model, knowledge, connectors: [connector], clock, ids })
    process.events.on('turn-completed', ({ messageId }) => {
      commits.set(messageId, (commits.get(messageId) ?? 0) + 1)
    })
    return process
  }
  const processes: [Switchboard, Switchboard] = [start(), start()]
  return {
    scheduler,
    clock,
    processes,
    start,
    stopped: [],
    commits,
    storage,
    connector,
    model,
    integrationId: integration.id,
    agentIds,
    sending,
    silenced,
    problems,
  }
}

type ExternalId =
  | { readonly kind: 'none' }
  | { readonly kind: 'fresh' }
  /** One stored before, picked by index among them all (of any customer). */
  | { readonly kind: 'repeat'; readonly index: number }
  /** The previous message of the same send, sent at the same time. */
  | { readonly kind: 'same-as-previous' }

interface PlannedMessage {
  /** The process that receives it. */
  readonly process: 0 | 1
  readonly customer: Customer
  readonly tag: MessageTag
  readonly externalId: ExternalId
}

/** Customers write, one to three messages at once (a customer's burst, or two customers). */
class SendCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly messages: readonly PlannedMessage[],
    readonly letGo: boolean,
  ) {}

  check = () => true

  async run(model: Model, real: Real): Promise<void> {
    const known = [...model.externalIds.keys()]
    const planned: {
      process: 0 | 1
      customer: Customer
      tag: MessageTag
      number: number
      externalId?: string
    }[] = []
    for (const message of this.messages) {
      const number = model.nextNumber++
      const previous = planned.at(-1)?.externalId
      const externalId =
        message.externalId.kind === 'none'
          ? undefined
          : message.externalId.kind === 'repeat' && known.length > 0
            ? known[message.externalId.index % known.length]
            : message.externalId.kind === 'same-as-previous' && previous !== undefined
              ? previous
              : `x${number}`
      planned.push({
        process: message.process,
        customer: message.customer,
        tag: message.tag,
        number,
        externalId,
      })
    }
    const results = await whileRunning(
      real,
      this.letGo,
      Promise.all(
        planned.map(async (message) => {
          const result = await real.processes[message.process].ingest({
            integrationId: real.integrationId,
            clientId: message.customer,
            text: messageText(message.number, message.tag),
            ...(message.externalId === undefined ? {} : { externalId: message.externalId }),
          })
          if (result.isErr()) throw new Error(`ingest failed: ${result.error.code} ${result.error.message}`)
          return { ...message, result: result.value }
        }),
      ),
    )

    // Duplicates: one stored message per external id, answered with that message and its session.
    const stored = results.filter((sent) => !sent.result.duplicate)
    for (const sent of results) {
      if (sent.externalId === undefined) {
        expect(sent.result.duplicate, `m${sent.number} has no external id`).toBe(false)
        continue
      }
      const before = model.externalIds.get(sent.externalId)
      const first = stored.find((other) => other.externalId === sent.externalId)
      if (before === undefined)
        expect(first, `a message with external id ${sent.externalId} is stored`).toBeDefined()
      const original = before ?? { messageId: first!.result.message.id, sessionId: first!.result.session.id }
      const firstOfId = before === undefined && first === sent
      expect(sent.result.duplicate, `m${sent.number} with external id ${sent.externalId}`).toBe(!firstOfId)
      expect(sent.result.message.id).toBe(original.messageId)
      expect(sent.result.session.id).toBe(original.sessionId)
      if (!firstOfId) expect(sent.result.queued).toBe(false)
    }
    const storedIds = stored.filter((sent) => sent.externalId !== undefined).map((sent) => sent.externalId)
    expect(new Set(storedIds).size, 'external ids stored once each').toBe(storedIds.length)

    // In the order they were stored: a session's jobs run in that order.
    stored.sort((a, b) => a.result.message.sequence - b.result.message.sequence)
    for (const sent of stored) {
      const session = this.sessionFor(model, sent.customer, sent.result)
      const seen = {
        state: sent.result.session.state as StateName,
        active: agentKey(real, sent.result.session.activeAgentId),
      }
      expect(sent.result.queued, `m${sent.number} queued while ${seen.state} with ${seen.active}`).toBe(
        seen.state === 'ongoing' && seen.active !== 'H',
      )
      session.worlds.ingest(seen, sent.result.queued ? { number: sent.number, tag: sent.tag } : null)
      session.items.push({
        number: sent.number,
        tag: sent.tag,
        text: messageText(sent.number, sent.tag),
        messageId: sent.result.message.id,
        queued: sent.result.queued,
      })
      if (sent.externalId !== undefined) {
        model.externalIds.set(sent.externalId, {
          messageId: sent.result.message.id,
          sessionId: sent.result.session.id,
        })
      }
    }
  }

  /** The customer's open session, or the new one a first message or a message after a close opens. */
  private sessionFor(model: Model, customer: Customer, result: IngestResult): SessionModel {
    const current = currentSession(model, customer)
    if (current !== undefined && !current.worlds.closed()) {
      expect(result.session.id, `${customer}'s open session is used`).toBe(current.id)
      return current
    }
    expect(model.sessionIds.has(result.session.id), `${customer} gets a new session`).toBe(false)
    return openSessionModel(model, customer, result.session.id)
  }

  toString(): string {
    return `send(${this.messages
      .map(
        (message) =>
          `${message.customer}:${message.tag}${externalIdText(message.externalId)} via ${message.process}`,
      )
      .join(', ')})${this.letGo ? ' letting go' : ''}`
  }
}

function externalIdText(externalId: ExternalId): string {
  switch (externalId.kind) {
    case 'none':
      return ''
    case 'fresh':
      return ' #new'
    case 'repeat':
      return ` #repeat${externalId.index}`
    case 'same-as-previous':
      return ' #same'
  }
}

/** An operator acts on the customer's latest session (closed ones included). */
class OperateCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly customer: Customer,
    readonly operation: Operation,
    readonly process: 0 | 1,
    readonly letGo: boolean,
    readonly note?: string,
  ) {}

  check = (model: Readonly<Model>) => currentSession(model as Model, this.customer) !== undefined

  async run(model: Model, real: Real): Promise<void> {
    const session = currentSession(model, this.customer)!
    // A resume lets the agents speak again from its commit on, which comes before its answer.
    const silence = real.silenced.get(session.id)
    if (this.operation.type === 'resume') real.silenced.delete(session.id)
    const result = await whileRunning(real, this.letGo, this.perform(real, session))
    session.worlds.operate(this.operation, this.observe(real, result))
    if (result.isErr() && silence !== undefined) real.silenced.set(session.id, silence)
    this.after(real, session, result)
  }

  perform(real: Real, session: SessionModel): Promise<Result<Session, SwitchboardError>> {
    const target = { companyId: COMPANY_ID, sessionId: session.id }
    const operations = real.processes[this.process].sessions
    switch (this.operation.type) {
      case 'pause':
        return operations.pause({ ...target, reason: 'an operator takes over' })
      case 'resume':
        return operations.resume({ ...target, note: this.note })
      case 'close':
        return operations.close(target)
      case 'reassign':
        return operations.reassign({ ...target, agentId: real.agentIds[this.operation.agent] })
    }
  }

  observe(real: Real, result: Result<Session, SwitchboardError>): OperationResult {
    return result.isOk()
      ? { ok: true, state: result.value.state, active: agentKey(real, result.value.activeAgentId) }
      : { ok: false, code: result.error.code }
  }

  /** What the operation's success means for the channel and the session's record, once it committed. */
  after(real: Real, session: SessionModel, result: Result<Session, SwitchboardError>): void {
    if (result.isErr()) return
    expect(result.value.id).toBe(session.id)
    expect(result.value.pauseState !== undefined, 'pauseState only while paused').toBe(
      result.value.state === 'paused',
    )
    const silences =
      this.operation.type === 'pause' ||
      this.operation.type === 'close' ||
      (this.operation.type === 'reassign' && this.operation.agent === 'H')
    if (silences) {
      // Paused or closed: the agents' messages that have not left stay unsent. One being sent
      // still finishes (CONTRACT §8); a session sends one message at a time, so that is the one
      // under way now, or, with none under way, one claimed just before, whose send starts next.
      // A close silences operators too.
      const silence = real.silenced.get(session.id)
      const allowance = (real.sending.get(session.id) ?? 0) === 0 ? 1 : 0
      real.silenced.set(session.id, {
        allowance: Math.min(allowance, silence?.allowance ?? allowance),
        roles: result.value.state === 'closed' ? ['agent', 'system', 'operator'] : ['agent', 'system'],
        by: this.toString(),
      })
    }
    if (this.operation.type === 'resume') real.silenced.delete(session.id)
    if (this.operation.type === 'close') {
      for (const message of session.operatorMessages) message.closedAfter = true
    }
    if (this.operation.type === 'reassign' && this.operation.agent === 'H') session.reassignedToHuman += 1
    if (this.operation.type === 'resume' && this.note !== undefined) {
      expect(result.value.metadata.sharedContext.journey.at(-1)?.step).toBe(`Operator note: ${this.note}`)
      session.notes.push(`Operator note: ${this.note}`)
    }
  }

  toString(): string {
    const what =
      this.operation.type === 'reassign' ? `reassign to ${this.operation.agent}` : this.operation.type
    return `${this.customer} ${what}${this.note === undefined ? '' : ` (note "${this.note}")`} via ${
      this.process
    }${this.letGo ? ' letting go' : ''}`
  }
}

/**
 * Two operators act on one session at the same moment, through either process. Each answer must
 * be what one order of the two gives; successes commit in the order of the versions they answer.
 * A reassign to the human agent is left out: it answers the session as its transfer left it,
 * which the other operation may have changed since its own commit.
 */
class TogetherCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly first: OperateCommand,
    readonly second: OperateCommand,
  ) {}

  check = (model: Readonly<Model>) => this.first.check(model)

  async run(model: Model, real: Real): Promise<void> {
    const session = currentSession(model, this.first.customer)!
    const silence = real.silenced.get(session.id)
    const resumes = [this.first, this.second].some((command) => command.operation.type === 'resume')
    if (resumes) real.silenced.delete(session.id)
    const results = await whileRunning(
      real,
      this.first.letGo,
      Promise.all([this.first.perform(real, session), this.second.perform(real, session)]),
    )
    const done = [
      { command: this.first, result: results[0] },
      { command: this.second, result: results[1] },
    ]
    const [a, b] = done
    const orders =
      a!.result.isOk() && b!.result.isOk()
        ? [a!.result.value.version < b!.result.value.version ? [a!, b!] : [b!, a!]]
        : [
            [a!, b!],
            [b!, a!],
          ]
    session.worlds.either(
      orders.map((order) => (worlds: SessionWorlds) => {
        for (const { command, result } of order)
          worlds.operate(command.operation, command.observe(real, result))
      }),
    )
    const succeeded = done.filter(({ result }) => result.isOk())
    if (
      resumes &&
      !succeeded.some(({ command }) => command.operation.type === 'resume') &&
      silence !== undefined
    ) {
      real.silenced.set(session.id, silence)
    }
    succeeded.sort((x, y) => x.result._unsafeUnwrap().version - y.result._unsafeUnwrap().version)
    for (const { command, result } of succeeded) command.after(real, session, result)
  }

  toString(): string {
    return `together(${this.first}; ${this.second})`
  }
}

/**
 * The customer opens the chat (a webchat widget shows the session before a message): their open
 * session, or a new one when the last was closed. The new one is the session their next message
 * goes to.
 */
class OpenSessionCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly customer: Customer,
    readonly process: 0 | 1,
  ) {}

  check = () => true

  async run(model: Model, real: Real): Promise<void> {
    const result = await real.processes[this.process].openSession({
      integrationId: real.integrationId,
      clientId: this.customer,
    })
    if (result.isErr()) throw new Error(`openSession failed: ${result.error.code} ${result.error.message}`)
    const current = currentSession(model, this.customer)
    if (current !== undefined && !current.worlds.closed()) {
      expect(result.value.id, `${this.customer}'s open session`).toBe(current.id)
      return
    }
    expect(model.sessionIds.has(result.value.id), `${this.customer} gets a new session`).toBe(false)
    expect(result.value).toMatchObject({ state: 'ongoing', activeAgentId: real.agentIds.A })
    openSessionModel(model, this.customer, result.value.id)
  }

  toString(): string {
    return `${this.customer} opens the chat via ${this.process}`
  }
}

/** An operator writes to the customer of their latest session, in any state but closed. */
class OperatorMessageCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly customer: Customer,
    readonly process: 0 | 1,
    readonly letGo: boolean,
  ) {}

  check = (model: Readonly<Model>) => currentSession(model as Model, this.customer) !== undefined

  async run(model: Model, real: Real): Promise<void> {
    const session = currentSession(model, this.customer)!
    const text = `operator ${model.nextNumber++}`
    const result = await whileRunning(
      real,
      this.letGo,
      real.processes[this.process].sessions.sendOperatorMessage({
        companyId: COMPANY_ID,
        sessionId: session.id,
        text,
      }),
    )
    // Only an operator closes, so whether the session is closed is known whatever turns run.
    if (session.worlds.closed()) {
      expect(result.isErr() && result.error.code, `"${text}" on a closed session`).toBe('INVALID_STATE')
      return
    }
    expect(result.isOk(), `"${text}" on an open session`).toBe(true)
    session.operatorMessages.push({ text, closedAfter: false })
  }

  toString(): string {
    return `${this.customer} operator message via ${this.process}${this.letGo ? ' letting go' : ''}`
  }
}

/**
 * Lets a few held model answers or deliveries go, chosen by the scheduler: the turns they belong
 * to go on while the next command runs.
 */
class StepCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly count: number) {}

  check = () => true

  async run(_model: Model, real: Real): Promise<void> {
    for (let index = 0; index < this.count && real.scheduler.count() > 0; index += 1) {
      await real.scheduler.waitOne()
      // What the answer sets off runs until it waits for the next held one (storage is in memory,
      // so one macrotask later), and the scheduler then picks among all of those.
      await new Promise((resolve) => setImmediate(resolve))
    }
  }

  toString(): string {
    return `step ${this.count}`
  }
}

/**
 * The channel fails its next sends (retryably), at most four: the fifth try of a reply succeeds
 * (CONTRACT §6), so every reply still leaves, only later.
 */
class FailSendsCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly count: number) {}

  check = (model: Readonly<Model>) => !model.sendsFailed

  async run(model: Model, real: Real): Promise<void> {
    model.sendsFailed = true
    real.connector.failNextSends(this.count)
  }

  toString(): string {
    return `fail ${this.count} sends`
  }
}

/**
 * Time passes: retries come due, sweeps and polls run. Not while a send is held: a send that took
 * longer than its claim (30 s) would be claimed and sent again, which the channel's own timeout
 * (10 s, CONTRACT §6) rules out.
 */
class AdvanceCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}

  check = () => true

  async run(_model: Model, real: Real): Promise<void> {
    if ([...real.sending.values()].some((count) => count > 0)) return
    await real.clock.advance(this.ms)
  }

  toString(): string {
    return `advance ${this.ms} ms`
  }
}

/**
 * Until nothing runs and nothing waits to be sent, in any process: held answers and sends are let
 * go in the order the scheduler picks, and time passes a second at a time, for retries, sweeps,
 * and a transfer that waits for its announcement (which `idle` waits for). Each process's `idle`
 * speaks for that process only: one may take a job the other's turn made available after it was
 * idle, so it is settled when a whole round changed nothing.
 */
async function settle(model: Model, real: Real): Promise<void> {
  let before = ''
  for (let round = 0; ; round += 1) {
    // The turns of stopped processes too, which no live process's idle waits for.
    while (real.scheduler.count() > 0) {
      await real.scheduler.waitOne()
      await new Promise((resolve) => setImmediate(resolve))
    }
    let done = false
    const idle = real.scheduler
      .waitFor(Promise.all(real.processes.map((process) => process.idle())))
      .finally(() => {
        done = true
      })
    while (!done) await real.clock.advance(1000)
    await idle
    const waiting = await waitingToLeave(model, real)
    const jobs = await real.storage.jobs.pending({})
    const after = JSON.stringify([
      [...real.commits.values()].reduce((sum, count) => sum + count, 0),
      real.model.calls.length,
      real.connector.sent.length,
      real.connector.transfers.length,
      waiting,
      jobs,
    ])
    if (after === before && real.scheduler.count() === 0 && waiting === 0 && jobs === 0) return
    before = after
    if (round > 100) throw new Error('still not settled after 100 rounds')
    await real.clock.advance(1000)
  }
}

async function waitingToLeave(model: Model, real: Real): Promise<number> {
  let waiting = 0
  for (const session of [...model.sessions.values()].flat()) {
    const messages = await real.storage.messages.list({ sessionId: session.id, limit: 10_000 })
    waiting += messages.filter((message) => message.delivery === 'pending').length
  }
  return waiting
}

/**
 * A process is stopped (SIGTERM) with a short drain, its turns still waiting for the model, and a
 * new one takes its place: the jobs it gave back are taken by a live process and redone from
 * scratch (CONTRACT §11), while its own turns may still try to commit.
 */
class RestartCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly slot: 0 | 1,
    readonly letGo: boolean,
  ) {}

  check = () => true

  async run(model: Model, real: Real): Promise<void> {
    model.restarted = true
    const stopping = real.processes[this.slot]
    real.processes[this.slot] = real.start()
    real.stopped.push(stopping)
    await whileRunning(real, this.letGo, stopping.stop({ timeoutMs: 5 }))
  }

  toString(): string {
    return `restart ${this.slot}${this.letGo ? ' letting go' : ''}`
  }
}

/** Nothing more to do: everything the customers and operators caused is checked. */
class IdleCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true

  async run(model: Model, real: Real): Promise<void> {
    await settle(model, real)
    await checkSettled(model, real)
  }

  toString(): string {
    return 'idle'
  }
}

async function checkSettled(model: Model, real: Real): Promise<void> {
  // A turn redone after a stop asks the model again; it still commits once.
  expect(
    real.model.problems.filter((problem) => !(model.restarted && problem.includes('was asked twice'))),
  ).toEqual([])
  for (const [messageId, count] of real.commits) expect(count, `turns committed for ${messageId}`).toBe(1)
  expect(real.problems).toEqual([])
  expect(await real.storage.jobs.pending({}), 'no job left').toBe(0)
  const sentIds = real.connector.sent.map((sent) => sent.messageId)
  expect(new Set(sentIds).size, 'no message sent twice').toBe(sentIds.length)
  const askedAbout = new Set(real.model.calls.filter((call) => call.step === 0).map((call) => call.text))

  for (const customer of CUSTOMERS) {
    const sessions = model.sessions.get(customer) ?? []
    const open = await real.storage.sessions.findOpen({
      integrationId: real.integrationId,
      clientId: customer,
    })
    const latest = sessions.at(-1)
    expect(open?.id ?? null, `${customer}'s open session`).toBe(
      latest === undefined || latest.worlds.closed() ? null : latest.id,
    )
    for (const session of sessions) {
      const stored = (await real.storage.sessions.get({ id: session.id })) as Session
      const messages = await real.storage.messages.list({ sessionId: session.id, limit: 10_000 })
      checkSession(real, session, stored, messages, askedAbout)
    }
  }
}

function checkSession(
  real: Real,
  session: SessionModel,
  stored: Session,
  messages: readonly Message[],
  askedAbout: ReadonlySet<string>,
): void {
  const where = `session ${session.id}`
  // Answered: a turn for it committed (a turn a stopped process could not commit asked the model
  // all the same).
  const answered = (item: StoredItem) => real.commits.has(item.messageId)
  // Every message stored once, in the order it arrived.
  expect(
    messages.filter((message) => message.role === 'customer').map((message) => message.text),
    `${where}: its customer messages`,
  ).toEqual(session.items.map((item) => item.text))
  expect(
    messages.filter((message) => message.role === 'operator').map((message) => message.text),
    `${where}: its operator messages`,
  ).toEqual(session.operatorMessages.map((message) => message.text))
  // The only errors: a model that failed for good, once for each message whose call failed, in
  // order (CONTRACT §10: recorded, the fallback reply sent, and not retried into duplicates).
  const failed = session.items.filter((item) => item.tag === 'fail' && answered(item))
  expect(
    stored.metadata.errors.map((error) => `${error.code}: ${error.message}`),
    `${where}: errors`,
  ).toEqual(failed.map((item) => `MODEL_UNAVAILABLE: the model failed: ${failure(item.number)}`))

  // Which message each outgoing one answers. A session's turns commit one at a time in the order
  // of their messages, each its messages together: an announcement, if it handed off, then its
  // reply (the rule's, or the fallback when the model failed). So the outgoing messages are the
  // committed turns' in turn.
  const itemOf = new Map<string, StoredItem>()
  const outgoing = messages.filter((message) => message.role === 'agent' || message.role === 'system')
  let next = 0
  const take = (item: StoredItem, matches: (message: Message) => boolean) => {
    const message = outgoing[next]
    if (message === undefined || !matches(message)) return
    itemOf.set(message.id, item)
    next += 1
  }
  const announcement = (message: Message) => message.role === 'system' && ANNOUNCEMENTS.includes(message.text)
  for (const item of session.items.filter(answered)) {
    if (item.tag === 'human' || handsOver(item.tag)) take(item, announcement)
    if (item.tag === 'fail') take(item, (message) => message.text === DEFAULT_FALLBACK_REPLY)
    else if (item.tag !== 'quiet' && item.tag !== 'human') {
      take(item, (message) => message.role === 'agent' && message.text === replyTo(item.text))
    }
  }
  expect(
    outgoing.slice(next).map((message) => `${message.role}: ${message.text}`),
    `${where}: messages no turn of its messages sent`,
  ).toEqual([])

  const delivered = (found: readonly Message[]): Delivered => {
    if (found.length === 0) return 'none'
    if (found.length > 1) return 'several'
    const { delivery } = found[0]!
    return delivery === 'sent' || delivery === 'blocked' || delivery === 'failed' ? delivery : 'pending'
  }
  const observe = (item: StoredItem): TurnObservation => {
    const answers = messages.filter((message) => itemOf.get(message.id) === item)
    return {
      called: answered(item),
      effect: stored.metadata.agentPath.some(
        (entry) => entry.via === 'handoff_tool' && entry.reason === handoffReason(item.number),
      ),
      reply: delivered(answers.filter((message) => message.role === 'agent')),
      announcement: delivered(answers.filter((message) => message.role === 'system')),
    }
  }
  // Stored while paused, or while a human was active: never answered, never shown to a model.
  for (const item of session.items.filter((item) => !item.queued)) {
    expect(observe(item), `${where}: m${item.number}, stored while not answerable`).toEqual({
      called: false,
      effect: false,
      reply: 'none',
      announcement: 'none',
    })
    expect(askedAbout.has(item.text), `${where}: m${item.number} shown to a model`).toBe(false)
  }
  const byNumber = new Map(session.items.map((item) => [item.number, item]))
  session.worlds.settle({ state: stored.state, active: agentKey(real, stored.activeAgentId) }, (turn) =>
    observe(byNumber.get(turn.number)!),
  )

  // A turn sees the session's customer messages before its own, the latest ones when the window
  // (15, the default depth) is full: those stored while paused too (CONTRACT §8).
  session.items.forEach((item, index) => {
    const before = session.items.slice(0, index).map((earlier) => earlier.text)
    for (const call of real.model.calls.filter((call) => call.text === item.text && call.step === 0)) {
      const seen = call.customerHistory
      expect(seen, `${where}: the history of m${item.number}`).toEqual(
        call.historyLength < HISTORY_DEPTH ? before : before.slice(before.length - seen.length),
      )
    }
  })

  // Facts of every turn that saved one, concurrent ones included, and no other.
  const facts = Object.fromEntries(
    session.items
      .filter((item) => item.tag === 'fact' && answered(item))
      .map((item) => [factKey(item.number), factValue(item.number)]),
  )
  expect(stored.metadata.sharedContext.facts, `${where}: facts`).toEqual(facts)
  expect(
    stored.metadata.sharedContext.journey.map((step) => step.step),
    `${where}: the operators' notes`,
  ).toEqual(session.notes)

  // An operator's message leaves in any state but closed; a close blocks it if it had not left.
  for (const operatorMessage of session.operatorMessages) {
    const message = messages.find((found) => found.role === 'operator' && found.text === operatorMessage.text)
    expect(message?.delivery, `${where}: operator message "${operatorMessage.text}"`).toSatisfy(
      (delivery) => delivery === 'sent' || (operatorMessage.closedAfter && delivery === 'blocked'),
    )
  }

  // A transfer for each reassign to the human agent, and at most one for each turn that handed
  // the session to it (none when an operator changed the session before the call).
  const transfers = real.connector.transfers.filter((transfer) => transfer.sessionId === session.id).length
  const handedToHuman = session.items.filter((item) => item.tag === 'human' && observe(item).effect).length
  expect(transfers, `${where}: transfers to a human`).toBeGreaterThanOrEqual(session.reassignedToHuman)
  expect(transfers, `${where}: transfers to a human`).toBeLessThanOrEqual(
    session.reassignedToHuman + handedToHuman,
  )

  // The channel: what it sent is stored as sent, sent once, and a session's messages leave in the
  // order they were stored.
  const byId = new Map(messages.map((message) => [message.id, message]))
  const sent = real.connector.sent.filter((message) => message.sessionId === session.id)
  for (const message of sent) {
    expect(byId.get(message.messageId)?.delivery, `${where}: "${message.text}"`).toBe('sent')
  }
  expect(sent.length, `${where}: every message stored as sent was sent`).toBe(
    messages.filter((message) => message.delivery === 'sent').length,
  )
  const order = sent.map((message) => byId.get(message.messageId)!.sequence)
  expect(order, `${where}: messages leave in the order they were stored`).toEqual(
    [...order].sort((a, b) => a - b),
  )
}

const customerArbitrary = fc.constantFrom(...CUSTOMERS)
const externalIdArbitrary: fc.Arbitrary<ExternalId> = fc.oneof(
  fc.constant({ kind: 'none' as const }),
  fc.constant({ kind: 'fresh' as const }),
  fc.nat(30).map((index) => ({ kind: 'repeat' as const, index })),
  fc.constant({ kind: 'same-as-previous' as const }),
)
const plainMostly = fc.oneof(
  { arbitrary: fc.constant<MessageTag>('plain'), weight: 3 },
  { arbitrary: fc.constantFrom(...MESSAGE_TAGS), weight: 5 },
)

const processArbitrary = fc.constantFrom<0 | 1>(0, 1)
const messageArbitrary = fc.record({
  process: processArbitrary,
  customer: customerArbitrary,
  tag: plainMostly,
  externalId: externalIdArbitrary,
})
const operationArbitrary: fc.Arbitrary<{ operation: Operation; note?: string }> = fc.oneof(
  fc.constant({ operation: { type: 'pause' as const } }),
  fc
    .option(fc.constantFrom('refund approved', 'called the customer'), { nil: undefined })
    .map((note) => ({ operation: { type: 'resume' as const }, ...(note === undefined ? {} : { note }) })),
  fc.constant({ operation: { type: 'close' as const } }),
  fc
    .constantFrom<AgentKey>('A', 'B', 'H')
    .map((agent) => ({ operation: { type: 'reassign' as const, agent } })),
)

const commandArbitraries = [
  fc
    .tuple(fc.array(messageArbitrary, { minLength: 1, maxLength: 3 }), fc.boolean())
    .map(([messages, letGo]) => new SendCommand(messages, letGo)),
  fc.tuple(messageArbitrary, fc.boolean()).map(([message, letGo]) => new SendCommand([message], letGo)),
  fc
    .tuple(customerArbitrary, operationArbitrary, processArbitrary, fc.boolean())
    .map(
      ([customer, { operation, note }, process, letGo]) =>
        new OperateCommand(customer, operation, process, letGo, note),
    ),
  fc
    .tuple(customerArbitrary, operationArbitrary, processArbitrary, fc.boolean())
    .map(
      ([customer, { operation, note }, process, letGo]) =>
        new OperateCommand(customer, operation, process, letGo, note),
    ),
  fc
    .tuple(customerArbitrary, processArbitrary, fc.boolean())
    .map(([customer, process, letGo]) => new OperatorMessageCommand(customer, process, letGo)),
  fc.integer({ min: 1, max: 3 }).map((count) => new StepCommand(count)),
  fc.integer({ min: 1, max: 3 }).map((count) => new StepCommand(count)),
  fc.integer({ min: 1, max: 4 }).map((count) => new FailSendsCommand(count)),
  fc
    .tuple(customerArbitrary, processArbitrary)
    .map(([customer, process]) => new OpenSessionCommand(customer, process)),
  fc
    .tuple(
      customerArbitrary,
      fc.array(fc.tuple(operationArbitrary, processArbitrary), { minLength: 2, maxLength: 2 }),
      fc.boolean(),
    )
    .filter(([, operations]) =>
      operations.every(([{ operation }]) => operation.type !== 'reassign' || operation.agent !== 'H'),
    )
    .map(
      ([customer, operations, letGo]) =>
        new TogetherCommand(
          ...(operations.map(
            ([{ operation, note }, process]) => new OperateCommand(customer, operation, process, letGo, note),
          ) as [OperateCommand, OperateCommand]),
        ),
    ),
  fc.tuple(processArbitrary, fc.boolean()).map(([slot, letGo]) => new RestartCommand(slot, letGo)),
  fc.constantFrom(500, 1000, 2000, 4000, 8000).map((ms) => new AdvanceCommand(ms)),
  fc.constant(new IdleCommand()),
]

describe('the runtime against a model of the contract', () => {
  it(
    'stores, answers, pauses and closes as the contract allows, whatever the interleaving',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.scheduler(),
          fc.commands(commandArbitraries, { maxCommands: MAX_COMMANDS, size: 'max' }),
          async (scheduler, commands) => {
            const real = await createReal(scheduler)
            const model: Model = {
              nextNumber: 1,
              restarted: false,
              sendsFailed: false,
              sessions: new Map(),
              externalIds: new Map(),
              sessionIds: new Set(),
            }
            try {
              await fc.asyncModelRun(() => ({ model, real }), commands)
              await settle(model, real)
              await checkSettled(model, real)
            } finally {
              // After a failure, turns may still wait for held answers: let them go so stop ends.
              await scheduler
                .waitFor(
                  Promise.all(
                    [...real.processes, ...real.stopped].map((process) => process.stop({ timeoutMs: 1000 })),
                  ),
                )
                .catch(() => undefined)
            }
          },
        ),
        // A run that hangs (idle never resolving, say) fails as a counterexample of its own.
        { numRuns: RUNS, timeout: 5_000 },
      )
      // Longer runs asked for through the environment get the time they need.
    },
    20_000 + RUNS * MAX_COMMANDS * 5,
  )
})
