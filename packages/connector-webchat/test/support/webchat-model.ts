import type { LlmProvider } from '@switchboard/core'
import { createFakePasswordHasher } from '@switchboard/core/testing'
import { type ReferenceServer, readConfig, startReferenceServer } from '@switchboard/reference-server'
import fc from 'fast-check'
import { expect } from 'vitest'
import WebSocket from 'ws'
import { connectVisitor, type Frame, type Visitor } from './visitor.js'

/*
 * The webchat model (webchat-model.test.ts says what it checks) against one reference server or
 * several on one database: fast-check picks the server each tab connects to and each operator
 * request goes to, and the model waits for every server to be idle.
 */

const VISITORS = 2
const TABS_PER_VISITOR = 2
/** CONTRACT §7: 20 message frames (and apart, 20 history frames) per connection in 10 s. */
const RATE_LIMIT = 20
const RATE_WINDOW_MS = 10_000

type State = 'ongoing' | 'paused' | 'closed'

/**
 * Answers every turn with `re: ` and the customer's message, so each reply names the message it
 * answers. It takes a few milliseconds, the same for the same text, so operators' changes land
 * mid-turn now and then.
 */
const echoModel: LlmProvider = {
  name: 'echo',
  async complete(request) {
    const last = [...request.messages].reverse().find((message) => message.role === 'user')
    const text = last?.content ?? ''
    await new Promise((resolve) => setTimeout(resolve, (text.length * 7) % 23))
    return { text: `re: ${text}`, toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } }
  },
}

type Api = <T = Record<string, unknown>>(
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: T }>

/** One reference server, and the company's API through it. */
export interface ModelServer {
  readonly reference: ReferenceServer
  readonly api: Api
  /** Sessions this server's workers ran a turn of, to count what the runs exercised. */
  readonly turnsRan: Set<string>
}

/** The servers the model runs against, with one company and its agent; `api` goes to the first. */
export interface ModelService {
  readonly servers: readonly ModelServer[]
  readonly agentId: number
  readonly api: Api
  close(): Promise<void>
}

/**
 * `count` reference servers on the storage of `environment` (each with its own pool, bus and
 * workers), started together: they share nothing but that storage.
 */
export async function startModelService(
  environment: Record<string, string>,
  count = 1,
): Promise<ModelService> {
  const config = readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent', ...environment })
  const references = await Promise.all(
    Array.from({ length: count }, () =>
      startReferenceServer(config, { passwordHasher: createFakePasswordHasher(), model: echoModel }),
    ),
  )
  const call = async <T>(base: string, method: string, path: string, body: unknown, token?: string) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await response.text()
    return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as T }
  }
  const first = references[0]!.url
  const owner = { email: `owner-${process.pid}@model.test`, password: 'correct horse' }
  await call(first, 'POST', '/api/auth/register', { ...owner, companyName: 'Shop' })
  const login = await call<{ session: { access_token: string } }>(first, 'POST', '/api/auth/login', owner)
  const token = login.body.session.access_token
  const agent = await call<{ id: number }>(first, 'POST', '/api/agents', { name: 'Concierge' }, token)
  const servers = references.map((reference): ModelServer => {
    const turnsRan = new Set<string>()
    reference.switchboard.events.on('turn-started', (event) => turnsRan.add(event.sessionId))
    return {
      reference,
      api: (method, path, body) => call(reference.url, method, path, body, token),
      turnsRan,
    }
  })
  return {
    servers,
    agentId: agent.body.id,
    api: servers[0]!.api,
    close: async () => {
      await Promise.all(references.map((reference) => reference.close()))
    },
  }
}

// ---------------------------------------------------------------------------------------------
// The model

interface SessionModel {
  readonly id: string
  readonly visitor: number
  state: State
  /** Operator changes so far: a reply is certain only for a message no change followed. */
  changes: number
}

interface SentMessage {
  readonly visitor: number
  readonly text: string
  readonly clientMessageId?: string
  /** Its socket was cut before its ack: stored once, or not at all, wherever the visitor was. */
  readonly cutOff?: boolean
  /** Set once acked. */
  id?: string
  /** Where it must be stored, when the model knows. */
  sessionId?: string
  stateAtAck?: State
  changesAtAck?: number
}

interface Tab {
  readonly id: number
  readonly visitor: number
  /** The index of the server holding its socket. */
  readonly server: number
  readonly socket: Visitor
  open: boolean
  /** The session it follows now. */
  sessionId: string
  /** Every session frame it must have got, in order. */
  readonly sessions: string[]
  /** Every state frame it must have got, in order. */
  readonly states: State[]
  /** Messages acked on this tab: never sent back to it as message frames. */
  readonly own: Set<string>
  /** Messages it must get as they happen, unless their delivery was blocked. */
  readonly mustSee: Set<string>
  /** Customer messages (by text) whose reply, if any and not blocked, it must get as it happens. */
  readonly repliesOf: Set<string>
  /** Frame index ranges that answer a `history` request: resent, not live. */
  readonly historyWindows: [number, number][]
  readonly messageTimes: number[]
  readonly historyTimes: number[]
}

interface VisitorModel {
  token?: string
  visitorId?: string
  /** The latest session the visitor is known to have. */
  sessionId?: string
  readonly clientMessageIds: string[]
}

interface World {
  readonly service: ModelService
  readonly integrationId: string
  readonly visitors: VisitorModel[]
  readonly sessions: Map<string, SessionModel>
  readonly sent: SentMessage[]
  readonly operatorMessages: { id: string; sessionId: string; text: string }[]
  readonly tabs: Tab[]
  counter: number
  /** Message ids of other integrations' runs, for a `since` that names no message here. */
  readonly foreignMessageIds: string[]
}

interface StoredMessage {
  id: string
  role: string
  text: string
  agentId?: number
  at: string
  delivery?: string
}
interface StoredSession {
  id: string
  state: State
  customer: { clientId: string }
  messages: StoredMessage[]
}

type Command = fc.AsyncCommand<World, World>

/** What the runs exercised, printed with WEBCHAT_MODEL_DEBUG=1 to see the generator reaches it all. */
const coverage = new Map<string, number>()
const saw = (what: string) => coverage.set(what, (coverage.get(what) ?? 0) + 1)

/** The server a command goes to: undefined with one server. */
const serverOf = (world: Readonly<World>, server: number | undefined) =>
  world.service.servers[(server ?? 0) % world.service.servers.length]!
const onServer = (server: number | undefined) => (server === undefined ? '' : `, server ${server}`)

const openTabs = (world: Readonly<World>) => world.tabs.filter((tab) => tab.open)
const pickTab = (world: Readonly<World>, pick: number) => {
  const open = openTabs(world)
  return open[pick % open.length]!
}

async function waitUntil(condition: () => boolean, what: () => string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`)
    await new Promise((resolve) => setTimeout(resolve, 3))
  }
}

/** The index of the first frame at or after `from` that matches. */
async function frameAfter(tab: Tab, from: number, match: (frame: Frame) => boolean): Promise<number> {
  const frames = tab.socket.frames
  let found = -1
  await waitUntil(
    () => {
      for (let index = from; index < frames.length; index += 1) {
        if (match(frames[index]!)) {
          found = index
          return true
        }
      }
      return false
    },
    () => `a frame on tab ${tab.id} after #${from}; got ${JSON.stringify(frames.slice(from))}`,
  )
  return found
}

const isAnswer = (frame: Frame) => frame.type === 'ack' || frame.type === 'error'

/** 'yes', 'no' or 'either' (too close to the window's edge to tell from the client's clock). */
function limited(times: readonly number[], now: number): 'yes' | 'no' | 'either' {
  const surely = times.filter((time) => time > now - RATE_WINDOW_MS + 1000).length
  const maybe = times.filter((time) => time > now - RATE_WINDOW_MS - 1000).length
  if (surely >= RATE_LIMIT) return 'yes'
  if (maybe < RATE_LIMIT) return 'no'
  return 'either'
}

/** The frames of a stored message as the socket sends it (CONTRACT §7). */
const asFrame = (message: StoredMessage) => ({
  type: 'message',
  messageId: message.id,
  role: message.role,
  text: message.text,
  ...(message.agentId === undefined ? {} : { agentId: message.agentId }),
  at: message.at,
})

function liveMessageFrames(tab: Tab): Frame[] {
  return tab.socket.frames.filter(
    (frame, index) =>
      frame.type === 'message' && !tab.historyWindows.some(([start, end]) => index > start && index < end),
  )
}

// ---------------------------------------------------------------------------------------------
// Commands

class Connect implements Command {
  constructor(
    readonly visitor: number,
    readonly server: number | undefined,
  ) {}
  check(world: Readonly<World>) {
    return world.tabs.filter((tab) => tab.open && tab.visitor === this.visitor).length < TABS_PER_VISITOR
  }
  async run(world: World) {
    const visitor = world.visitors[this.visitor]!
    const server = (this.server ?? 0) % world.service.servers.length
    const base = world.service.servers[server]!.reference.url.replace(/^http/, 'ws')
    const visitorTabs = world.tabs.filter((tab) => tab.visitor === this.visitor)
    if (visitorTabs.some((tab) => tab.open && tab.server !== server)) saw('tab beside one on another server')
    else if (visitorTabs.length > 0 && visitorTabs.at(-1)!.server !== server) saw('back on another server')
    const url =
      `${base}/api/webchat/${world.integrationId}` +
      (visitor.token === undefined ? '' : `?token=${encodeURIComponent(visitor.token)}`)
    const socket = await connectVisitor(url)
    const tab: Tab = {
      id: world.tabs.length,
      visitor: this.visitor,
      server,
      socket,
      open: true,
      sessionId: '',
      sessions: [],
      states: [],
      own: new Set(),
      mustSee: new Set(),
      repliesOf: new Set(),
      historyWindows: [],
      messageTimes: [],
      historyTimes: [],
    }
    world.tabs.push(tab)
    await waitUntil(
      () => socket.frames.length > 0,
      () => 'the session frame',
    )
    const first = socket.frames[0]!
    expect(first).toEqual({
      type: 'session',
      sessionId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      visitorToken: expect.stringMatching(new RegExp(`^v1\\.${world.integrationId}\\.`)),
      state: expect.any(String),
    })
    const sessionId = first.sessionId as string
    const known = visitor.sessionId === undefined ? undefined : world.sessions.get(visitor.sessionId)
    if (visitor.token === undefined) {
      visitor.token = first.visitorToken as string
      visitor.visitorId = visitor.token.split('.')[2]
    } else {
      expect(first.visitorToken).toBe(visitor.token)
    }
    saw(
      known === undefined
        ? 'new visitor'
        : known.state === 'closed'
          ? 'reconnect after a close'
          : 'reconnect',
    )
    if (known !== undefined && known.state !== 'closed') {
      // Resumed: the same session, as it stands.
      expect({ sessionId, state: first.state }).toEqual({ sessionId: known.id, state: known.state })
    } else {
      // A new visitor, or one whose session was closed: a new session (CONTRACT §7).
      expect(world.sessions.has(sessionId)).toBe(false)
      expect(first.state).toBe('ongoing')
      world.sessions.set(sessionId, { id: sessionId, visitor: this.visitor, state: 'ongoing', changes: 0 })
    }
    visitor.sessionId = sessionId
    tab.sessionId = sessionId
    tab.sessions.push(sessionId)
  }
  toString() {
    return `Connect(visitor ${this.visitor}${onServer(this.server)})`
  }
}

class Send implements Command {
  constructor(
    readonly pick: number,
    readonly kind: 'new' | 'without-id' | 'repeat',
    readonly repeatPick: number,
  ) {}
  check(world: Readonly<World>) {
    if (openTabs(world).length === 0) return false
    return (
      this.kind !== 'repeat' || world.visitors[pickTab(world, this.pick).visitor]!.clientMessageIds.length > 0
    )
  }
  async run(world: World) {
    const tab = pickTab(world, this.pick)
    const visitor = world.visitors[tab.visitor]!
    let original: SentMessage | undefined
    let clientMessageId: string | undefined
    let text: string
    if (this.kind === 'repeat') {
      clientMessageId = visitor.clientMessageIds[this.repeatPick % visitor.clientMessageIds.length]!
      original = world.sent.find(
        (sent) => sent.visitor === tab.visitor && sent.clientMessageId === clientMessageId,
      )!
      text = original.text
    } else {
      world.counter += 1
      text = `message ${world.counter} of visitor ${tab.visitor}`
      if (this.kind === 'new') clientMessageId = `c-${world.counter}`
    }
    const now = Date.now()
    const limit = limited(tab.messageTimes, now)
    const before = tab.socket.frames.length
    tab.socket.send({ type: 'message', text, ...(clientMessageId === undefined ? {} : { clientMessageId }) })
    const at = await frameAfter(tab, before, isAnswer)
    const answer = tab.socket.frames[at]!
    const sessionFrames = tab.socket.frames.slice(before, at).filter((frame) => frame.type === 'session')
    if (answer.type === 'error') {
      // CONTRACT §7: RATE_LIMITED past 20 messages in 10 s, nothing else for a good frame.
      expect(answer).toMatchObject({ code: 'RATE_LIMITED' })
      saw('message rate limited')
      expect(limit).not.toBe('no')
      expect(sessionFrames).toEqual([])
      // Not stored: the visitor sends it again under the same id later.
      if (original === undefined) {
        world.sent.push({
          visitor: tab.visitor,
          text,
          ...(clientMessageId === undefined ? {} : { clientMessageId }),
        })
        if (clientMessageId !== undefined) visitor.clientMessageIds.push(clientMessageId)
      }
      return
    }
    expect(limit).not.toBe('yes')
    tab.messageTimes.push(now)
    expect(answer).toEqual({
      type: 'ack',
      ...(clientMessageId === undefined ? {} : { clientMessageId }),
      messageId: expect.any(String),
    })
    const messageId = answer.messageId as string

    if (original?.id !== undefined) {
      // CONTRACT §7: acked again with the original messageId and stored once; nothing else.
      expect(messageId).toBe(original.id)
      saw(
        openTabs(world).some((other) => other !== tab && other.visitor === tab.visitor)
          ? 'repeat acked again, another tab open'
          : 'repeat acked again',
      )
      expect(sessionFrames).toEqual([])
      return
    }

    const current = world.sessions.get(tab.sessionId)!
    const latest = world.sessions.get(visitor.sessionId!)!
    // The repeat of a message cut off with its socket is acked with the original id, and opens no
    // session, when that one was stored after all, wherever it went.
    const repeatOfStored = original?.cutOff === true && sessionFrames.length === 0
    let sessionId: string
    if (current.state !== 'closed' && current.id === latest.id) {
      expect(sessionFrames).toEqual([])
      sessionId = current.id
    } else if (repeatOfStored) {
      saw('repeat of a cut-off message stored before a close')
      sessionId = current.id
    } else if (latest.state !== 'closed') {
      // Another tab opened the visitor's next session already: this one joins it.
      saw('message joins the session another tab opened')
      expect(sessionFrames).toEqual([
        { type: 'session', sessionId: latest.id, visitorToken: visitor.token, state: latest.state },
      ])
      sessionId = latest.id
    } else {
      // CONTRACT §7: after the close, the next message gets a new session frame with a new session.
      saw('message after a close opens a session')
      expect(sessionFrames).toHaveLength(1)
      const renewed = sessionFrames[0]!
      expect(renewed).toMatchObject({ visitorToken: visitor.token, state: 'ongoing' })
      sessionId = renewed.sessionId as string
      expect(world.sessions.has(sessionId)).toBe(false)
      world.sessions.set(sessionId, { id: sessionId, visitor: tab.visitor, state: 'ongoing', changes: 0 })
    }
    if (sessionId !== tab.sessionId) {
      tab.sessionId = sessionId
      tab.sessions.push(sessionId)
    }
    if (!repeatOfStored) visitor.sessionId = sessionId
    const session = world.sessions.get(sessionId)!
    const message: SentMessage = original ?? {
      visitor: tab.visitor,
      text,
      ...(clientMessageId === undefined ? {} : { clientMessageId }),
    }
    if (original === undefined) world.sent.push(message)
    if (clientMessageId !== undefined && original === undefined)
      visitor.clientMessageIds.push(clientMessageId)
    message.id = messageId
    saw(session.state === 'paused' ? 'message acked while paused' : 'message acked')
    // The original of a cut-off message, when stored, was shown to the other tabs, this one too.
    if (original?.cutOff === true) return
    tab.own.add(messageId)
    message.sessionId = sessionId
    message.stateAtAck = session.state
    message.changesAtAck = session.changes
    for (const other of openTabs(world)) {
      if (other.sessionId !== sessionId) continue
      if (other !== tab) other.mustSee.add(messageId)
      other.repliesOf.add(text)
    }
  }
  toString() {
    return `Send(tab #${this.pick}, ${this.kind}${this.kind === 'repeat' ? ` #${this.repeatPick}` : ''})`
  }
}

/** Sends a message and cuts the socket before its ack can come: stored once, or not at all. */
class SendAndDrop implements Command {
  constructor(readonly pick: number) {}
  check(world: Readonly<World>) {
    return openTabs(world).length > 0
  }
  async run(world: World) {
    const tab = pickTab(world, this.pick)
    world.counter += 1
    const clientMessageId = `c-${world.counter}`
    const text = `message ${world.counter} of visitor ${tab.visitor}, cut off`
    tab.socket.send({ type: 'message', text, clientMessageId })
    tab.socket.socket.terminate()
    await tab.socket.closed
    tab.open = false
    world.sent.push({ visitor: tab.visitor, text, clientMessageId, cutOff: true })
    world.visitors[tab.visitor]!.clientMessageIds.push(clientMessageId)
  }
  toString() {
    return `SendAndDrop(tab #${this.pick})`
  }
}

const BAD_FRAMES: readonly (string | Buffer)[] = [
  '{not json',
  JSON.stringify('a string'),
  JSON.stringify({ type: 'dance' }),
  JSON.stringify({ text: 'no type' }),
  JSON.stringify({ type: 'message', text: '' }),
  JSON.stringify({ type: 'message', text: 'x'.repeat(4001) }),
  JSON.stringify({ type: 'message', text: 7 }),
  JSON.stringify({ type: 'message', text: 'hi', clientMessageId: '' }),
  JSON.stringify({ type: 'history', since: 5 }),
  Buffer.from([1, 2, 3]),
]

class BadFrame implements Command {
  constructor(
    readonly pick: number,
    readonly which: number,
  ) {}
  check(world: Readonly<World>) {
    return openTabs(world).length > 0
  }
  async run(world: World) {
    const tab = pickTab(world, this.pick)
    // The last kinds are history frames whose `since` names no message of this conversation.
    const kinds = BAD_FRAMES.length + 2
    const which = this.which % kinds
    const before = tab.socket.frames.length
    const now = Date.now()
    let limit: 'yes' | 'no' | 'either' = 'no'
    if (which < BAD_FRAMES.length) {
      const frame = BAD_FRAMES[which]!
      tab.socket.socket.send(frame, { binary: typeof frame !== 'string' })
    } else {
      const since =
        which === BAD_FRAMES.length
          ? '00000000-0000-4000-8000-000000000000'
          : (world.foreignMessageIds[0] ?? '00000000-0000-4000-8000-000000000001')
      limit = limited(tab.historyTimes, now)
      tab.socket.send({ type: 'history', since })
    }
    const at = await frameAfter(tab, before, isAnswer)
    const answer = tab.socket.frames[at]!
    if (answer.code === 'RATE_LIMITED') {
      expect(limit).not.toBe('no')
    } else {
      // CONTRACT §7: VALIDATION_ERROR for a bad frame; the connection stays open.
      expect(answer).toEqual({ type: 'error', code: 'VALIDATION_ERROR', message: expect.any(String) })
      expect(limit).not.toBe('yes')
      if (which >= BAD_FRAMES.length) tab.historyTimes.push(now)
    }
    expect(tab.socket.socket.readyState).toBe(WebSocket.OPEN)
  }
  toString() {
    return `BadFrame(tab #${this.pick}, kind ${this.which})`
  }
}

/**
 * A message sent while an operator's change or message is under way on the same session: the
 * message may be stored before or after the change, and either is right (CONTRACT §7, §8).
 */
class SendRacingOperation implements Command {
  constructor(
    readonly pick: number,
    readonly operation: 'toggle' | 'close' | 'message',
    /** How long after the operator's request the message leaves (below 0: before it). */
    readonly delayMs: number,
    readonly server: number | undefined,
  ) {}
  check(world: Readonly<World>) {
    if (openTabs(world).length === 0) return false
    const tab = pickTab(world, this.pick)
    const session = world.sessions.get(tab.sessionId)!
    return tab.sessionId === world.visitors[tab.visitor]!.sessionId && session.state !== 'closed'
  }
  async run(world: World) {
    const tab = pickTab(world, this.pick)
    const visitor = world.visitors[tab.visitor]!
    const session = world.sessions.get(tab.sessionId)!
    const operation =
      this.operation === 'toggle' ? (session.state === 'paused' ? 'resume' : 'pause') : this.operation
    const previous = session.state
    world.counter += 1
    const text = `message ${world.counter} of visitor ${tab.visitor}, racing a ${operation}`
    const clientMessageId = `c-${world.counter}`
    const note = `operator note ${world.counter}`
    const now = Date.now()
    if (limited(tab.messageTimes, now) !== 'no') return
    const following = openTabs(world).filter((other) => other.sessionId === session.id)
    const before = tab.socket.frames.length
    const path = `/api/sessions/${session.id}`
    const { api } = serverOf(world, this.server)
    const operate = () =>
      operation === 'message'
        ? api<{ id?: string; state?: string }>('POST', `${path}/messages`, { text: note })
        : api<{ id?: string; state?: string }>('POST', `${path}/${operation}`, {})
    const sendMessage = () => tab.socket.send({ type: 'message', text, clientMessageId })
    const pause = () => new Promise((resolve) => setTimeout(resolve, Math.abs(this.delayMs)))
    if (this.delayMs < 0) sendMessage()
    const operated = this.delayMs < 0 ? pause().then(operate) : operate()
    if (this.delayMs >= 0) await pause().then(sendMessage)
    const [answer, at] = await Promise.all([operated, frameAfter(tab, before, isAnswer)])
    tab.messageTimes.push(now)
    expect(answer.status).toBe(operation === 'message' ? 201 : 200)
    const ack = tab.socket.frames[at]!
    expect(ack).toEqual({ type: 'ack', clientMessageId, messageId: expect.any(String) })
    const messageId = ack.messageId as string
    const between = tab.socket.frames.slice(before, at)
    const sessionFrames = between.filter((frame) => frame.type === 'session')
    const message: SentMessage = { visitor: tab.visitor, text, clientMessageId, id: messageId }
    world.sent.push(message)
    visitor.clientMessageIds.push(clientMessageId)
    tab.own.add(messageId)

    if (operation === 'message') {
      expect(sessionFrames).toEqual([])
      world.operatorMessages.push({
        id: answer.body.id!,
        sessionId: session.id,
        text: note,
      })
      for (const other of following) other.mustSee.add(answer.body.id!)
      Object.assign(message, { sessionId: session.id, stateAtAck: previous, changesAtAck: session.changes })
      for (const other of following) {
        if (other !== tab) other.mustSee.add(messageId)
        other.repliesOf.add(text)
      }
      return
    }

    const state: State = operation === 'pause' ? 'paused' : operation === 'resume' ? 'ongoing' : 'closed'
    expect(answer.body.state).toBe(state)
    session.state = state
    session.changes += 1
    let sessionId = session.id
    if (sessionFrames.length === 0) {
      // Stored in the session as it was, or as it is now: its reply is not certain either way,
      // except that a message stored while paused, and then closed, gets none.
      saw(`message racing a ${operation}, in the same session`)
      Object.assign(message, {
        sessionId,
        ...(operation === 'close' ? { stateAtAck: previous } : {}),
        changesAtAck: session.changes - 1,
      })
      for (const other of following) other.states.push(state)
    } else {
      // Stored after the close: a new session for it, announced before its ack; the close of the
      // one left behind reaches this tab only if it came before the switch.
      expect(operation).toBe('close')
      saw('message racing a close, in a new session')
      expect(sessionFrames).toHaveLength(1)
      const renewed = sessionFrames[0]!
      expect(renewed).toMatchObject({ visitorToken: visitor.token, state: 'ongoing' })
      sessionId = renewed.sessionId as string
      expect(world.sessions.has(sessionId)).toBe(false)
      world.sessions.set(sessionId, { id: sessionId, visitor: tab.visitor, state: 'ongoing', changes: 0 })
      const closedAt = between.findIndex((frame) => frame.type === 'state' && frame.state === 'closed')
      saw(closedAt === -1 ? 'its tab switched before hearing the close' : 'its tab heard the close first')
      if (closedAt !== -1) {
        expect(closedAt).toBeLessThan(between.indexOf(renewed))
        tab.states.push('closed')
      }
      for (const other of following) if (other !== tab) other.states.push('closed')
      tab.sessionId = sessionId
      tab.sessions.push(sessionId)
      visitor.sessionId = sessionId
      Object.assign(message, { sessionId, stateAtAck: 'ongoing', changesAtAck: 0 })
    }
    for (const other of openTabs(world)) {
      if (other.sessionId !== sessionId) continue
      if (other !== tab) other.mustSee.add(messageId)
      other.repliesOf.add(text)
    }
    for (const other of following) {
      await waitUntil(
        () => other.socket.frames.filter((frame) => frame.type === 'state').length >= other.states.length,
        () => `the ${state} frame on tab ${other.id}; got ${JSON.stringify(other.socket.frames)}`,
      )
    }
  }
  toString() {
    return `SendRacingOperation(tab #${this.pick}, ${this.operation}, ${this.delayMs} ms${onServer(this.server)})`
  }
}

class Disconnect implements Command {
  constructor(
    readonly pick: number,
    readonly abrupt: boolean,
  ) {}
  check(world: Readonly<World>) {
    return openTabs(world).length > 0
  }
  async run(world: World) {
    const tab = pickTab(world, this.pick)
    if (this.abrupt) tab.socket.socket.terminate()
    else tab.socket.socket.close()
    await tab.socket.closed
    tab.open = false
  }
  toString() {
    return `Disconnect(tab #${this.pick}, ${this.abrupt ? 'abrupt' : 'clean'})`
  }
}

/** `toggle`: pause an ongoing session, resume a paused one. The others, whatever the state. */
type Operation = 'toggle' | 'pause' | 'resume' | 'close' | 'message'

/** CONTRACT §7: a state frame to every socket of the session, for a change through `server`. */
function changeState(world: World, session: SessionModel, state: State, server: number | undefined): void {
  session.state = state
  session.changes += 1
  const following = openTabs(world).filter((tab) => tab.sessionId === session.id)
  const requestServer = (server ?? 0) % world.service.servers.length
  if (following.some((tab) => tab.server !== requestServer)) saw(`${state} heard on another server`)
  for (const tab of following) tab.states.push(state)
}

async function stateFramesArrived(world: World, session: SessionModel): Promise<void> {
  for (const tab of openTabs(world).filter((tab) => tab.sessionId === session.id)) {
    await waitUntil(
      () => tab.socket.frames.filter((frame) => frame.type === 'state').length >= tab.states.length,
      () =>
        `the state frames ${JSON.stringify(tab.states)} on tab ${tab.id}; got ${JSON.stringify(tab.socket.frames)}`,
    )
  }
}

class Operate implements Command {
  constructor(
    readonly visitor: number,
    readonly operation: Operation,
    readonly older: number,
    readonly server: number | undefined,
  ) {}
  check(world: Readonly<World>) {
    return world.visitors[this.visitor]!.sessionId !== undefined
  }
  async run(world: World) {
    const visitor = world.visitors[this.visitor]!
    // Now and then an older session of the visitor's, closed by then.
    const own = [...world.sessions.values()].filter((session) => session.visitor === this.visitor)
    const session =
      this.older % 4 === 0 && own.length > 1
        ? own[this.older % own.length]!
        : world.sessions.get(visitor.sessionId!)!
    const path = `/api/sessions/${session.id}`
    const operation =
      this.operation === 'toggle' ? (session.state === 'paused' ? 'resume' : 'pause') : this.operation
    const allowed =
      operation === 'pause'
        ? session.state === 'ongoing'
        : operation === 'resume'
          ? session.state === 'paused'
          : session.state !== 'closed'
    world.counter += 1
    const text = `operator note ${world.counter}`
    const { api } = serverOf(world, this.server)
    const answer =
      operation === 'message'
        ? await api<{ id?: string; state?: string }>('POST', `${path}/messages`, { text })
        : await api<{ id?: string; state?: string }>('POST', `${path}/${operation}`, {})
    saw(`${operation}${allowed ? '' : ' refused'}`)
    if (!allowed) {
      // CONTRACT §8: 400 INVALID_STATE for what the state does not allow.
      expect({ status: answer.status, body: answer.body }).toMatchObject({
        status: 400,
        body: { error: { code: 'INVALID_STATE' } },
      })
      return
    }
    if (operation === 'message') {
      expect(answer.status).toBe(201)
      const id = answer.body.id!
      world.operatorMessages.push({ id, sessionId: session.id, text })
      for (const tab of openTabs(world)) if (tab.sessionId === session.id) tab.mustSee.add(id)
      return
    }
    const state: State = operation === 'pause' ? 'paused' : operation === 'resume' ? 'ongoing' : 'closed'
    expect({ status: answer.status, state: answer.body.state }).toEqual({
      status: 200,
      state,
    })
    changeState(world, session, state, this.server)
    await stateFramesArrived(world, session)
  }
  toString() {
    return `Operate(visitor ${this.visitor}, ${this.operation}${this.older % 4 === 0 ? ', older session' : ''}${onServer(this.server)})`
  }
}

/**
 * An operator pauses the visitor's session and another resumes it at once (or the other way
 * round), each through a server of their own, before the sockets heard of the first: the sockets
 * end up showing the state the session is in. Each hears both changes in the order made or, when
 * the later reached it first (two servers' publishes race on the bus), that one only: CONTRACT §7
 * does not say a socket is told of a change it was shown undone already.
 */
class ToggleTwice implements Command {
  constructor(
    readonly visitor: number,
    readonly servers: readonly [number | undefined, number | undefined],
  ) {}
  check(world: Readonly<World>) {
    const sessionId = world.visitors[this.visitor]!.sessionId
    return sessionId !== undefined && world.sessions.get(sessionId)!.state !== 'closed'
  }
  async run(world: World) {
    const session = world.sessions.get(world.visitors[this.visitor]!.sessionId!)!
    const following = openTabs(world).filter((tab) => tab.sessionId === session.id)
    const stateFrames = (tab: Tab) => tab.socket.frames.filter((frame) => frame.type === 'state')
    const heardBefore = new Map(following.map((tab) => [tab, stateFrames(tab).length]))
    const made: State[] = []
    for (const server of this.servers) {
      const state: State = session.state === 'paused' ? 'ongoing' : 'paused'
      const path = `/api/sessions/${session.id}/${state === 'paused' ? 'pause' : 'resume'}`
      const answer = await serverOf(world, server).api<{ state?: string }>('POST', path, {})
      expect({ status: answer.status, state: answer.body.state }).toEqual({ status: 200, state })
      changeState(world, session, state, server)
      made.push(state)
    }
    for (const tab of following) {
      const before = heardBefore.get(tab)!
      await waitUntil(
        () => stateFrames(tab).length > before && stateFrames(tab).at(-1)!.state === session.state,
        () => `the ${session.state} frame on tab ${tab.id}; got ${JSON.stringify(tab.socket.frames)}`,
      )
      const heard = stateFrames(tab)
        .slice(before)
        .map((frame) => frame.state)
      expect([made, made.slice(1)]).toContainEqual(heard)
      saw(heard.length === made.length ? 'toggle twice, both heard' : 'toggle twice, the earlier superseded')
      // The model pushed both; what this tab heard is what it must have got.
      tab.states.splice(tab.states.length - made.length, made.length, ...(heard as State[]))
    }
  }
  toString() {
    return `ToggleTwice(visitor ${this.visitor}, through servers ${this.servers.join(' then ')})`
  }
}

class History implements Command {
  constructor(
    readonly pick: number,
    /** null: the whole conversation; else the message to resend after, by index. */
    readonly since: number | null,
  ) {}
  check(world: Readonly<World>) {
    return openTabs(world).length > 0
  }
  async run(world: World) {
    // Asked for once all is quiet, so every frame between the request and the barrier is history.
    await settle(world)
    const tab = pickTab(world, this.pick)
    const stored = await storedMessages(world.service, tab.sessionId)
    const sinceIndex = this.since === null || stored.length === 0 ? -1 : this.since % stored.length
    const since = sinceIndex === -1 ? undefined : stored[sinceIndex]!
    const now = Date.now()
    const limit = limited(tab.historyTimes, now)
    const before = tab.socket.frames.length
    tab.socket.send({ type: 'history', ...(since === undefined ? {} : { since: since.id }) })
    // Frames are answered in order: the error for this bad frame follows the whole history.
    tab.socket.send('{barrier')
    const barrier = await frameAfter(
      tab,
      before,
      (frame) => frame.type === 'error' && frame.code === 'VALIDATION_ERROR',
    )
    tab.historyWindows.push([before - 1, barrier])
    const answered = tab.socket.frames.slice(before, barrier)
    if (answered.length === 1 && answered[0]!.code === 'RATE_LIMITED') {
      expect(limit).not.toBe('no')
      return
    }
    expect(limit).not.toBe('yes')
    tab.historyTimes.push(now)
    // CONTRACT §7: everything after `since` (or all of it), as message frames; a blocked reply
    // never reached the visitor and is not resent.
    const after = since === undefined ? stored : stored.slice(sinceIndex + 1)
    saw(after.some((message) => message.delivery === 'blocked') ? 'history past a blocked reply' : 'history')
    expect(answered).toEqual(after.filter((message) => message.delivery !== 'blocked').map(asFrame))
  }
  toString() {
    return `History(tab #${this.pick}${this.since === null ? '' : `, since #${this.since}`})`
  }
}

class Idle implements Command {
  check() {
    return true
  }
  async run(world: World) {
    await settle(world)
  }
  toString() {
    return 'Idle'
  }
}

// ---------------------------------------------------------------------------------------------
// What must hold once the server is idle

async function storedMessages(service: ModelService, sessionId: string): Promise<StoredMessage[]> {
  const all: StoredMessage[] = []
  let cursor: string | null = null
  do {
    const page: { status: number; body: { messages: StoredMessage[]; nextCursor: string | null } } =
      await service.api(
        'GET',
        `/api/sessions/${sessionId}/messages?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      )
    expect(page.status).toBe(200)
    all.push(...page.body.messages)
    cursor = page.body.nextCursor
  } while (cursor !== null)
  return all
}

async function storedSessions(world: World): Promise<StoredSession[]> {
  const list = await world.service.api<{ sessions: StoredSession[]; nextCursor: string | null }>(
    'GET',
    `/api/sessions?integrationId=${world.integrationId}&limit=100`,
  )
  expect(list.status).toBe(200)
  expect(list.body.nextCursor).toBeNull()
  return Promise.all(
    list.body.sessions.map(async (session) => ({
      ...session,
      messages: await storedMessages(world.service, session.id),
    })),
  )
}

/** Waits for the server to be idle and the sockets to have what they must, then checks it all. */
async function settle(world: World): Promise<void> {
  // A frame of a socket cut off a moment ago may still be on its way to storage: idle twice alike.
  let sessions: StoredSession[] = []
  for (let previous = ''; ; ) {
    for (const server of world.service.servers) await server.reference.switchboard.idle()
    sessions = await storedSessions(world)
    const now = JSON.stringify(sessions)
    if (now === previous) break
    previous = now
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  for (const server of world.service.servers) {
    expect((await server.api('GET', '/api/health')).status).toBe(200)
  }
  const byId = new Map<string, StoredMessage & { sessionId: string; index: number }>()
  for (const session of sessions) {
    session.messages.forEach((message, index) => {
      byId.set(message.id, { ...message, sessionId: session.id, index })
    })
  }
  const replyTo = (sessionId: string, text: string) =>
    sessions
      .find((session) => session.id === sessionId)
      ?.messages.filter((message) => message.role === 'agent' && message.text === `re: ${text}`) ?? []

  // Storage, whatever the sockets saw.
  const visitorOf = new Map(world.visitors.map((visitor, index) => [visitor.visitorId, index]))
  for (const session of sessions) {
    expect(visitorOf.has(session.customer.clientId)).toBe(true)
    const known = world.sessions.get(session.id)
    if (known !== undefined) expect(session.state, `state of session ${session.id}`).toBe(known.state)
    else {
      // A session the model never saw: opened by a message whose socket was cut before its ack.
      const first = session.messages[0]
      expect(
        first === undefined || world.sent.some((sent) => sent.text === first.text && sent.cutOff === true),
      ).toBe(true)
    }
    const customerTexts = new Set<string>()
    for (const message of session.messages) {
      expect(message.delivery, `delivery of ${message.id}`).not.toBe('pending')
      if (message.role === 'customer') {
        customerTexts.add(message.text)
        continue
      }
      if (message.role === 'operator') {
        expect(
          world.operatorMessages.some((sent) => sent.id === message.id && sent.sessionId === session.id),
        ).toBe(true)
        continue
      }
      // Every reply answers a message stored before it in the same session.
      expect(message.role).toBe('agent')
      expect(message.text.startsWith('re: ') && customerTexts.has(message.text.slice(4))).toBe(true)
    }
  }
  for (const [index] of world.visitors.entries()) {
    const open = sessions.filter(
      (session) =>
        session.state !== 'closed' && session.customer.clientId === world.visitors[index]!.visitorId,
    )
    expect(open.length).toBeLessThanOrEqual(1)
  }
  for (const operatorMessage of world.operatorMessages) {
    expect(byId.get(operatorMessage.id)).toMatchObject({
      role: 'operator',
      text: operatorMessage.text,
      sessionId: operatorMessage.sessionId,
    })
  }
  for (const sent of world.sent) {
    const copies = sessions.flatMap((session) =>
      session.messages
        .filter((message) => message.role === 'customer' && message.text === sent.text)
        .map((message) => ({ ...message, sessionId: session.id })),
    )
    // CONTRACT §7 and §11: acked means stored, once; a repeat never stores it again.
    expect(copies.length, `copies of "${sent.text}"`).toBeLessThanOrEqual(1)
    if (sent.id === undefined) continue
    expect(copies.map((copy) => copy.id)).toEqual([sent.id])
    if (sent.sessionId === undefined) continue
    expect(copies[0]!.sessionId).toBe(sent.sessionId)
    const replies = replyTo(sent.sessionId, sent.text)
    expect(replies.length, `replies to "${sent.text}"`).toBeLessThanOrEqual(1)
    const session = world.sessions.get(sent.sessionId)!
    if (replies[0]?.delivery === 'blocked') saw('reply blocked')
    if (sent.stateAtAck === 'ongoing' && session.changes === sent.changesAtAck) {
      // CONTRACT §8: the agent responds to every inbound message of an ongoing session.
      expect(
        replies.map((reply) => reply.delivery),
        `reply to "${sent.text}"`,
      ).toEqual(['sent'])
    }
    if (sent.stateAtAck === 'paused') {
      // Stored while paused: no agent runs on it, and a resume does not answer it (CONTRACT §8).
      expect(replies, `reply to "${sent.text}", sent while paused`).toEqual([])
    }
  }

  // The sockets: each gets what it must, once, in order.
  for (const tab of openTabs(world)) {
    const elsewhere = world.service.servers.filter((_server, index) => index !== tab.server)
    if (elsewhere.some((server) => tab.sessions.some((session) => server.turnsRan.has(session))))
      saw('a socket followed turns another server ran')
    const delivered = (id: string) => {
      const message = byId.get(id)
      return message !== undefined && message.delivery !== 'blocked'
    }
    const must = new Set([...tab.mustSee].filter(delivered))
    for (const text of tab.repliesOf) {
      for (const session of tab.sessions) {
        for (const reply of replyTo(session, text)) if (delivered(reply.id)) must.add(reply.id)
      }
    }
    await waitUntil(
      () => {
        const seen = new Set(liveMessageFrames(tab).map((frame) => frame.messageId as string))
        return (
          [...must].every((id) => seen.has(id)) &&
          tab.socket.frames.filter((frame) => frame.type === 'state').length >= tab.states.length
        )
      },
      () =>
        `tab ${tab.id} to get ${JSON.stringify([...must])} and states ${JSON.stringify(tab.states)}; got ${JSON.stringify(tab.socket.frames)}`,
    )
    // Late duplicates and stray frames get a moment to show.
    await new Promise((resolve) => setTimeout(resolve, 20))
    const frames = tab.socket.frames
    // The server never closes a connection the contract keeps open.
    expect(tab.socket.socket.readyState, `tab ${tab.id} open`).toBe(WebSocket.OPEN)
    expect(frames[0]?.type).toBe('session')
    expect(frames.filter((frame) => frame.type === 'session').map((frame) => frame.sessionId)).toEqual(
      tab.sessions,
    )
    expect(frames.filter((frame) => frame.type === 'state').map((frame) => frame.state)).toEqual(tab.states)
    const live = liveMessageFrames(tab)
    const ids = live.map((frame) => frame.messageId as string)
    expect(new Set(ids).size, `no message twice on tab ${tab.id}: ${JSON.stringify(ids)}`).toBe(ids.length)
    for (const frame of live) {
      const message = byId.get(frame.messageId as string)
      expect(message, `live frame ${JSON.stringify(frame)} on tab ${tab.id}`).toBeDefined()
      expect(frame).toEqual(asFrame(message!))
      expect(tab.sessions).toContain(message!.sessionId)
      expect(message!.delivery, `a blocked message reached tab ${tab.id}`).not.toBe('blocked')
      // README: a message shows in the visitor's other tabs, not back in the one that sent it.
      expect(tab.own.has(message!.id)).toBe(false)
    }
    // Replies and operator messages come in the order they were written.
    const outgoing = live
      .map((frame) => byId.get(frame.messageId as string)!)
      .filter((message) => message.role !== 'customer')
    for (let index = 1; index < outgoing.length; index += 1) {
      const [earlier, later] = [outgoing[index - 1]!, outgoing[index]!]
      if (earlier.sessionId === later.sessionId) expect(later.index).toBeGreaterThan(earlier.index)
    }
    // CONTRACT §7: typing goes off with the reply, or when the turn ends without one.
    const typing = frames.filter((frame) => frame.type === 'typing')
    expect(typing.at(-1)?.on ?? false, `typing left on at tab ${tab.id}: ${JSON.stringify(frames)}`).toBe(
      false,
    )
  }
}

// ---------------------------------------------------------------------------------------------

/** The model's commands; with more than one server, each connection and operator request picks one. */
function webchatCommands(servers: number): fc.Arbitrary<Command>[] {
  const tabPick = fc.nat({ max: 2 * VISITORS * TABS_PER_VISITOR })
  const visitorPick = fc.nat({ max: VISITORS - 1 })
  const serverPick: fc.Arbitrary<number | undefined> =
    servers > 1 ? fc.nat({ max: servers - 1 }) : fc.constant(undefined)
  const connect = fc.tuple(visitorPick, serverPick).map(([visitor, server]) => new Connect(visitor, server))
  const send = fc
    .tuple(tabPick, fc.constantFrom<Send['kind']>('new', 'new', 'without-id', 'repeat'), fc.nat())
    .map(([pick, kind, repeat]) => new Send(pick, kind, repeat))
  const operate = fc
    .tuple(
      visitorPick,
      fc.constantFrom<Operation>('toggle', 'toggle', 'toggle', 'close', 'message', 'pause', 'resume'),
      fc.nat(),
      serverPick,
    )
    .map(([visitor, operation, older, server]) => new Operate(visitor, operation, older, server))
  // Two servers' relays may reach the bus in either order; one server's go in the order made.
  const toggleTwice = fc
    .tuple(visitorPick, serverPick, serverPick)
    .map(([visitor, first, second]) => new ToggleTwice(visitor, [first, second]))
  // fc.commands picks among these evenly: the more common steps are listed more than once.
  return [
    ...(servers > 1 ? [toggleTwice] : []),
    connect,
    connect,
    connect,
    send,
    send,
    send,
    send,
    tabPick.map((pick) => new SendAndDrop(pick)),
    fc.tuple(tabPick, fc.nat()).map(([pick, which]) => new BadFrame(pick, which)),
    fc.tuple(tabPick, fc.boolean()).map(([pick, abrupt]) => new Disconnect(pick, abrupt)),
    fc
      .tuple(
        tabPick,
        fc.constantFrom<SendRacingOperation['operation']>('toggle', 'close', 'message'),
        fc.integer({ min: -3, max: 6 }),
        serverPick,
      )
      .map(([pick, operation, delayMs, server]) => new SendRacingOperation(pick, operation, delayMs, server)),
    operate,
    operate,
    operate,
    fc.tuple(tabPick, fc.option(fc.nat())).map(([pick, since]) => new History(pick, since)),
    fc.constant(new Idle()),
  ]
}

export interface ModelRunOptions {
  readonly runs: number
  readonly maxCommands: number
  /** Replays a failing run, as fast-check printed it. */
  readonly seed?: number | undefined
  readonly path?: string | undefined
  /** Prints what the runs exercised, to see the generator reaches it all. */
  readonly debug?: boolean
}

/** Runs random command sequences against `service`'s servers, each on a fresh integration. */
export async function checkWebchatModel(service: ModelService, options: ModelRunOptions): Promise<void> {
  coverage.clear()
  const foreignMessageIds: string[] = []
  await fc.assert(
    fc.asyncProperty(
      fc.commands(webchatCommands(service.servers.length), { maxCommands: options.maxCommands, size: 'max' }),
      async (commands) => {
        // A fresh integration per run: its visitors know nothing of the runs before.
        const created = await service.api<{ id: string }>('POST', '/api/integrations', {
          type: 'webchat',
          name: 'Widget',
          entryAgentId: service.agentId,
          config: {},
        })
        expect(created.status).toBe(201)
        const world: World = {
          service,
          integrationId: created.body.id,
          visitors: Array.from({ length: VISITORS }, () => ({ clientMessageIds: [] })),
          sessions: new Map(),
          sent: [],
          operatorMessages: [],
          tabs: [],
          counter: 0,
          foreignMessageIds,
        }
        try {
          await fc.asyncModelRun(() => ({ model: world, real: world }), commands)
          saw('runs')
          await settle(world)
        } finally {
          for (const tab of world.tabs) tab.socket.socket.terminate()
          for (const sent of world.sent) if (sent.id !== undefined) foreignMessageIds.push(sent.id)
        }
      },
    ),
    {
      numRuns: options.runs,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.path === undefined ? {} : { path: options.path, endOnFailure: true }),
    },
  )
  if (options.debug === true) console.log(Object.fromEntries([...coverage].sort()))
}
