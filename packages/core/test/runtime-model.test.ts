import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { agentInputSchema } from '../src/domain/agent.js'
import type { Message, Session } from '../src/domain/session.js'
import { createMemoryKnowledgeIndex } from '../src/knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../src/memory/memory-storage.js'
import type { SendOutcome } from '../src/ports/connector.js'
import type { Storage } from '../src/ports/storage.js'
import { createSwitchboard, type Switchboard } from '../src/runtime/create-switchboard.js'
import type { IngestResult } from '../src/runtime/ingest.js'
import { createManualClock, createRecordingConnector, type RecordingConnector } from '../src/testing/index.js'
import {
  createRuleModel,
  factKey,
  factValue,
  handoffReason,
  MESSAGE_TAGS,
  type MessageTag,
  messageText,
  type RuleModel,
  replyTo,
} from './support/rule-model.js'
import {
  type AgentKey,
  type Operation,
  type OperationResult,
  SessionWorlds,
  type StateName,
  type TurnObservation,
} from './support/session-worlds.js'

const COMPANY_ID = 1
/** Sequences per run of the suite; `MODEL_TEST_RUNS` explores further (a few ms per sequence). */
const RUNS = Number(process.env.MODEL_TEST_RUNS ?? 300)
const MAX_COMMANDS = Number(process.env.MODEL_TEST_MAX_COMMANDS ?? 20)
const CUSTOMERS = ['ann', 'bob'] as const
type Customer = (typeof CUSTOMERS)[number]

interface Real {
  readonly scheduler: fc.Scheduler
  readonly switchboard: Switchboard
  readonly storage: Storage
  readonly connector: RecordingConnector
  readonly model: RuleModel
  readonly integrationId: string
  readonly agentIds: Readonly<Record<AgentKey, number>>
  /** Sends under way, by session. */
  readonly sending: Map<string, number>
  /** Sessions an operator paused or closed, and how many sends may still start for each. */
  readonly silenced: Map<string, { allowance: number; by: string }>
  /** What the channel saw that the contract rules out. */
  readonly problems: string[]
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
}

interface Model {
  nextNumber: number
  readonly sessions: Map<Customer, SessionModel[]>
  /** Every external id stored, with the message and session it was stored as. */
  readonly externalIds: Map<string, { messageId: string; sessionId: string }>
  /** Every session id ever answered, of any customer: a new session must be new. */
  readonly sessionIds: Set<string>
}

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
  for (const [from, other] of [
    [agentIds.A, agentIds.B],
    [agentIds.B, agentIds.A],
  ] as const) {
    const { handoff } = agentInputSchema
      .pick({ handoff: true })
      .parse({ handoff: { enabled: true, allowedTargets: [other, agentIds.H] } })
    await storage.agents.update({ companyId: COMPANY_ID, id: from, patch: { handoff }, at })
  }
  const connector = createRecordingConnector({ humanTransfer: true })
  const send = connector.send.bind(connector)
  const sending = new Map<string, number>()
  const silenced = new Map<string, { allowance: number; by: string }>()
  const problems: string[] = []
  const count = (sessionId: string, change: number) =>
    sending.set(sessionId, (sending.get(sessionId) ?? 0) + change)
  Object.assign(connector, {
    send(request: Parameters<typeof send>[0]): Promise<SendOutcome> {
      const { session, message } = request
      const silence = silenced.get(session.id)
      if (silence !== undefined && (message.role === 'agent' || message.role === 'system')) {
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
    otherAgent: (agentId) => (agentId === agentIds.A ? agentIds.B : agentIds.A),
    humanAgent: agentIds.H,
    hold: (answer, label) => scheduler.schedule(answer, label),
  })
  let uuid = 0
  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock,
    ids: { uuid: () => `00000000-0000-4000-8000-${(++uuid).toString(16).padStart(12, '0')}` },
  })
  return {
    scheduler,
    switchboard,
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
    const planned: { customer: Customer; tag: MessageTag; number: number; externalId?: string }[] = []
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
      planned.push({ customer: message.customer, tag: message.tag, number, externalId })
    }
    const results = await Promise.all(
      planned.map(async (message) => {
        const result = await whileRunning(
          real,
          this.letGo,
          real.switchboard.ingest({
            integrationId: real.integrationId,
            clientId: message.customer,
            text: messageText(message.number, message.tag),
            ...(message.externalId === undefined ? {} : { externalId: message.externalId }),
          }),
        )
        if (result.isErr()) throw new Error(`ingest failed: ${result.error.code} ${result.error.message}`)
        return { ...message, result: result.value }
      }),
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
    const opened: SessionModel = {
      id: result.session.id,
      worlds: new SessionWorlds(result.session.id),
      items: [],
    }
    model.sessionIds.add(opened.id)
    model.sessions.set(customer, [...(model.sessions.get(customer) ?? []), opened])
    return opened
  }

  toString(): string {
    return `send(${this.messages
      .map((message) => `${message.customer}:${message.tag}${externalIdText(message.externalId)}`)
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
    readonly letGo: boolean,
    readonly note?: string,
  ) {}

  check = (model: Readonly<Model>) => currentSession(model as Model, this.customer) !== undefined

  async run(model: Model, real: Real): Promise<void> {
    const session = currentSession(model, this.customer)!
    const target = { companyId: COMPANY_ID, sessionId: session.id }
    const operations = real.switchboard.sessions
    // A resume lets the agents speak again from its commit on, which comes before its answer.
    const silence = real.silenced.get(session.id)
    if (this.operation.type === 'resume') real.silenced.delete(session.id)
    const result = await whileRunning(
      real,
      this.letGo,
      this.operation.type === 'pause'
        ? operations.pause({ ...target, reason: 'an operator takes over' })
        : this.operation.type === 'resume'
          ? operations.resume({ ...target, note: this.note })
          : this.operation.type === 'close'
            ? operations.close(target)
            : operations.reassign({ ...target, agentId: real.agentIds[this.operation.agent] }),
    )
    const observed: OperationResult = result.isOk()
      ? {
          ok: true,
          state: result.value.state,
          active: agentKey(real, result.value.activeAgentId),
        }
      : { ok: false, code: result.error.code }
    session.worlds.operate(this.operation, observed)
    if (this.operation.type === 'resume' && result.isErr() && silence !== undefined) {
      real.silenced.set(session.id, silence)
    }
    if (result.isOk() && result.value.state !== 'ongoing' && this.operation.type !== 'resume') {
      // Paused or closed: the agents' messages that have not left stay unsent. One being sent
      // still finishes (CONTRACT §8); a session sends one message at a time, so that is the one
      // under way now, or, with none under way, one claimed just before, whose send starts next.
      const allowance = (real.sending.get(session.id) ?? 0) === 0 ? 1 : 0
      real.silenced.set(session.id, {
        allowance: Math.min(allowance, silence?.allowance ?? allowance),
        by: this.toString(),
      })
    }
    if (result.isOk()) {
      expect(result.value.id).toBe(session.id)
      expect(result.value.pauseState !== undefined, 'pauseState only while paused').toBe(
        result.value.state === 'paused',
      )
      if (this.operation.type === 'resume' && this.note !== undefined) {
        expect(result.value.metadata.sharedContext.journey.at(-1)?.step).toBe(`Operator note: ${this.note}`)
      }
    }
  }

  toString(): string {
    const what =
      this.operation.type === 'reassign' ? `reassign to ${this.operation.agent}` : this.operation.type
    return `${this.customer} ${what}${this.note === undefined ? '' : ` (note "${this.note}")`}${
      this.letGo ? ' letting go' : ''
    }`
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

/** Nothing more to do: everything the customers and operators caused is checked. */
class IdleCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true

  async run(model: Model, real: Real): Promise<void> {
    await real.scheduler.waitFor(real.switchboard.idle())
    await checkSettled(model, real)
  }

  toString(): string {
    return 'idle'
  }
}

async function checkSettled(model: Model, real: Real): Promise<void> {
  expect(real.model.problems).toEqual([])
  expect(real.problems).toEqual([])
  expect(await real.storage.jobs.pending({}), 'no job left').toBe(0)
  const sentIds = real.connector.sent.map((sent) => sent.messageId)
  expect(new Set(sentIds).size, 'no message sent twice').toBe(sentIds.length)
  const calledAbout = new Set(real.model.calls.filter((call) => call.step === 0).map((call) => call.text))

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
      checkSession(real, session, stored, messages, calledAbout)
    }
  }
}

function checkSession(
  real: Real,
  session: SessionModel,
  stored: Session,
  messages: readonly Message[],
  calledAbout: ReadonlySet<string>,
): void {
  const where = `session ${session.id}`
  // Every message stored once, in the order it arrived.
  expect(
    messages.filter((message) => message.role === 'customer').map((message) => message.text),
    `${where}: its customer messages`,
  ).toEqual(session.items.map((item) => item.text))
  const texts = new Map(session.items.map((item, index) => [replyTo(item.text), index]))
  // Only the rules' replies: no fallback reply, no announcement (none is configured), no error.
  for (const message of messages.filter((message) => message.role !== 'customer')) {
    expect(
      texts.has(message.text),
      `${where}: "${message.text}" (${message.role}) answers one of its messages`,
    ).toBe(true)
  }
  expect(stored.metadata.errors, `${where}: errors`).toEqual([])

  const observe = (item: StoredItem): TurnObservation => {
    const replies = messages.filter(
      (message) => message.role === 'agent' && message.text === replyTo(item.text),
    )
    const delivery = replies[0]?.delivery
    return {
      called: calledAbout.has(item.text),
      effect: stored.metadata.agentPath.some(
        (entry) => entry.via === 'handoff_tool' && entry.reason === handoffReason(item.number),
      ),
      reply:
        replies.length === 0
          ? 'none'
          : replies.length > 1
            ? 'several'
            : delivery === 'sent' || delivery === 'blocked' || delivery === 'pending' || delivery === 'failed'
              ? delivery
              : 'pending',
    }
  }
  // Stored while paused, or while a human was active: never answered, never shown to a model.
  for (const item of session.items.filter((item) => !item.queued)) {
    expect(observe(item), `${where}: m${item.number}, stored while not answerable`).toEqual({
      called: false,
      effect: false,
      reply: 'none',
    })
  }
  const byNumber = new Map(session.items.map((item) => [item.number, item]))
  session.worlds.settle({ state: stored.state, active: agentKey(real, stored.activeAgentId) }, (turn) =>
    observe(byNumber.get(turn.number)!),
  )

  // Facts of every turn that saved one, concurrent ones included, and no other.
  const facts = Object.fromEntries(
    session.items
      .filter((item) => item.tag === 'fact' && calledAbout.has(item.text))
      .map((item) => [factKey(item.number), factValue(item.number)]),
  )
  expect(stored.metadata.sharedContext.facts, `${where}: facts`).toEqual(facts)

  // The channel: what it sent is stored as sent, once, and a session's replies in message order.
  const byId = new Map(messages.map((message) => [message.id, message]))
  const sent = real.connector.sent.filter((message) => message.sessionId === session.id)
  for (const message of sent)
    expect(byId.get(message.messageId)?.delivery, `${where}: "${message.text}"`).toBe('sent')
  expect(sent.length, `${where}: every message stored as sent was sent`).toBe(
    messages.filter((message) => message.delivery === 'sent').length,
  )
  const order = sent.map((message) => texts.get(message.text) ?? -1)
  expect(order, `${where}: replies leave in the order of the messages they answer`).toEqual(
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

const messageArbitrary = fc.record({
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
    .tuple(customerArbitrary, operationArbitrary, fc.boolean())
    .map(([customer, { operation, note }, letGo]) => new OperateCommand(customer, operation, letGo, note)),
  fc
    .tuple(customerArbitrary, operationArbitrary, fc.boolean())
    .map(([customer, { operation, note }, letGo]) => new OperateCommand(customer, operation, letGo, note)),
  fc.integer({ min: 1, max: 3 }).map((count) => new StepCommand(count)),
  fc.integer({ min: 1, max: 3 }).map((count) => new StepCommand(count)),
  fc.constant(new IdleCommand()),
]

describe('the runtime against a model of the contract', () => {
  it('stores, answers, pauses and closes as the contract allows, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.commands(commandArbitraries, { maxCommands: MAX_COMMANDS }),
        async (scheduler, commands) => {
          const real = await createReal(scheduler)
          const model: Model = {
            nextNumber: 1,
            sessions: new Map(),
            externalIds: new Map(),
            sessionIds: new Set(),
          }
          try {
            await fc.asyncModelRun(() => ({ model, real }), commands)
            await scheduler.waitFor(real.switchboard.idle())
            await checkSettled(model, real)
          } finally {
            await scheduler.waitFor(real.switchboard.stop({ timeoutMs: 1000 })).catch(() => undefined)
          }
        },
      ),
      // A run that hangs (idle never resolving, say) fails as a counterexample of its own.
      { numRuns: RUNS, timeout: 5_000 },
    )
  })
})
