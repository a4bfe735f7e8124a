import { randomBytes } from 'node:crypto'
import { signWebhookBody } from '@switchboard/core'
import fc from 'fast-check'
import { expect } from 'vitest'
import type { ReferenceServer } from '../../src/start-reference-server.js'
import type { FakePlatform } from './fake-platform.js'

/*
 * The model of the HTTP model tests (`http-model.test.ts` against one server,
 * `http-cluster-model.test.ts` against several on one PostgreSQL): what customers, the platform and
 * operators do, and what CONTRACT §5, §6, §8 and §11 and the spec's transition table say must
 * follow. The offline model answers (CONTRACT §10): each agent knows one passage per word, so a
 * reply names the agent that wrote it and the word it answers.
 */

/** Words of messages; `invoices` is the one route of the entry agent, to Sales. */
const WORDS = ['alpha', 'bravo', 'charlie', 'invoices'] as const
type Word = (typeof WORDS)[number]
const CHANNELS = ['channel-1', 'channel-2'] as const
const TRANSPORTS = ['whatsapp', 'telegram'] as const
const CUSTOMERS = 3
const PLATFORM_TOKEN = 'platform-token'

type AgentName = 'reception' | 'sales' | 'human'
const DISPLAY: Record<AgentName, string> = { reception: 'Reception', sales: 'Sales', human: 'Operators' }
/** The offline model's reply of an agent to a message with `word`: that agent's passage for it. */
const AI = ['reception', 'sales'] as const
const replyOf = (agent: AgentName, word: Word) => `${DISPLAY[agent]} on ${word}.`

type Expectation = 'must' | 'may' | 'never'
type State = 'ongoing' | 'paused' | 'closed'
type Via = 'initial' | 'entry_routing' | 'manual'

interface ModelMessage {
  readonly messageId: string
  /** A `webhook-id` header, the idempotency key in place of `message_id` (CONTRACT §6). */
  readonly webhookId: string | undefined
  readonly text: string
  readonly word: Word
  readonly channel: string
  readonly transport: string
  /** Messages acknowledged before this one was sent have a lower batch; a burst shares one. */
  readonly batch: number
  expect: Expectation
  /** Agents one of which answers it, if it is answered; `routed` is the agent entry routing picks. */
  readonly agents: Set<AgentName | 'routed'>
  /** What its webhook log entry may say: `queued`, or `stored_paused` when no agent was to run. */
  readonly logOutcomes: Set<string>
}

interface PathEntry {
  readonly agent: AgentName
  readonly via: Via
}

interface ModelSession {
  id: string | null
  state: State
  /** The active agent once entry routing is over; meaningless while `routing` is pending. */
  agent: AgentName
  /** Entry routing of the first message has not been seen to finish. */
  routingPending: boolean
  /** The agent paths the session may show; one unless a reassign raced entry routing. */
  paths: PathEntry[][]
  readonly journey: string[]
  readonly messages: ModelMessage[]
  readonly operatorMessages: { text: string; expect: 'must' | 'may' }[]
  /** Transfers to a human asked for, each with the operator it names, if any. */
  /** `made` is false where a race may have dropped it before its call (a close came first). */
  readonly transfers: { operatorId: number | undefined; made: boolean }[]
  pauseReason: string | undefined
  /** `UNKNOWN` once a race left it unclear whether a transfer's reference was recorded. */
  externalReference: string | undefined | typeof UNKNOWN
}

// A string, not a symbol: the model is copied with structuredClone.
const UNKNOWN = '(unknown reference)' as const

interface ModelCustomer {
  readonly clientId: string
  readonly sessions: ModelSession[]
}

export interface Model {
  readonly customers: ModelCustomer[]
  readonly sent: { customer: number; message: ModelMessage }[]
  batch: number
  counter: number
  /** Messages and operator messages whose outcome may still be under way. */
  readonly inFlight: Set<ModelSession>
  /** Webhook log entries of status hooks and of repeated deliveries (CONTRACT §5). */
  readonly hookLogs: { outcome: string; session: ModelSession | undefined }[]
  readonly duplicateLogs: { text: string | undefined }[]
  /** Status hooks sent with a `webhook-id`, which the platform may send again. */
  readonly hooksSent: { payload: Record<string, unknown>; webhookId: string }[]
  /** The HTTP statuses of webhooks refused (CONTRACT §5 `rejected`): a stale secret, an inactive integration. */
  readonly rejectedLogs: number[]
}

export interface Real {
  readonly url: string
  readonly token: string
  readonly integrationId: string
  /** The integration's webhook secret, one for every server: a rotation through one changes it. */
  readonly signing: { secret: string }
  readonly agentIds: Record<AgentName, number>
  readonly platform: FakePlatform
}

interface Answer {
  readonly status: number
  readonly body: Record<string, unknown>
}

/** Every answer of the server: never a 500, every error in the contract's shape. */
function checkedAnswer(what: string, status: number, text: string): Answer {
  const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>
  if (status >= 500) throw new Error(`${what} answered ${status}: ${text}`)
  if (status >= 400) {
    expect(body, `${what} error shape`).toEqual({
      error: { code: expect.any(String), message: expect.any(String), ...detailsOf(body) },
    })
  }
  return { status, body }
}

function detailsOf(body: Record<string, unknown>) {
  const error = body.error as Record<string, unknown> | undefined
  return error !== undefined && 'details' in error ? { details: expect.any(Array) } : {}
}

async function api(real: Real, method: string, path: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${real.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${real.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return checkedAnswer(`${method} ${path}`, response.status, await response.text())
}

async function webhook(
  real: Real,
  payload: Record<string, unknown>,
  webhookId?: string,
  secret = real.signing.secret,
): Promise<Answer> {
  const raw = JSON.stringify(payload)
  const response = await fetch(`${real.url}/api/webhook/msgplatform/${real.integrationId}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-webhook-signature': signWebhookBody(raw, secret),
      ...(webhookId === undefined ? {} : { 'webhook-id': webhookId }),
    },
    body: raw,
  })
  return checkedAnswer(`webhook ${raw}`, response.status, await response.text())
}

function expectError(answer: Answer, status: number, code: string, what: string): void {
  expect(
    { status: answer.status, code: (answer.body.error as { code?: string } | undefined)?.code },
    what,
  ).toEqual({
    status,
    code,
  })
}

const openSessionOf = (customer: ModelCustomer): ModelSession | undefined => {
  const last = customer.sessions.at(-1)
  return last !== undefined && last.state !== 'closed' ? last : undefined
}
const closedSessionOf = (customer: ModelCustomer): ModelSession | undefined =>
  customer.sessions.findLast((session) => session.state === 'closed')

/** The id of the model's session, read from the session list the first time it is needed. */
async function sessionIdOf(real: Real, customer: ModelCustomer, session: ModelSession) {
  if (session.id !== null) return session.id
  const listed = await api(real, 'GET', `/api/sessions?integrationId=${real.integrationId}&limit=100`)
  expect(listed.status).toBe(200)
  const mine = (
    listed.body.sessions as { id: string; state: State; customer: { clientId: string } }[]
  ).filter((candidate) => candidate.customer.clientId === customer.clientId)
  const known = new Set(customer.sessions.map((each) => each.id))
  const unknown = mine.filter((candidate) => !known.has(candidate.id))
  // Only the open session can be new to the model: a closed session is never reused.
  expect(
    unknown.map((candidate) => candidate.state),
    `new sessions of ${customer.clientId}`,
  ).toEqual([session.state])
  session.id = unknown[0]!.id
  return session.id
}

function newSession(): ModelSession {
  return {
    id: null,
    state: 'ongoing',
    agent: 'reception',
    routingPending: true,
    paths: [[{ agent: 'reception', via: 'initial' }]],
    journey: [],
    messages: [],
    operatorMessages: [],
    transfers: [],
    pauseReason: undefined,
    externalReference: undefined,
  }
}

/** The paths the session may show now: entry routing may or may not have landed yet. */
function pathsNow(session: ModelSession): PathEntry[][] {
  if (!session.routingPending) return session.paths
  return session.paths.flatMap((path) => [
    path,
    [...path, { agent: 'sales' as const, via: 'entry_routing' as const }],
  ])
}

function agentsNow(session: ModelSession): Set<AgentName> {
  return session.routingPending ? new Set(['reception', 'sales']) : new Set([session.agent])
}

/**
 * An operator or the platform acts on the session. A pause, a close or a transfer to a human may
 * block the replies under way (CONTRACT §8: a pause mid-turn blocks that turn's replies); a
 * reassign to another AI agent leaves them due, from either agent.
 */
function interrupt(
  model: Model,
  session: ModelSession,
  change: { observedAgent?: AgentName; newAgent?: AgentName; stops: boolean },
) {
  const racedRouting = session.routingPending
  if (racedRouting) {
    if (change.newAgent !== undefined) {
      // Whether entry routing landed before the reassign cannot be seen any more.
      session.paths = pathsNow(session)
    } else if (change.observedAgent === 'sales') {
      session.paths = session.paths.map((path) => [...path, { agent: 'sales', via: 'entry_routing' }])
    }
    session.routingPending = false
  }
  if (change.observedAgent !== undefined) session.agent = change.observedAgent
  if (!model.inFlight.has(session)) return
  for (const message of session.messages) {
    if (message.expect === 'never') continue
    if (change.stops) message.expect = 'may'
    // A turn cut short before routing landed leaves either agent to answer later messages.
    if (message.agents.delete('routed') || racedRouting) message.agents.add('reception').add('sales')
    if (change.newAgent !== undefined) message.agents.add(change.newAgent)
  }
}

/** Whether a message the session receives now must be answered, and by whom. */
function dueOf(session: ModelSession): { expect: Expectation; agent: AgentName | 'routed' } {
  const answered = session.state === 'ongoing' && (session.routingPending || session.agent !== 'human')
  return { expect: answered ? 'must' : 'never', agent: session.routingPending ? 'routed' : session.agent }
}

function newMessage(
  model: Model,
  customer: ModelCustomer,
  word: Word,
  channel: string,
  transport: string,
  withWebhookId = false,
) {
  model.counter += 1
  const messageId = `${customer.clientId}-m${model.counter}`
  const webhookId = withWebhookId ? `delivery-${messageId}` : undefined
  return { messageId, webhookId, text: `${word} ${messageId}`, word, channel, transport }
}

/** The log outcome of a message stored while it is due as `expectation`. */
const logOutcomesOf = (expectation: Expectation) =>
  expectation === 'must'
    ? ['queued']
    : expectation === 'never'
      ? ['stored_paused']
      : ['queued', 'stored_paused']

/** The message is stored in the session, due as `due` says. */
function place(
  model: Model,
  customerIndex: number,
  session: ModelSession,
  message: Omit<ModelMessage, 'expect' | 'agents' | 'batch' | 'logOutcomes'>,
  due: { expect: Expectation; agents: (AgentName | 'routed')[] },
  batch: number,
): ModelMessage {
  const placed: ModelMessage = {
    ...message,
    batch,
    expect: due.expect,
    agents: new Set(due.agents),
    logOutcomes: new Set(logOutcomesOf(due.expect)),
  }
  session.messages.push(placed)
  model.sent.push({ customer: customerIndex, message: placed })
  model.inFlight.add(session)
  return placed
}

/** A customer message: where it goes and whether it must be answered follow from the model. */
function receive(
  model: Model,
  customerIndex: number,
  word: Word,
  channel: string,
  transport: string,
  batch: number,
  withWebhookId = false,
) {
  const customer = model.customers[customerIndex]!
  let session = openSessionOf(customer)
  if (session === undefined) {
    session = newSession()
    customer.sessions.push(session)
  }
  const due = dueOf(session)
  const message = place(
    model,
    customerIndex,
    session,
    newMessage(model, customer, word, channel, transport, withWebhookId),
    { expect: due.expect, agents: [due.agent] },
    batch,
  )
  return { customer, session, message }
}

/** A customer message as the platform sends it, with its `webhook-id` if it has one. */
const sendMessage = (
  real: Real,
  clientId: string,
  message: Pick<ModelMessage, 'text' | 'channel' | 'transport' | 'messageId' | 'webhookId'>,
) => webhook(real, messagePayload(clientId, message), message.webhookId)

const messagePayload = (
  clientId: string,
  message: Pick<ModelMessage, 'text' | 'channel' | 'transport' | 'messageId'>,
) => ({
  text: message.text,
  client_id: clientId,
  channel_id: message.channel,
  transport: message.transport,
  message_id: message.messageId,
})

/** Status of the session as pause, resume, close, reassign and GET …/status answer it. */
function expectStatus(answer: Answer, session: ModelSession, what: string) {
  expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(200)
  const body = answer.body as { id: string; state: State; activeAgentId: number; pauseState?: unknown }
  expect({ id: body.id, state: body.state }, what).toEqual({ id: session.id, state: session.state })
  expect(Object.keys(body).sort(), what).toEqual(
    session.state === 'paused'
      ? ['activeAgentId', 'id', 'pauseState', 'state']
      : ['activeAgentId', 'id', 'state'],
  )
  if (session.state === 'paused') {
    const { externalReference, ...pauseState } = body.pauseState as Record<string, unknown>
    expect(pauseState, what).toEqual({
      pausedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      ...(session.pauseReason === undefined ? {} : { reason: session.pauseReason }),
    })
    if (session.externalReference === UNKNOWN) {
      expect([undefined, expect.stringMatching(/^transfer-\d+$/)], what).toContainEqual(externalReference)
    } else {
      expect(externalReference, what).toBe(session.externalReference)
    }
  }
  return body.activeAgentId
}

type AgentIds = Record<AgentName, number>
const agentNameOf = (ids: AgentIds, id: number): AgentName | undefined =>
  (Object.keys(ids) as AgentName[]).find((name) => ids[name] === id)

function expectAgent(real: Real, id: number, allowed: Set<AgentName>, what: string): AgentName {
  const name = agentNameOf(real.agentIds, id)
  expect(
    name !== undefined && allowed.has(name),
    `${what}: active agent ${name ?? id} not in ${[...allowed]}`,
  ).toBe(true)
  return name!
}

function expectPath(real: Real, path: unknown, candidates: PathEntry[][], what: string) {
  const shown = (path as { agentId: number; via: string }[]).map((entry) => ({
    agent: agentNameOf(real.agentIds, entry.agentId),
    via: entry.via,
  }))
  expect(
    candidates.some((candidate) => JSON.stringify(candidate) === JSON.stringify(shown)),
    `${what}: agent path ${JSON.stringify(shown)} is none of ${JSON.stringify(candidates)}`,
  ).toBe(true)
}

interface StoredMessage {
  id: string
  role: string
  text: string
  agentId?: number
  at: string
  delivery?: string
}

async function storedMessages(real: Real, sessionId: string): Promise<StoredMessage[]> {
  const answer = await api(real, 'GET', `/api/sessions/${sessionId}/messages?limit=100`)
  expect(answer.status).toBe(200)
  expect(answer.body.nextCursor).toBeNull()
  return answer.body.messages as StoredMessage[]
}

/** Every acknowledged message of the session is stored once, in the order it was acknowledged. */
function expectCustomerMessages(stored: StoredMessage[], session: ModelSession, what: string) {
  const customer = stored.filter((message) => message.role === 'customer')
  expect(customer.map((message) => message.text).sort(), `${what}: customer messages`).toEqual(
    session.messages.map((message) => message.text).sort(),
  )
  const batches = customer.map(
    (stored) => session.messages.find((message) => message.text === stored.text)!.batch,
  )
  expect(batches, `${what}: arrival order`).toEqual([...batches].sort((a, b) => a - b))
}

/** Reads the session through every GET of CONTRACT §8 and compares it with the model. */
async function readSession(real: Real, customer: ModelCustomer, session: ModelSession, what: string) {
  const id = await sessionIdOf(real, customer, session)
  const agents = agentsNow(session)
  const full = await api(real, 'GET', `/api/sessions/${id}`)
  expect(full.status).toBe(200)
  const view = full.body as {
    state: State
    activeAgentId: number
    integrationId: string
    customer: { clientId: string }
    metadata: { agentPath: unknown; sharedContext: { journey: { step: string }[] } }
    pauseState?: unknown
  }
  expect(view.state, what).toBe(session.state)
  expect(view.integrationId).toBe(real.integrationId)
  expect(view.customer.clientId).toBe(customer.clientId)
  expect('pauseState' in view, `${what}: pauseState only while paused`).toBe(session.state === 'paused')
  expectAgent(real, view.activeAgentId, agents, what)
  expectPath(real, view.metadata.agentPath, pathsNow(session), what)
  expect(
    view.metadata.sharedContext.journey.map((entry) => entry.step),
    `${what}: journey`,
  ).toEqual(session.journey)

  const status = await api(real, 'GET', `/api/sessions/${id}/status`)
  expectAgent(real, expectStatus(status, session, `${what} status`), agents, `${what} status`)

  const context = await api(real, 'GET', `/api/sessions/${id}/context`)
  expect(context.status).toBe(200)
  const shared = context.body as { sharedContext: { journey: { step: string }[] }; agentPath: unknown }
  expectPath(real, shared.agentPath, pathsNow(session), `${what} context`)
  expect(shared.sharedContext.journey.map((entry) => entry.step)).toEqual(session.journey)

  expectCustomerMessages(await storedMessages(real, id), session, what)
}

/**
 * Once nothing is under way: each session's replies match its messages one to one, in order, from
 * the right agent, and the platform got exactly the replies stored as sent.
 */
export async function settle(world: World, model: Model) {
  const { real } = world
  await waitUntilIdle(real, model, world.services)
  for (const customer of model.customers) {
    const platformReplies = real.platform.requests.filter(
      (request) => request.path === '/v1/messages' && request.body.client_id === customer.clientId,
    )
    for (const request of platformReplies) {
      expect(request.authorization).toBe(PLATFORM_TOKEN)
      expect(request.method).toBe('POST')
      expect(Object.keys(request.body).sort()).toEqual([
        'channel_id',
        'client_id',
        'text',
        'transport',
        'type',
      ])
      expect(request.body.type).toBe('to_client')
    }
    const operatorTexts = new Set(
      customer.sessions.flatMap((session) => session.operatorMessages.map((m) => m.text)),
    )
    const agentReplies = platformReplies.filter((request) => !operatorTexts.has(String(request.body.text)))
    const operatorReplies = platformReplies.filter((request) => operatorTexts.has(String(request.body.text)))
    let platformIndex = 0
    for (const [index, session] of customer.sessions.entries()) {
      const what = `${customer.clientId} session ${index + 1}`
      if (session.routingPending) {
        // Entry routing took the first message stored, whichever of a burst that was.
        const stored = await storedMessages(real, await sessionIdOf(real, customer, session))
        const first = stored.find((message) => message.role === 'customer')
        const routedTo = first?.text.startsWith('invoices ') ? 'sales' : 'reception'
        session.agent = routedTo
        if (routedTo === 'sales') {
          session.paths = session.paths.map((path) => [...path, { agent: 'sales', via: 'entry_routing' }])
        }
        session.routingPending = false
      }
      for (const message of session.messages) {
        if (message.agents.delete('routed')) message.agents.add(session.agent)
      }
      await readSession(real, customer, session, what)
      const stored = await storedMessages(real, session.id!)
      expect(
        stored.filter((message) => message.role === 'system'),
        `${what}: no system messages`,
      ).toEqual([])
      const outgoing = stored.filter((message) => message.role !== 'customer')
      expect(
        outgoing.filter((message) => message.delivery === 'pending' || message.delivery === 'failed'),
        `${what}: deliveries settled`,
      ).toEqual([])
      for (const message of stored) {
        expect(message.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
        expect('delivery' in message, `${what}: delivery of outgoing messages only`).toBe(
          message.role !== 'customer',
        )
        // A reply names the agent that wrote it; its text does too.
        if (message.role === 'agent') {
          const writer = AI.find((agent) => message.text.startsWith(`${DISPLAY[agent]} on `))
          expect(
            writer !== undefined && message.agentId === real.agentIds[writer],
            `${what}: ${JSON.stringify(message)}`,
          ).toBe(true)
        }
      }
      // Any page size gives the same messages in the same order.
      const paged: StoredMessage[] = []
      for (let cursor: string | null = null; ; ) {
        const page = await api(
          real,
          'GET',
          `/api/sessions/${session.id}/messages?limit=2${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
        )
        paged.push(...(page.body.messages as StoredMessage[]))
        cursor = page.body.nextCursor as string | null
        if (cursor === null) break
      }
      expect(paged, `${what}: messages paged by 2`).toEqual(stored)

      // The sent agent replies, paired in order with what the platform received.
      const replies = stored
        .map((message, position) => ({ message, position }))
        .filter(({ message }) => message.role === 'agent')
      const sent = replies.filter(({ message }) => message.delivery === 'sent')
      const received = agentReplies.slice(platformIndex, platformIndex + sent.length)
      platformIndex += sent.length
      expect(
        received.map((request) => request.body.text),
        `${what}: replies at the platform, in order`,
      ).toEqual(sent.map(({ message }) => message.text))
      const platformOf = new Map(sent.map(({ message }, index) => [message.id, received[index]!]))

      const customerStored = stored
        .map((message, position) => ({ message, position }))
        .filter(({ message }) => message.role === 'customer')
        .map(({ message, position }) => ({
          position,
          model: session.messages.find((each) => each.text === message.text)!,
        }))
      const fits = (customerIndex: number, replyIndex: number) => {
        const { position, model: message } = customerStored[customerIndex]!
        const reply = replies[replyIndex]!
        if (reply.position < position || message.expect === 'never') return false
        const texts = [...message.agents].filter((agent) => agent !== 'human' && agent !== 'routed')
        if (!texts.some((agent) => replyOf(agent as AgentName, message.word) === reply.message.text))
          return false
        if (reply.message.delivery === 'sent') {
          const request = platformOf.get(reply.message.id)!
          return request.body.channel_id === message.channel && request.body.transport === message.transport
        }
        return message.expect === 'may' && reply.message.delivery === 'blocked'
      }
      expect(
        matches(customerStored.length, replies.length, fits, (index) => customerStored[index]!.model.expect),
        `${what}: one reply per answered message, in order, from its agent: ${JSON.stringify({
          customers: customerStored.map(({ model: message }) => [
            message.text,
            message.expect,
            [...message.agents],
          ]),
          replies: replies.map(({ message }) => [message.text, message.delivery]),
        })}`,
      ).toBe(true)

      const operator = stored.filter((message) => message.role === 'operator')
      expect(operator.map((message) => message.text).sort(), `${what}: operator messages`).toEqual(
        session.operatorMessages.map((message) => message.text).sort(),
      )
      for (const message of operator) {
        const expected = session.operatorMessages.find((each) => each.text === message.text)!
        expect(
          expected.expect === 'must' ? ['sent'] : ['sent', 'blocked'],
          `${what}: ${message.text}`,
        ).toContain(message.delivery)
        expect(
          operatorReplies.filter((request) => request.body.text === message.text).length,
          `${what}: ${message.text} at the platform`,
        ).toBe(message.delivery === 'sent' ? 1 : 0)
      }
    }
    expect(agentReplies.length, `${customer.clientId}: no other replies at the platform`).toBe(platformIndex)
    const transfers = real.platform.requests.filter(
      (request) => request.path === '/v1/dialogs/transfer' && request.body.client_id === customer.clientId,
    )
    const expected = customer.sessions.flatMap((session) => session.transfers)
    const shown = transfers.map((request) => JSON.stringify(request.body))
    const bodyOf = (transfer: { operatorId: number | undefined }) =>
      JSON.stringify({
        client_id: customer.clientId,
        ...(transfer.operatorId === undefined ? {} : { operator_id: transfer.operatorId }),
        system_message: true,
      })
    // In order, each once; one a race may have dropped may be missing.
    let next = 0
    for (const transfer of expected) {
      if (next < shown.length && shown[next] === bodyOf(transfer)) next += 1
      else
        expect(transfer.made, `${customer.clientId}: transfers ${JSON.stringify({ shown, expected })}`).toBe(
          false,
        )
    }
    expect(next, `${customer.clientId}: no other transfers ${JSON.stringify(shown)}`).toBe(shown.length)
  }
  await expectWebhookLogs(real, model)
  // The list of sessions by state holds each of the customers' sessions in its state.
  for (const state of ['ongoing', 'paused', 'closed'] as const) {
    const listed = await api(
      real,
      'GET',
      `/api/sessions?integrationId=${real.integrationId}&state=${state}&limit=100`,
    )
    expect(
      (listed.body.sessions as { id: string; state: State }[]).map((session) => session.id).sort(),
      `sessions ${state}`,
    ).toEqual(
      model.customers
        .flatMap((customer) => customer.sessions)
        .filter((session) => session.state === state)
        .map((session) => session.id)
        .sort(),
    )
  }
  await expectServersAgree(world, model)
  model.inFlight.clear()
}

/** Once things settle, every server reads the sessions, their messages and the logs alike. */
async function expectServersAgree(world: World, model: Model) {
  const others = world.nodes.filter((node) => node !== world.real)
  if (others.length === 0) return
  const ids = model.customers.flatMap((customer) => customer.sessions.map((session) => session.id!))
  const paths = [
    ...ids.flatMap((id) => [
      `/api/sessions/${id}`,
      `/api/sessions/${id}/status`,
      `/api/sessions/${id}/context`,
      `/api/sessions/${id}/messages?limit=100`,
    ]),
    `/api/sessions?integrationId=${world.real.integrationId}&limit=100`,
    `/api/integrations/${world.real.integrationId}/webhook-logs?limit=100`,
  ]
  const read = (node: Real) => Promise.all(paths.map((path) => api(node, 'GET', path)))
  const seen = await read(world.real)
  for (const node of others) {
    const shown = await read(node)
    for (const [index, path] of paths.entries()) {
      expect(shown[index], `${path} on ${node.url} and on ${world.real.url}`).toEqual(seen[index])
    }
  }
}

/**
 * The integration's webhook log (CONTRACT §5): one entry per webhook, each message's saying
 * whether an agent was to run, in the message's session; each repeat a duplicate of its message.
 */
async function expectWebhookLogs(real: Real, model: Model) {
  const logs: { outcome: string; httpStatus: number; sessionId?: string; messageId?: string }[] = []
  for (let cursor: string | null = null; ; ) {
    const page = await api(
      real,
      'GET',
      `/api/integrations/${real.integrationId}/webhook-logs?limit=100${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
    )
    expect(page.status).toBe(200)
    logs.push(...(page.body.logs as typeof logs))
    cursor = page.body.nextCursor as string | null
    if (cursor === null) break
  }
  const rejected = logs.filter((log) => log.outcome === 'rejected')
  expect(rejected.map((log) => log.httpStatus).sort(), 'webhooks refused').toEqual(
    [...model.rejectedLogs].sort(),
  )
  expect(logs.every((log) => log.outcome === 'rejected' || log.httpStatus === 200)).toBe(true)
  const stored = new Map<string, { text: string; sessionId: string }>()
  const modelOf = new Map<string, { message: ModelMessage; session: ModelSession }>()
  for (const customer of model.customers) {
    for (const session of customer.sessions) {
      for (const message of await storedMessages(real, session.id!)) {
        if (message.role === 'customer')
          stored.set(message.id, { text: message.text, sessionId: session.id! })
      }
      for (const message of session.messages) modelOf.set(message.text, { message, session })
    }
  }
  const received = logs.filter((log) => log.outcome === 'queued' || log.outcome === 'stored_paused')
  expect(received.length, 'one log entry per stored message').toBe(modelOf.size)
  const logged = new Set<string>()
  for (const log of received) {
    const message = stored.get(log.messageId ?? '')
    expect(message, `log entry of message ${log.messageId}`).toBeDefined()
    const expected = modelOf.get(message!.text)!
    expect(logged.has(message!.text), `a second log entry of ${message!.text}`).toBe(false)
    logged.add(message!.text)
    expect(log.sessionId).toBe(message!.sessionId)
    expect([...expected.message.logOutcomes], `log outcome of ${message!.text}`).toContain(log.outcome)
  }
  const duplicates = logs.filter((log) => log.outcome === 'duplicate')
  expect(
    duplicates
      .map((log) => (log.messageId === undefined ? undefined : stored.get(log.messageId)?.text))
      .sort(),
    'duplicate log entries',
  ).toEqual(model.duplicateLogs.map((entry) => entry.text).sort())
  const hooks = logs.filter((log) =>
    ['ignored', 'session_close', 'session_transfer_external'].includes(log.outcome),
  )
  const key = (outcome: string, sessionId: string | null | undefined) => `${outcome} ${sessionId ?? '-'}`
  expect(hooks.map((log) => key(log.outcome, log.sessionId)).sort(), 'status hook log entries').toEqual(
    model.hookLogs.map((entry) => key(entry.outcome, entry.session?.id)).sort(),
  )
}

/**
 * Whether customer messages 0..n can each take the replies 0..m in order: a `must` message one,
 * a `never` message none, a `may` message one or none, every reply taken.
 */
function matches(
  customers: number,
  replies: number,
  fits: (customer: number, reply: number) => boolean,
  expectation: (customer: number) => Expectation,
): boolean {
  const memo = new Map<string, boolean>()
  const from = (customer: number, reply: number): boolean => {
    if (customer === customers) return reply === replies
    const key = `${customer}/${reply}`
    const known = memo.get(key)
    if (known !== undefined) return known
    const result =
      (expectation(customer) !== 'must' && from(customer + 1, reply)) ||
      (reply < replies && fits(customer, reply) && from(customer + 1, reply + 1))
    memo.set(key, result)
    return result
  }
  return from(0, 0)
}

/**
 * Every server idle and no job queued: a server that said it was idle may take a job after all,
 * the next of a session whose job another server just finished, so one pass over them is not enough.
 */
async function everyServerIdle(services: readonly ReferenceServer[], deadline: number) {
  for (;;) {
    for (const service of services) await service.switchboard.idle()
    if ((await services[0]!.switchboard.storage.jobs.pending({})) === 0) return
    if (Date.now() > deadline) throw new Error('jobs still queued after 15 s')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** No turn or delivery under way, then no reply pending: polled, with a deadline. */
async function waitUntilIdle(real: Real, model: Model, services: readonly ReferenceServer[]) {
  const deadline = Date.now() + 15_000
  await everyServerIdle(services, deadline)
  for (const customer of model.customers) {
    for (const session of customer.sessions) {
      const id = await sessionIdOf(real, customer, session)
      for (;;) {
        const stored = await storedMessages(real, id)
        if (!stored.some((message) => message.delivery === 'pending')) break
        if (Date.now() > deadline) throw new Error(`replies of ${id} still pending after 15 s`)
        await new Promise((resolve) => setTimeout(resolve, 20))
        await everyServerIdle(services, deadline)
      }
    }
  }
}

export interface World {
  /** The server a command talks to. */
  readonly real: Real
  /** Every server, all on one storage; `real` is one of them. A restart puts a new one in its place. */
  readonly nodes: Real[]
  readonly services: ReferenceServer[]
  /** Starts one more server on the storage, for a restart. */
  readonly startServer?: () => Promise<ReferenceServer>
  /** Set while two operations on one session are checked: an answer may show the other's effect. */
  racing?: boolean
}

/** How a command names the server a part of it goes to, if it names one. */
const onNode = (node: number | undefined) => (node === undefined ? '' : `@${node}`)

/** The server a part of a command goes to: the command's own unless it names one. */
const nodeOf = (world: World, node: number | undefined): Real =>
  node === undefined ? world.real : world.nodes[node % world.nodes.length]!

type Command = fc.AsyncCommand<Model, World>

class SendMessage implements Command {
  constructor(
    readonly customer: number,
    readonly word: Word,
    readonly channel: number,
    readonly transport: number,
    readonly withWebhookId: boolean,
  ) {}
  check = () => true
  async run(model: Model, { real }: World) {
    model.batch += 1
    const { customer, message } = receive(
      model,
      this.customer,
      this.word,
      CHANNELS[this.channel]!,
      TRANSPORTS[this.transport]!,
      model.batch,
      this.withWebhookId,
    )
    const answer = await sendMessage(real, customer.clientId, message)
    expect(answer, `message ${message.text}`).toEqual({ status: 200, body: { ok: true } })
  }
  toString = () =>
    `send(c${this.customer}, ${this.word}, ${CHANNELS[this.channel]}, ${TRANSPORTS[this.transport]}${this.withWebhookId ? ', webhook-id' : ''})`
}

/** A platform retry: the same body again, whenever; the message stays stored once. */
class RepeatMessage implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.sent.length > 0
  async run(model: Model, { real }: World) {
    const { customer, message } = model.sent[this.pick % model.sent.length]!
    const answer = await sendMessage(real, model.customers[customer]!.clientId, message)
    expect(answer, `repeat of ${message.text}`).toEqual({ status: 200, body: { ok: true, duplicate: true } })
    model.duplicateLogs.push({ text: message.text })
  }
  toString = () => `repeat(#${this.pick})`
}

/**
 * Messages sent at once, some customers' at the same time, maybe one id twice at once. A part that
 * names a server goes there, and the first one's second copy to the next server: a platform retry
 * that reaches another process while the first delivery is under way.
 */
class Burst implements Command {
  constructor(
    readonly parts: { customer: number; word: Word; node?: number }[],
    readonly twice: boolean,
  ) {}
  check = () => true
  async run(model: Model, world: World) {
    model.batch += 1
    const batch = model.batch
    // The model places them all before any is sent: none of them can close a session.
    const received = this.parts.map((part, index) =>
      receive(model, part.customer, part.word, CHANNELS[index % 2]!, TRANSPORTS[0], batch, index === 0),
    )
    const sends = received.map(({ customer, message }, index) =>
      sendMessage(nodeOf(world, this.parts[index]!.node), customer.clientId, message),
    )
    if (this.twice) {
      const { customer, message } = received[0]!
      const first = this.parts[0]!.node
      sends.push(
        sendMessage(nodeOf(world, first === undefined ? first : first + 1), customer.clientId, message),
      )
      model.duplicateLogs.push({ text: message.text })
    }
    const answers = await Promise.all(sends)
    for (const [index, answer] of answers.entries()) {
      expect(answer.status, `burst message ${index}: ${JSON.stringify(answer.body)}`).toBe(200)
    }
    // The same id sent twice at once is stored once: one of the two is the duplicate.
    const pair = this.twice ? [answers[0]!.body, answers.at(-1)!.body] : [answers[0]!.body]
    expect(
      pair.filter((body) => body.duplicate === true),
      'duplicates of the first message',
    ).toHaveLength(pair.length - 1)
    for (const body of pair) expect([{ ok: true }, { ok: true, duplicate: true }]).toContainEqual(body)
    for (const answer of answers.slice(1, received.length)) expect(answer.body).toEqual({ ok: true })
  }
  toString = () =>
    `burst(${this.parts.map((part) => `c${part.customer}:${part.word}${onNode(part.node)}`).join(', ')}${this.twice ? ', first twice' : ''})`
}

type Target = 'open' | 'closed'

/** The session an operator command acts on: the customer's open one, or their last closed one. */
function targetOf(model: Readonly<Model>, customer: number, target: Target): ModelSession | undefined {
  const of = model.customers[customer]!
  return target === 'open' ? openSessionOf(of) : closedSessionOf(of)
}

abstract class SessionCommand implements Command {
  constructor(
    readonly customer: number,
    readonly target: Target,
  ) {}
  check = (model: Readonly<Model>) => targetOf(model, this.customer, this.target) !== undefined
  async run(model: Model, world: World) {
    const customer = model.customers[this.customer]!
    const session = targetOf(model, this.customer, this.target)!
    const id = await sessionIdOf(world.real, customer, session)
    await this.apply(model, world, customer, session, await this.request(world, customer, session, id))
  }
  /** The request alone, so a race can send it while a message is on its way. */
  abstract request(world: World, customer: ModelCustomer, session: ModelSession, id: string): Promise<Answer>
  /** The answer checked against the model, and the model changed as it says. */
  abstract apply(
    model: Model,
    world: World,
    customer: ModelCustomer,
    session: ModelSession,
    answer: Answer,
  ): Promise<void>
}

class Pause extends SessionCommand {
  request({ real }: World, _customer: ModelCustomer, _session: ModelSession, id: string) {
    return api(real, 'POST', `/api/sessions/${id}/pause`, { reason: 'operator takes over' })
  }
  async apply(
    model: Model,
    { real }: World,
    _customer: ModelCustomer,
    session: ModelSession,
    answer: Answer,
  ) {
    if (session.state !== 'ongoing') {
      return expectError(answer, 400, 'INVALID_STATE', `pause of ${session.state}`)
    }
    const agents = agentsNow(session)
    session.state = 'paused'
    session.pauseReason = 'operator takes over'
    session.externalReference = undefined
    const observed = expectAgent(real, expectStatus(answer, session, 'pause'), agents, 'pause')
    interrupt(model, session, { observedAgent: observed, stops: true })
  }
  override toString = () => `pause(c${this.customer}, ${this.target})`
}

class Resume extends SessionCommand {
  constructor(
    customer: number,
    target: Target,
    readonly note: string | undefined,
  ) {
    super(customer, target)
  }
  request({ real }: World, _customer: ModelCustomer, _session: ModelSession, id: string) {
    return api(real, 'POST', `/api/sessions/${id}/resume`, this.note === undefined ? {} : { note: this.note })
  }
  async apply(
    _model: Model,
    { real }: World,
    _customer: ModelCustomer,
    session: ModelSession,
    answer: Answer,
  ) {
    if (session.state !== 'paused') {
      return expectError(answer, 400, 'INVALID_STATE', `resume of ${session.state}`)
    }
    session.state = 'ongoing'
    session.pauseReason = undefined
    session.externalReference = undefined
    if (this.note !== undefined && this.note !== '') session.journey.push(`Operator note: ${this.note}`)
    // Back to the agent it was paused with.
    expectAgent(real, expectStatus(answer, session, 'resume'), new Set([session.agent]), 'resume')
  }
  override toString = () => `resume(c${this.customer}, ${this.target}, ${JSON.stringify(this.note)})`
}

class Close extends SessionCommand {
  request({ real }: World, _customer: ModelCustomer, _session: ModelSession, id: string) {
    return api(real, 'POST', `/api/sessions/${id}/close`, { reason: 'done' })
  }
  async apply(
    model: Model,
    { real }: World,
    _customer: ModelCustomer,
    session: ModelSession,
    answer: Answer,
  ) {
    if (session.state === 'closed') return expectError(answer, 400, 'INVALID_STATE', 'close of closed')
    const agents = agentsNow(session)
    session.state = 'closed'
    const observed = expectAgent(real, expectStatus(answer, session, 'close'), agents, 'close')
    interrupt(model, session, { observedAgent: observed, stops: true })
    closeOperatorMessages(model, session)
  }
  override toString = () => `close(c${this.customer}, ${this.target})`
}

/** A close blocks an operator's message not yet sent. */
function closeOperatorMessages(model: Model, session: ModelSession) {
  if (!model.inFlight.has(session)) return
  for (const message of session.operatorMessages) message.expect = 'may'
}

class Reassign extends SessionCommand {
  constructor(
    customer: number,
    target: Target,
    readonly agent: AgentName | 'unknown',
    readonly operatorId: number | undefined,
  ) {
    super(customer, target)
  }
  request({ real }: World, _customer: ModelCustomer, _session: ModelSession, id: string) {
    const agentId = this.agent === 'unknown' ? 2_000_000_000 : real.agentIds[this.agent]
    return api(real, 'POST', `/api/sessions/${id}/reassign`, {
      agentId,
      ...(this.operatorId === undefined ? {} : { operatorId: this.operatorId }),
    })
  }
  async apply(model: Model, world: World, _customer: ModelCustomer, session: ModelSession, answer: Answer) {
    const { real } = world
    if (this.agent === 'unknown' && session.state === 'closed') {
      // Both rules of CONTRACT §8 apply and it names no order: either code.
      expect(answer.status).toBe(400)
      return expect(['INVALID_STATE', 'VALIDATION_ERROR']).toContain(
        (answer.body.error as { code: string }).code,
      )
    }
    if (session.state === 'closed') return expectError(answer, 400, 'INVALID_STATE', 'reassign of closed')
    if (this.agent === 'unknown') return expectError(answer, 400, 'VALIDATION_ERROR', 'reassign to no agent')
    const agent = this.agent
    const stops = agent === 'human' && session.state === 'ongoing'
    if (agent === 'human' && world.racing) {
      // The answer is the session as the transfer left it, after the other operation if it came
      // in between; and a close, resume or reassign before the call drops the transfer.
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      expect(answer.body.id).toBe(session.id)
      const shown = answer.body as { state: State; pauseState?: { externalReference?: string } }
      const made = shown.state === 'paused' && shown.pauseState?.externalReference !== undefined
      session.transfers.push({ operatorId: this.operatorId, made })
      if (session.state === 'ongoing') session.pauseReason = undefined
      session.externalReference = UNKNOWN
      session.state = 'paused'
    } else if (agent === 'human') {
      session.transfers.push({ operatorId: this.operatorId, made: true })
      const reference = (answer.body.pauseState as { externalReference?: string } | undefined)
        ?.externalReference
      if (session.state === 'ongoing') {
        session.pauseReason = undefined
        // The platform's request id of this transfer (CONTRACT §6).
        expect(reference, 'externalReference of the transfer').toMatch(/^transfer-\d+$/)
        session.externalReference = reference
      } else {
        // Already paused by an operator: that pause's metadata stays; the transfer's reference may join it.
        session.externalReference = reference ?? session.externalReference
      }
      session.state = 'paused'
    }
    if (!(agent === 'human' && world.racing)) {
      expectAgent(real, expectStatus(answer, session, 'reassign'), new Set([agent]), 'reassign')
    }
    interrupt(model, session, { newAgent: agent, stops })
    session.agent = agent
    session.paths = session.paths.map((path) => [...path, { agent, via: 'manual' }])
  }
  override toString = () =>
    `reassign(c${this.customer}, ${this.target}, ${this.agent}${this.operatorId === undefined ? '' : `, operator ${this.operatorId}`})`
}

class OperatorMessage extends SessionCommand {
  text = ''
  request({ real }: World, _customer: ModelCustomer, _session: ModelSession, id: string) {
    this.text = `Operator says ${randomBytes(4).toString('hex')}`
    return api(real, 'POST', `/api/sessions/${id}/messages`, { text: this.text })
  }
  async apply(model: Model, _world: World, _customer: ModelCustomer, session: ModelSession, answer: Answer) {
    if (session.state === 'closed') {
      return expectError(answer, 400, 'INVALID_STATE', 'operator message on closed')
    }
    expect(answer.status, JSON.stringify(answer.body)).toBe(201)
    expect(answer.body).toMatchObject({ role: 'operator', text: this.text })
    session.operatorMessages.push({ text: this.text, expect: 'must' })
    model.inFlight.add(session)
  }
  override toString = () => `operator-message(c${this.customer}, ${this.target})`
}

type Hook = 'close_dialog' | 'close_request' | 'dialog_transferred'

/** A status hook of the platform; `target` is always the open session, if any. */
class StatusHook extends SessionCommand {
  webhookId: string | undefined
  constructor(
    customer: number,
    readonly hook: Hook,
    readonly operatorId: string | undefined,
    readonly withWebhookId: boolean,
  ) {
    super(customer, 'open')
  }
  override check = () => true
  override async run(model: Model, world: World) {
    const customer = model.customers[this.customer]!
    const session = openSessionOf(customer)
    if (session === undefined) {
      const answer = await this.request(world, customer)
      this.remember(model, customer)
      model.hookLogs.push({ outcome: 'ignored', session: undefined })
      return void expect(answer, `${this.hook} with no open session`).toEqual({
        status: 200,
        body: { ok: true, ignored: 'no open session' },
      })
    }
    await super.run(model, world)
  }
  payload(customer: ModelCustomer) {
    return {
      hook_type: this.hook,
      client_id: customer.clientId,
      ...(this.operatorId === undefined ? {} : { operator_id: this.operatorId }),
    }
  }
  request({ real }: World, customer: ModelCustomer) {
    this.webhookId = this.withWebhookId ? `hook-${randomBytes(6).toString('hex')}` : undefined
    return webhook(real, this.payload(customer), this.webhookId)
  }
  /** A hook with a `webhook-id` the platform may send again. */
  remember(model: Model, customer: ModelCustomer) {
    if (this.webhookId !== undefined) {
      model.hooksSent.push({ payload: this.payload(customer), webhookId: this.webhookId })
    }
  }
  async apply(model: Model, { real }: World, customer: ModelCustomer, session: ModelSession, answer: Answer) {
    this.remember(model, customer)
    if (session.state === 'closed') {
      // Closed by someone else first (a race): the hook finds no open session.
      model.hookLogs.push({ outcome: 'ignored', session: undefined })
      return void expect(answer, `${this.hook} after a close`).toEqual({
        status: 200,
        body: { ok: true, ignored: 'no open session' },
      })
    }
    expect(answer, this.hook).toEqual({ status: 200, body: { ok: true } })
    const transferred = this.hook === 'dialog_transferred'
    model.hookLogs.push({ outcome: transferred ? 'session_transfer_external' : 'session_close', session })
    if (transferred) {
      const operator = this.operatorId === undefined ? '' : ` to operator ${this.operatorId}`
      session.journey.push(`Dialog transferred on the platform${operator}`)
      return
    }
    session.state = 'closed'
    let observed: AgentName | undefined
    if (session.routingPending) {
      // The hook's answer names no agent: while entry routing raced the close, a read tells.
      const view = await api(real, 'GET', `/api/sessions/${session.id}`)
      const agentId = (view.body as { activeAgentId: number }).activeAgentId
      observed = expectAgent(real, agentId, agentsNow(session), this.hook)
    }
    interrupt(model, session, { ...(observed === undefined ? {} : { observedAgent: observed }), stops: true })
    closeOperatorMessages(model, session)
  }
  override toString = () =>
    `hook(c${this.customer}, ${this.hook}${this.operatorId === undefined ? '' : `, ${this.operatorId}`}${this.withWebhookId ? ', webhook-id' : ''})`
}

/** The platform sends a status hook again with its `webhook-id`: nothing changes a second time. */
class RepeatHook implements Command {
  constructor(readonly pick: number) {}
  check = (model: Readonly<Model>) => model.hooksSent.length > 0
  async run(model: Model, { real }: World) {
    const { payload, webhookId } = model.hooksSent[this.pick % model.hooksSent.length]!
    const answer = await webhook(real, payload, webhookId)
    expect(answer, `repeat of ${webhookId}`).toEqual({ status: 200, body: { ok: true, duplicate: true } })
    model.duplicateLogs.push({ text: undefined })
  }
  toString = () => `repeat-hook(#${this.pick})`
}

/**
 * A customer message sent while an operator or the platform acts on the customer's open session:
 * it lands before or after the action, each of which the model allows; it is stored once either
 * way, and a close makes it open a new session or stay in the closed one, never both.
 */
class Race implements Command {
  constructor(
    readonly customer: number,
    readonly words: Word[],
    readonly action: SessionCommand,
    /** The servers the action and each message go to, if they name any. */
    readonly nodes?: { readonly action: number; readonly messages: readonly number[] },
  ) {}
  check = (model: Readonly<Model>) => openSessionOf(model.customers[this.customer]!) !== undefined
  async run(model: Model, world: World) {
    const { real } = world
    const customer = model.customers[this.customer]!
    const session = openSessionOf(customer)!
    const id = await sessionIdOf(real, customer, session)
    model.batch += 1
    const messages = this.words.map((word, index) =>
      newMessage(model, customer, word, CHANNELS[index % 2]!, TRANSPORTS[1], index === 1),
    )
    const before = dueOf(session)
    const [acted, ...received] = await Promise.all([
      this.action.request({ ...world, real: nodeOf(world, this.nodes?.action) }, customer, session, id),
      ...messages.map((message, index) =>
        sendMessage(nodeOf(world, this.nodes?.messages[index]), customer.clientId, message),
      ),
    ])
    for (const [index, answer] of received.entries()) {
      expect(answer, `message ${messages[index]!.text}`).toEqual({ status: 200, body: { ok: true } })
    }
    await this.action.apply(model, world, customer, session, acted!)
    let opened: ModelSession | undefined
    for (const message of messages) {
      if (session.state === 'closed' && !(await holds(real, id, message.text))) {
        // Stored after the close: in the one new session all such messages share.
        if (opened === undefined) {
          opened = newSession()
          customer.sessions.push(opened)
        }
        place(model, this.customer, opened, message, { expect: 'must', agents: ['routed'] }, model.batch)
        continue
      }
      // Stored before a close, or before or after another change: either is allowed.
      const after =
        session.state === 'closed' ? { expect: 'never' as const, agent: session.agent } : dueOf(session)
      const expectation = before.expect === after.expect ? before.expect : 'may'
      const agents = [...agentsOf(before), ...agentsOf(after)]
      place(model, this.customer, session, message, { expect: expectation, agents }, model.batch)
    }
  }
  toString = () =>
    `race(c${this.customer}, ${this.words.map((word, index) => `${word}${onNode(this.nodes?.messages[index])}`).join(' ')}, ${String(this.action)}${onNode(this.nodes?.action)})`
}

/** The agents that may answer, once entry routing can no longer be told apart. */
function agentsOf(due: { agent: AgentName | 'routed' }): AgentName[] {
  return due.agent === 'routed' ? ['reception', 'sales'] : [due.agent]
}

/**
 * Two operations on one open session at once: operators, the platform. The answers must be those
 * of one order or the other, and the session ends as that order leaves it.
 */
class Clash implements Command {
  constructor(
    readonly customer: number,
    readonly first: SessionCommand,
    readonly second: SessionCommand,
    /** The servers the two go to, if they name any. */
    readonly nodes?: readonly [number, number],
  ) {}
  check = (model: Readonly<Model>) => openSessionOf(model.customers[this.customer]!) !== undefined
  async run(model: Model, world: World) {
    const customer = model.customers[this.customer]!
    const session = openSessionOf(customer)!
    const id = await sessionIdOf(world.real, customer, session)
    const sessionIndex = customer.sessions.indexOf(session)
    const answers = await Promise.all([
      this.first.request({ ...world, real: nodeOf(world, this.nodes?.[0]) }, customer, session, id),
      this.second.request({ ...world, real: nodeOf(world, this.nodes?.[1]) }, customer, session, id),
    ])
    const final = (await api(world.real, 'GET', `/api/sessions/${id}`)).body as {
      state: State
      activeAgentId: number
      metadata: { sharedContext: { journey: { step: string }[] } }
    }
    const failures: unknown[] = []
    for (const order of [
      [0, 1],
      [1, 0],
    ] as const) {
      const copy = structuredClone(model)
      const copied = copy.customers[this.customer]!
      const both = [this.first, this.second]
      try {
        for (const index of order) {
          await both[index]!.apply(
            copy,
            { ...world, racing: true },
            copied,
            copied.sessions[sessionIndex]!,
            answers[index]!,
          )
        }
        // Answers alone may fit both orders; the session as they left it tells which one it was.
        const after = copied.sessions[sessionIndex]!
        expect(after.state, 'state after both').toBe(final.state)
        expect(after.journey, 'journey after both').toEqual(
          final.metadata.sharedContext.journey.map((entry) => entry.step),
        )
        if (!after.routingPending) {
          expect(agentNameOf(world.real.agentIds, final.activeAgentId), 'agent after both').toBe(after.agent)
        }
        Object.assign(model, copy)
        return
      } catch (error) {
        failures.push(error)
      }
    }
    throw new Error(
      `neither order explains the answers ${JSON.stringify(answers)}:\n${failures.map(String).join('\n')}`,
    )
  }
  toString = () =>
    `clash(c${this.customer}, ${String(this.first)}${onNode(this.nodes?.[0])}, ${String(this.second)}${onNode(this.nodes?.[1])})`
}

/** Whether the session holds a customer message with this text. */
async function holds(real: Real, sessionId: string, text: string): Promise<boolean> {
  return (await storedMessages(real, sessionId)).some(
    (message) => message.role === 'customer' && message.text === text,
  )
}

class Read extends SessionCommand {
  override async run(model: Model, { real }: World) {
    const customer = model.customers[this.customer]!
    const session = targetOf(model, this.customer, this.target)!
    await readSession(real, customer, session, `read of ${customer.clientId}`)
  }
  request = (): Promise<Answer> => Promise.reject(new Error('a read is not raced'))
  apply = async () => undefined
  override toString = () => `read(c${this.customer}, ${this.target})`
}

class Settle implements Command {
  check = () => true
  async run(model: Model, world: World) {
    await settle(world, model)
  }
  toString = () => 'settle'
}

/** A command sent to one of the servers; the parts of a burst, race or clash may name others. */
class OnNode implements Command {
  constructor(
    readonly node: number,
    readonly command: Command,
  ) {}
  check = (model: Readonly<Model>) => this.command.check(model)
  run = (model: Model, world: World) => this.command.run(model, { ...world, real: world.nodes[this.node]! })
  toString = () => `${String(this.command)}@${this.node}`
}

/**
 * The platform delivers one status hook, with its `webhook-id`, to every server at once (a retry
 * that overtakes the first try): one of them acts on it, the others answer that it is a duplicate.
 */
class HookOnEveryNode extends StatusHook {
  duplicates = 0
  constructor(customer: number, hook: Hook) {
    super(customer, hook, undefined, true)
  }
  override async request({ nodes }: World, customer: ModelCustomer) {
    const webhookId = `hook-${randomBytes(6).toString('hex')}`
    this.webhookId = webhookId
    const answers = await Promise.all(nodes.map((node) => webhook(node, this.payload(customer), webhookId)))
    const duplicate = { status: 200, body: { ok: true, duplicate: true } }
    const acted = answers.filter((answer) => JSON.stringify(answer) !== JSON.stringify(duplicate))
    expect(acted, `${this.hook} on every server: ${JSON.stringify(answers)}`).toHaveLength(1)
    this.duplicates = answers.length - 1
    return acted[0]!
  }
  override remember(model: Model, customer: ModelCustomer) {
    super.remember(model, customer)
    for (let count = 0; count < this.duplicates; count += 1) model.duplicateLogs.push({ text: undefined })
  }
  override toString = () => `hook-on-every-server(c${this.customer}, ${this.hook})`
}

/**
 * The owner changes the integration through one server while the server the platform reaches has
 * it remembered from a webhook (CONTRACT §5): a rotated secret stops working and the new one works
 * at once, a switched-off integration answers 403 until it is switched on again. The platform
 * then sends the refused message again, and it is taken.
 */
class IntegrationChange implements Command {
  constructor(
    readonly change: 'rotate-secret' | 'switch-off',
    readonly customer: number,
    readonly word: Word,
    readonly changedOn: number,
  ) {}
  check = () => true
  async run(model: Model, world: World) {
    const { real } = world
    const owner = nodeOf(world, this.changedOn)
    const path = `/api/integrations/${real.integrationId}`
    // A fresh read of the integration, which the server then remembers.
    const verified = await fetch(`${real.url}/api/webhook/msgplatform/${real.integrationId}`)
    expect(await verified.json(), 'verification').toEqual({ ok: true, verified: true })
    model.batch += 1
    const { customer, message } = receive(
      model,
      this.customer,
      this.word,
      CHANNELS[0],
      TRANSPORTS[0],
      model.batch,
    )
    const payload = messagePayload(customer.clientId, message)
    if (this.change === 'rotate-secret') {
      const rotated = await api(owner, 'POST', `${path}/rotate-secret`)
      expect(rotated.status, JSON.stringify(rotated.body)).toBe(200)
      const stale = real.signing.secret
      real.signing.secret = String(rotated.body.webhookSecret)
      expect(real.signing.secret).not.toBe(stale)
      const refused = await webhook(real, payload, undefined, stale)
      expectError(refused, 401, 'INVALID_SIGNATURE', 'a message signed with the secret rotated away')
      model.rejectedLogs.push(401)
    } else {
      const off = await api(owner, 'PATCH', path, { active: false })
      expect({ status: off.status, active: off.body.active }).toEqual({ status: 200, active: false })
      const refused = await webhook(real, payload)
      expectError(refused, 403, 'INTEGRATION_INACTIVE', 'a message to a switched-off integration')
      model.rejectedLogs.push(403)
      const on = await api(owner, 'PATCH', path, { active: true })
      expect({ status: on.status, active: on.body.active }).toEqual({ status: 200, active: true })
    }
    const taken = await sendMessage(real, customer.clientId, message)
    expect(taken, `message ${message.text} sent again`).toEqual({ status: 200, body: { ok: true } })
  }
  toString = () => `${this.change}@${this.changedOn}(c${this.customer}, ${this.word})`
}

/**
 * A server shuts down as on SIGTERM (CONTRACT §11: it lets its turns and deliveries finish) once
 * it answered `closeAfter` of the messages the platform sends it, then starts again. A message it
 * acknowledged is kept and answered; one it did not (the connection refused or cut, a 5xx) the
 * platform sends to another server, which stores it once: it is new there, or a duplicate of the
 * one stored after all.
 */
class Restart implements Command {
  constructor(
    readonly node: number,
    readonly parts: { customer: number; word: Word }[],
    readonly closeAfter: number,
  ) {}
  check = () => true
  async run(model: Model, world: World) {
    const index = this.node % world.nodes.length
    const stopping = world.nodes[index]!
    const other = world.nodes[(index + 1) % world.nodes.length]!
    model.batch += 1
    const batch = model.batch
    const received = this.parts.map((part, position) =>
      receive(model, part.customer, part.word, CHANNELS[position % 2]!, TRANSPORTS[1], batch, position === 0),
    )
    let answered = 0
    let closing: Promise<void> | undefined
    const close = () => {
      closing ??= world.services[index]!.close()
    }
    if (this.closeAfter === 0) close()
    const answers = await Promise.all(
      received.map(async ({ customer, message }) => {
        const answer = await unlessRefused(sendMessage(stopping, customer.clientId, message))
        answered += 1
        if (answered >= this.closeAfter) close()
        return answer
      }),
    )
    close()
    await closing
    // In its place before anything is checked, so a failure leaves the next run two servers.
    const started = await world.startServer!()
    world.services[index] = started
    world.nodes[index] = throughServer(stopping, started.url)
    for (const [position, answer] of answers.entries()) {
      const { customer, message } = received[position]!
      if (answer !== undefined) {
        expect(answer, `message ${message.text} during the shutdown`).toEqual({
          status: 200,
          body: { ok: true },
        })
        continue
      }
      const again = await sendMessage(other, customer.clientId, message)
      expect(again.status, `message ${message.text} sent again`).toBe(200)
      expect([{ ok: true }, { ok: true, duplicate: true }]).toContainEqual(again.body)
      if (again.body.duplicate === true) model.duplicateLogs.push({ text: message.text })
    }
  }
  toString = () =>
    `restart@${this.node}(${this.parts.map((part) => `c${part.customer}:${part.word}`).join(', ')}, closed after ${this.closeAfter})`
}

/** The answer, or undefined when the server refused the request or failed it (no answer, a 5xx). */
async function unlessRefused(answer: Promise<Answer>): Promise<Answer | undefined> {
  try {
    return await answer
  } catch (error) {
    // fetch fails with a TypeError when the connection is refused or cut; checkedAnswer throws on a 5xx.
    if (error instanceof TypeError || /answered 5\d\d/.test(String(error))) return undefined
    throw error
  }
}

/**
 * The commands against `servers` servers on one storage. With one, every command goes to it; with
 * more, fast-check picks the server of each command and of each part of a burst, race or clash, and
 * adds the same message or status hook delivered to every server at once, changes of the
 * integration one server remembers made through another, and restarts.
 */
export function modelCommands(servers = 1): fc.Arbitrary<Command>[] {
  const single = servers === 1
  const node = fc.nat({ max: servers - 1 })
  const commands = modelCommandsOn({
    node: single ? fc.constant(undefined) : node,
    nodes: (count) =>
      single ? fc.constant(undefined) : fc.array(node, { minLength: count, maxLength: count }),
  })
  if (single) return commands
  return [
    ...commands,
    fc
      .tuple(customerIndex, word, node)
      .map(([customer, w, first]) => new Burst([{ customer, word: w, node: first }], true)),
    fc
      .tuple(
        customerIndex,
        fc.constantFrom('close_dialog', 'dialog_transferred') as fc.Arbitrary<
          'close_dialog' | 'dialog_transferred'
        >,
      )
      .map(([customer, hook]) => new HookOnEveryNode(customer, hook)),
    fc
      .tuple(
        fc.constantFrom('rotate-secret', 'switch-off') as fc.Arbitrary<'rotate-secret' | 'switch-off'>,
        customerIndex,
        word,
        node,
      )
      .map(([change, customer, w, on]) => new IntegrationChange(change, customer, w, on)),
  ]
    .map((arbitrary) => fc.tuple(node, arbitrary).map(([at, command]): Command => new OnNode(at, command)))
    .concat(
      fc
        .tuple(
          node,
          fc.array(fc.record({ customer: customerIndex, word }), { minLength: 1, maxLength: 3 }),
          fc.nat({ max: 3 }),
        )
        .map(([at, parts, closeAfter]) => new Restart(at, parts, Math.min(closeAfter, parts.length))),
    )
}

const customerIndex = fc.nat({ max: CUSTOMERS - 1 })
const word = fc.constantFrom(...WORDS)
const target = fc.constantFrom<Target>('open', 'open', 'open', 'closed')

/** Operations that may meet on one session at the same moment. */
const clashing = fc.constantFrom<((customer: number) => SessionCommand)[]>(
  (customer) => new Pause(customer, 'open'),
  (customer) => new Resume(customer, 'open', 'back'),
  (customer) => new Close(customer, 'open'),
  (customer) => new Reassign(customer, 'open', 'human', 7),
  (customer) => new Reassign(customer, 'open', 'sales', undefined),
  (customer) => new OperatorMessage(customer, 'open'),
  (customer) => new StatusHook(customer, 'close_dialog', undefined, false),
  (customer) => new StatusHook(customer, 'dialog_transferred', 'op-9', false),
)

/** The commands; `node` and `nodes` pick the servers their parts go to, if any. */
function modelCommandsOn(pick: {
  node: fc.Arbitrary<number | undefined>
  nodes: (count: number) => fc.Arbitrary<number[] | undefined>
}): fc.Arbitrary<Command>[] {
  return [
    fc
      .tuple(customerIndex, word, fc.nat({ max: 1 }), fc.nat({ max: 1 }), fc.boolean())
      .map(([customer, w, channel, transport, id]) => new SendMessage(customer, w, channel, transport, id)),
    fc
      .tuple(customerIndex, word, fc.nat({ max: 1 }), fc.nat({ max: 1 }), fc.boolean())
      .map(([customer, w, channel, transport, id]) => new SendMessage(customer, w, channel, transport, id)),
    fc.nat().map((pick) => new RepeatMessage(pick)),
    fc
      .tuple(
        fc.array(fc.record({ customer: customerIndex, word, node: pick.node }), {
          minLength: 2,
          maxLength: 3,
        }),
        fc.boolean(),
      )
      .map(([parts, twice]) => new Burst(parts, twice)),
    fc.tuple(customerIndex, target).map(([customer, t]) => new Pause(customer, t)),
    fc
      .tuple(
        customerIndex,
        target,
        fc.option(fc.constantFrom('', 'called back', 'refund agreed'), { nil: undefined }),
      )
      .map(([customer, t, note]) => new Resume(customer, t, note)),
    fc.tuple(customerIndex, target).map(([customer, t]) => new Close(customer, t)),
    fc
      .tuple(
        customerIndex,
        target,
        fc.constantFrom<AgentName | 'unknown'>('reception', 'sales', 'human', 'human', 'unknown'),
        fc.option(fc.constantFrom(7, 42), { nil: undefined }),
      )
      .map(([customer, t, agent, operatorId]) => new Reassign(customer, t, agent, operatorId)),
    fc.tuple(customerIndex, target).map(([customer, t]) => new OperatorMessage(customer, t)),
    fc
      .tuple(
        customerIndex,
        fc.constantFrom(
          'close_dialog',
          'close_request',
          'dialog_transferred',
          'dialog_transferred',
        ) as fc.Arbitrary<'close_dialog' | 'close_request' | 'dialog_transferred'>,
        fc.option(fc.constantFrom('op-5'), { nil: undefined }),
        fc.boolean(),
      )
      .map(([customer, hook, operatorId, id]) => new StatusHook(customer, hook, operatorId, id)),
    fc.nat().map((pick) => new RepeatHook(pick)),
    fc.tuple(customerIndex, target).map(([customer, t]) => new Read(customer, t)),
    fc.constant(new Settle()),
    fc
      .tuple(customerIndex, clashing, clashing, pick.nodes(2))
      .map(
        ([customer, first, second, nodes]) =>
          new Clash(customer, first(customer), second(customer), nodes as [number, number] | undefined),
      ),
    fc
      .tuple(
        customerIndex,
        fc.array(word, { minLength: 1, maxLength: 3 }),
        fc.constantFrom(
          'pause',
          'close',
          'close_dialog',
          'dialog_transferred',
          'human',
          'sales',
          'reception',
        ),
        pick.nodes(4),
      )
      .map(([customer, w, action, nodes]) => {
        const acting =
          action === 'pause'
            ? new Pause(customer, 'open')
            : action === 'close'
              ? new Close(customer, 'open')
              : action === 'close_dialog' || action === 'dialog_transferred'
                ? new StatusHook(customer, action, undefined, true)
                : new Reassign(customer, 'open', action, undefined)
        return new Race(
          customer,
          w,
          acting,
          nodes === undefined ? undefined : { action: nodes[0]!, messages: nodes.slice(1) },
        )
      }),
  ]
}

/** A model of a company no customer has written to yet; `run` tells its customers from other runs'. */
export function newModel(run: number): Model {
  return {
    customers: Array.from({ length: CUSTOMERS }, (_, index) => ({
      clientId: `r${run}-c${index}`,
      sessions: [],
    })),
    sent: [],
    batch: 0,
    counter: 0,
    inFlight: new Set(),
    hookLogs: [],
    duplicateLogs: [],
    hooksSent: [],
    rejectedLogs: [],
  }
}

/**
 * A company of its own per run, made through the server at `url`: an entry agent routing
 * `invoices` to Sales, and a human queue. The integration replies through `platform`.
 */
export async function setUpCompany(url: string, platform: FakePlatform, run: number): Promise<Real> {
  const post = async (path: string, body: unknown, token?: string) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify(body),
    })
    const answer = checkedAnswer(`setup ${path}`, response.status, await response.text())
    expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBeLessThan(300)
    return answer.body
  }
  const credentials = { email: `owner-${run}@http-model.test`, password: 'correct horse battery' }
  await post('/api/auth/register', { ...credentials, companyName: `Shop ${run}` })
  const login = (await post('/api/auth/login', credentials)) as { session: { access_token: string } }
  const token = login.session.access_token
  const knowledge = (agent: AgentName) => WORDS.map((each) => replyOf(agent, each)).join('\n\n')
  const sales = (await post('/api/agents', { name: 'Sales', role: 'sales' }, token)) as { id: number }
  await post(`/api/agents/${sales.id}/knowledge`, { title: 'Sales', content: knowledge('sales') }, token)
  const human = (await post('/api/agents', { name: 'Operators', kind: 'human' }, token)) as { id: number }
  const reception = (await post(
    '/api/agents',
    {
      name: 'Reception',
      routingConfig: {
        enabled: true,
        routes: [{ id: 'sales', agentId: sales.id, description: 'invoices' }],
      },
    },
    token,
  )) as { id: number }
  await post(
    `/api/agents/${reception.id}/knowledge`,
    { title: 'Reception', content: knowledge('reception') },
    token,
  )
  const integration = (await post(
    '/api/integrations',
    {
      type: 'msgplatform',
      name: 'Platform',
      entryAgentId: reception.id,
      config: { apiBaseUrl: platform.url, apiToken: PLATFORM_TOKEN },
    },
    token,
  )) as { id: string; webhookSecret: string }
  return {
    url,
    token,
    integrationId: integration.id,
    signing: { secret: integration.webhookSecret },
    agentIds: { reception: reception.id, sales: sales.id, human: human.id },
    platform,
  }
}

/** The same company as `real`, through the server at `url`. */
export const throughServer = (real: Real, url: string): Real => ({ ...real, url })
