import { EventEmitter } from 'node:events'
import {
  createMemoryEventBus,
  type EventBus,
  type Integration,
  type Message,
  type Session,
  type Switchboard,
} from '@switchboard/core'
import { ok } from 'neverthrow'
import { describe, expect, it } from 'vitest'
import { WebSocket } from 'ws'
import { messageFrame } from './frames.js'
import { sessionTopic } from './session-events.js'
import { serveVisitor } from './visitor-connection.js'

const at = '2026-01-01T00:00:00.000Z'
const session: Session = {
  id: '3f1c1b7e-6a0c-4a53-9d1e-0d7a6c1b2e01',
  companyId: 1,
  integrationId: '7',
  customer: { clientId: 'visitor-1' },
  state: 'ongoing',
  activeAgentId: 1,
  entryAgentId: 1,
  metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
  createdAt: at,
  updatedAt: at,
  version: 1,
}
const reply: Message = {
  id: '9b2f0e3c-1d4a-4b6e-8f7a-2c3d4e5f6a7b',
  companyId: 1,
  sessionId: session.id,
  role: 'agent',
  text: 'Hello again',
  agentId: 1,
  at,
  sequence: 2,
}

/** What `serveVisitor` uses of a `ws` socket, keeping the frames it is sent. */
class FakeSocket extends EventEmitter {
  readyState: number = WebSocket.OPEN
  bufferedAmount = 0
  readonly frames: { type: string }[] = []
  send(data: string, done?: () => void): void {
    this.frames.push(JSON.parse(data) as { type: string })
    done?.()
  }
  close(): void {
    this.readyState = WebSocket.CLOSED
    this.emit('close')
  }
  terminate(): void {
    this.close()
  }
}

/** A visitor of integration 7 on `socket`, with the settings of a default server. */
function serve(socket: FakeSocket, switchboard: Switchboard, eventBus: EventBus): void {
  serveVisitor({
    socket: socket as unknown as WebSocket,
    switchboard,
    eventBus,
    integration: { id: '7' } as Integration,
    origin: undefined,
    visitorId: 'visitor-1',
    visitorToken: 'token',
    settings: {
      typingTimeoutMs: 60_000,
      rateLimit: { messages: 20, windowMs: 10_000 },
      maxBufferedBytes: 1e6,
    },
  })
}

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve = () => {}
  const promise = new Promise<void>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

/** The session a message opens when the visitor's was closed. */
const next: Session = { ...session, id: '3f1c1b7e-6a0c-4a53-9d1e-0d7a6c1b2e02' }

/**
 * A switchboard whose socket starts on `following` and whose `ingest` stores the message in
 * `next`, a new session, with `pending` unfinished jobs there; `whileStoring` runs inside it.
 */
function switchboardOpeningNext(options: {
  following: Session
  queued: boolean
  pending?: number | (() => Promise<number>)
  whileStoring?: () => Promise<void>
  /** Where the message is stored: `next` unless given. */
  storesIn?: Session
}): Switchboard {
  const { following } = options
  const storesIn = options.storesIn ?? next
  return {
    openSession: async () => ok(following),
    ingest: async () => {
      await options.whileStoring?.()
      return ok({
        session: storesIn,
        message: { ...reply, role: 'customer', sessionId: storesIn.id },
        duplicate: false,
        queued: options.queued,
      })
    },
    storage: {
      sessions: { get: async ({ id }: { id: string }) => (id === next.id ? next : following) },
      jobs: {
        pending: async ({ sessionId }: { sessionId: string }) => {
          if (sessionId !== storesIn.id) return 0
          const { pending } = options
          return typeof pending === 'function' ? pending() : (pending ?? 0)
        },
      },
    },
  } as unknown as Switchboard
}

function sendMessage(socket: FakeSocket, clientMessageId: string): void {
  socket.emit(
    'message',
    Buffer.from(JSON.stringify({ type: 'message', text: 'hello', clientMessageId })),
    false,
  )
}

describe('serveVisitor', () => {
  // CONTRACT §7: the session frame comes first. A reply or an operator's message published while
  // the connection was still reading its session reached the widget before it, and the widget then
  // asked for history since that message and skipped the ones before it.
  it('sends what the session heard before its session frame went out after it, in order', async () => {
    const socket = new FakeSocket()
    const eventBus = createMemoryEventBus()
    const reading = deferred()
    const gate = deferred()
    const switchboard = {
      openSession: async () => ok(session),
      storage: {
        sessions: {
          get: async () => {
            reading.resolve()
            await gate.promise
            return session
          },
        },
      },
    } as unknown as Switchboard
    serve(socket, switchboard, eventBus)

    await reading.promise
    await eventBus.publish(sessionTopic(session.id), { kind: 'typing', on: true, messageId: 'm-1' })
    await eventBus.publish(sessionTopic(session.id), { kind: 'message', frame: messageFrame(reply) })
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(socket.frames).toEqual([])

    gate.resolve()
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(socket.frames.map((frame) => frame.type)).toEqual(['session', 'typing', 'message'])
    socket.close()
  })

  // The frames held for the new session's frame would otherwise be held for good: no ack, reply
  // or error would reach the visitor again, on a socket that stays open.
  it('closes the connection when moving to a new session fails, after an error frame', async () => {
    const socket = new FakeSocket()
    const closed: Session = { ...session, state: 'closed' }
    const next: Session = { ...session, id: '3f1c1b7e-6a0c-4a53-9d1e-0d7a6c1b2e02' }
    let reads = 0
    const switchboard = {
      openSession: async () => ok(closed),
      ingest: async () =>
        ok({
          session: next,
          message: { ...reply, role: 'customer', sessionId: next.id },
          duplicate: false,
          queued: false,
        }),
      storage: {
        sessions: {
          get: async () => {
            reads += 1
            if (reads === 2) throw new Error('connection reset')
            return closed
          },
        },
      },
    } as unknown as Switchboard
    serve(socket, switchboard, createMemoryEventBus())
    await new Promise((resolve) => setTimeout(resolve, 10))

    socket.emit(
      'message',
      Buffer.from(JSON.stringify({ type: 'message', text: 'hello', clientMessageId: 'a' })),
      false,
    )
    await new Promise((resolve) => setTimeout(resolve, 10))

    expect(socket.frames.map((frame) => frame.type)).toEqual(['session', 'error'])
    expect(socket.readyState).toBe(WebSocket.CLOSED)
  })

  // The widget takes a `state` frame for the session its last `session` frame named: the close of
  // the session left behind, told after the new one's frame, said the new conversation had ended.
  it("sends what the session left behind said while a message was stored before the new session's frame", async () => {
    const socket = new FakeSocket()
    const eventBus = createMemoryEventBus()
    const storing = deferred()
    const stored = deferred()
    const switchboard = switchboardOpeningNext({
      following: session,
      queued: false,
      whileStoring: async () => {
        storing.resolve()
        await stored.promise
      },
    })
    serve(socket, switchboard, eventBus)
    await new Promise((resolve) => setTimeout(resolve, 10))

    sendMessage(socket, 'a')
    await storing.promise
    // An operator closes the visitor's session as the message is stored: it opens a new one.
    await eventBus.publish(sessionTopic(session.id), { kind: 'state', state: 'closed' })
    stored.resolve()
    await new Promise((resolve) => setTimeout(resolve, 10))

    expect(socket.frames).toEqual([
      { type: 'session', sessionId: session.id, visitorToken: 'token', state: 'ongoing' },
      { type: 'state', state: 'closed' },
      { type: 'session', sessionId: next.id, visitorToken: 'token', state: 'ongoing' },
      { type: 'ack', clientMessageId: 'a', messageId: reply.id },
    ])
    socket.close()
  })

  // The turn of the message that opens a new session starts as it is stored, before the socket
  // follows that session; one that ended by then was not heard, and typing must not wait for it.
  it.each([
    ['turns typing on', 'still to run', 1, true],
    ['leaves typing off', 'done', 0, false],
  ])(
    '%s after the ack of a message that opened a new session whose job is %s',
    async (_, _job, pending, typing) => {
      const socket = new FakeSocket()
      const eventBus = createMemoryEventBus()
      serve(
        socket,
        switchboardOpeningNext({ following: { ...session, state: 'closed' }, queued: true, pending }),
        eventBus,
      )
      await new Promise((resolve) => setTimeout(resolve, 10))

      sendMessage(socket, 'b')
      await new Promise((resolve) => setTimeout(resolve, 10))

      expect(socket.frames.map((frame) => frame.type)).toEqual([
        'session',
        'session',
        'ack',
        ...(typing ? ['typing'] : []),
      ])
      socket.close()
    },
  )

  it('leaves typing off after the ack of a message whose turn ended while its new session was read', async () => {
    const socket = new FakeSocket()
    const eventBus = createMemoryEventBus()
    const switchboard = switchboardOpeningNext({
      following: { ...session, state: 'closed' },
      queued: true,
      // The turn ends, with no reply, as the socket asks whether its job is still to run.
      pending: async () => {
        await eventBus.publish(sessionTopic(next.id), { kind: 'typing', on: false, messageId: reply.id })
        return 1
      },
    })
    serve(socket, switchboard, eventBus)
    await new Promise((resolve) => setTimeout(resolve, 10))

    sendMessage(socket, 'c')
    await new Promise((resolve) => setTimeout(resolve, 10))

    expect(socket.frames.map((frame) => frame.type)).toEqual(['session', 'session', 'ack'])
    socket.close()
  })

  it('leaves typing off after the ack of a message whose session was paused while it was stored', async () => {
    const socket = new FakeSocket()
    const eventBus = createMemoryEventBus()
    const switchboard = switchboardOpeningNext({
      following: session,
      storesIn: session,
      queued: true,
      whileStoring: () => eventBus.publish(sessionTopic(session.id), { kind: 'state', state: 'paused' }),
    })
    serve(socket, switchboard, eventBus)
    await new Promise((resolve) => setTimeout(resolve, 10))

    sendMessage(socket, 'd')
    await new Promise((resolve) => setTimeout(resolve, 10))

    expect(socket.frames).toEqual([
      { type: 'session', sessionId: session.id, visitorToken: 'token', state: 'ongoing' },
      { type: 'ack', clientMessageId: 'd', messageId: reply.id },
      { type: 'state', state: 'paused' },
    ])
    socket.close()
  })
})
