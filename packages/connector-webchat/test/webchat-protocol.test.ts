import { randomUUID } from 'node:crypto'
import { handoff, reply } from '@switchboard/core/testing'
import { describe, expect, it } from 'vitest'
import { useWebchatFixture } from './support/webchat-fixture.js'

const fixture = useWebchatFixture()
const visit = (token?: string) => fixture.visit(token)

interface SessionView {
  state: string
  metadata: { errors: { code: string }[] }
}
interface MessageView {
  id: string
  role: string
  text: string
  delivery?: string
}

const sessionMessages = async (sessionId: string) =>
  (await fixture.service.api<{ messages: MessageView[] }>('GET', `/api/sessions/${sessionId}/messages`)).body
    .messages

describe('the webchat protocol', () => {
  it('opens with a session frame, acks a stored message, types, answers and stops typing', async () => {
    fixture.service.model.script(fixture.agentId, reply('Hello! How can I help?'))
    const visitor = await visit()
    const session = await visitor.next()
    expect(session).toEqual({
      type: 'session',
      sessionId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      visitorToken: expect.stringMatching(new RegExp(`^v1\\.${fixture.integrationId}\\.`)),
      state: 'ongoing',
    })

    visitor.send({ type: 'message', text: 'Hi there', clientMessageId: 'c-1' })
    const ack = await visitor.next()
    expect(ack).toEqual({ type: 'ack', clientMessageId: 'c-1', messageId: expect.any(String) })
    // Acked means stored.
    const stored = await sessionMessages(session.sessionId as string)
    expect(stored[0]).toMatchObject({ id: ack.messageId, role: 'customer', text: 'Hi there' })

    expect(await visitor.next()).toEqual({ type: 'typing', on: true })
    expect(await visitor.next()).toEqual({
      type: 'message',
      messageId: expect.any(String),
      role: 'agent',
      text: 'Hello! How can I help?',
      agentId: fixture.agentId,
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    })
    expect(await visitor.next()).toEqual({ type: 'typing', on: false })
    await fixture.service.reference.switchboard.idle()
    const [, answer] = await sessionMessages(session.sessionId as string)
    expect(answer).toMatchObject({ role: 'agent', delivery: 'sent' })
  })

  it('keeps typing on while the turns of messages sent together work, and off after the last reply', async () => {
    fixture.service.model.script(fixture.agentId, reply('One.'), reply('Two.'), reply('Three.'))
    const visitor = await visit()
    await visitor.next('session')
    for (const text of ['first', 'second', 'third']) visitor.send({ type: 'message', text })
    for (let index = 0; index < 3; index += 1) await visitor.next((frame) => frame.role === 'agent')
    await fixture.service.reference.switchboard.idle()
    expect(await visitor.quietFor(100)).toBe(true)

    // Whenever a reply arrives, the dots were showing: each turn worked with typing on.
    let typing = false
    const replies: unknown[] = []
    for (const frame of visitor.frames) {
      if (frame.type === 'typing') typing = frame.on === true
      if (frame.type === 'message' && frame.role === 'agent') {
        expect(typing).toBe(true)
        replies.push(frame.text)
      }
    }
    expect(replies).toEqual(['One.', 'Two.', 'Three.'])
    expect(typing).toBe(false)
  })

  it('keeps typing on when the next turn starts before the reply of the one before arrives', async () => {
    const visitor = await visit()
    const { sessionId } = await visitor.next('session')
    const { switchboard } = fixture.service.reference
    const event = { companyId: 1, sessionId: sessionId as string, agentId: fixture.agentId }
    const turn = (messageId: string) => ({ ...event, messageId })
    // The order a busy cluster can produce: turn 2 starts before turn 1's reply reaches the socket.
    switchboard.events.emit('turn-started', turn('m-1'))
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: true })
    switchboard.events.emit('turn-completed', { ...turn('m-1'), replied: true })
    switchboard.events.emit('turn-started', turn('m-2'))
    const session = (await switchboard.storage.sessions.get({ id: sessionId as string }))!
    const integration = (await switchboard.storage.integrations.get({ id: fixture.integrationId }))!
    const message = (text: string) => ({
      id: randomUUID(),
      companyId: session.companyId,
      sessionId: session.id,
      role: 'agent' as const,
      text,
      agentId: fixture.agentId,
      at: new Date().toISOString(),
      sequence: 1,
    })
    const lastTyping = () => visitor.frames.filter((frame) => frame.type === 'typing').at(-1)
    await switchboard.connector('webchat')!.send({ integration, session, message: message('One.') })
    expect(await visitor.next('message')).toMatchObject({ text: 'One.' })
    await visitor.quietFor(100)
    expect(lastTyping()).toEqual({ type: 'typing', on: true })

    switchboard.events.emit('turn-completed', { ...turn('m-2'), replied: true })
    await switchboard.connector('webchat')!.send({ integration, session, message: message('Two.') })
    expect(await visitor.next('message')).toMatchObject({ text: 'Two.' })
    await visitor.quietFor(100)
    expect(lastTyping()).toEqual({ type: 'typing', on: false })

    // And a reply that overtakes the end of its own turn: off once both are in.
    switchboard.events.emit('turn-started', turn('m-3'))
    await visitor.next((frame) => frame.type === 'typing' && frame.on === true)
    await switchboard.connector('webchat')!.send({ integration, session, message: message('Three.') })
    expect(await visitor.next('message')).toMatchObject({ text: 'Three.' })
    await visitor.quietFor(100)
    expect(lastTyping()).toEqual({ type: 'typing', on: true })
    switchboard.events.emit('turn-completed', { ...turn('m-3'), replied: true })
    await visitor.quietFor(100)
    expect(lastTyping()).toEqual({ type: 'typing', on: false })
  })

  // Found by webchat-model.test.ts: a visitor who reconnected while the turn of the message it sent
  // before was at work got that turn's reply, then heard the turn end, and counted the reply as
  // still to come; the dots of its next message stayed on after their reply, until the 30 s timeout.
  it('turns typing off with the next reply after a reconnect that came mid-turn, its reply before its end', async () => {
    const { switchboard } = fixture.service.reference
    const visitor = await visit()
    const { sessionId } = await visitor.next('session')
    const session = (await switchboard.storage.sessions.get({ id: sessionId as string }))!
    const integration = (await switchboard.storage.integrations.get({ id: fixture.integrationId }))!
    const event = { companyId: 1, sessionId: sessionId as string, agentId: fixture.agentId }
    const sendReply = async (text: string) => {
      const message = {
        id: randomUUID(),
        companyId: session.companyId,
        sessionId: session.id,
        role: 'agent' as const,
        text,
        agentId: fixture.agentId,
        at: new Date().toISOString(),
        sequence: 1,
      }
      await switchboard.connector('webchat')!.send({ integration, session, message })
    }
    const lastTyping = () => visitor.frames.filter((frame) => frame.type === 'typing').at(-1)
    // The turn of m-1 started before this connection: its reply arrives, then its end.
    await sendReply('One.')
    expect(await visitor.next('message')).toMatchObject({ text: 'One.' })
    switchboard.events.emit('turn-completed', { ...event, messageId: 'm-1', replied: true })
    await visitor.quietFor(100)
    expect(lastTyping() ?? { on: false }).toMatchObject({ on: false })

    switchboard.events.emit('turn-started', { ...event, messageId: 'm-2' })
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: true })
    switchboard.events.emit('turn-completed', { ...event, messageId: 'm-2', replied: true })
    await sendReply('Two.')
    expect(await visitor.next('message')).toMatchObject({ text: 'Two.' })
    await visitor.quietFor(100)
    expect(lastTyping()).toEqual({ type: 'typing', on: false })
  })

  it('turns typing off with the reply when the job’s first try failed after its turn started', async () => {
    const { switchboard } = fixture.service.reference
    const storage = switchboard.storage as { transaction: typeof switchboard.storage.transaction }
    const transaction = storage.transaction.bind(storage)
    // The turn's commit fails once (a connection reset, say): no turn-completed, and the job's
    // retry starts the same message's turn again.
    let failNextCommit = false
    const armFailure = () => {
      failNextCommit = true
      switchboard.events.off('turn-started', armFailure)
    }
    switchboard.events.on('turn-started', armFailure)
    storage.transaction = (fn) => {
      if (!failNextCommit) return transaction(fn)
      failNextCommit = false
      return Promise.reject(new Error('connection reset'))
    }
    try {
      fixture.service.model.script(fixture.agentId, reply('Lost with the commit.'), reply('Hello!'))
      const visitor = await visit()
      await visitor.next('session')
      visitor.send({ type: 'message', text: 'hi', clientMessageId: 'c-1' })
      await visitor.next('ack')
      expect(await visitor.next((frame) => frame.role === 'agent', 10_000)).toMatchObject({ text: 'Hello!' })
      await visitor.quietFor(200)
      expect(visitor.frames.filter((frame) => frame.type === 'typing').at(-1)).toEqual({
        type: 'typing',
        on: false,
      })
    } finally {
      storage.transaction = transaction
      switchboard.events.off('turn-started', armFailure)
    }
  }, 20_000)

  it.each([
    ['a pause and a resume', 'pause'],
    ['a close and a new session', 'close'],
  ])(
    'counts no reply from a turn whose end comes after %s',
    async (_name, operation) => {
      const { switchboard } = fixture.service.reference
      const visitor = await visit()
      const { sessionId } = await visitor.next('session')
      const turn = {
        companyId: 1,
        sessionId: sessionId as string,
        agentId: fixture.agentId,
        messageId: 'm-1',
      }
      // Another process's turn ends after the operator's change reached the socket; the change
      // blocked the turn's reply, which never arrives.
      switchboard.events.emit('turn-started', turn)
      await visitor.next((frame) => frame.type === 'typing' && frame.on === true)
      await fixture.service.api('POST', `/api/sessions/${sessionId}/${operation}`)
      await visitor.next('state')
      switchboard.events.emit('turn-completed', { ...turn, replied: true })
      await visitor.quietFor(100)
      if (operation === 'pause') {
        await fixture.service.api('POST', `/api/sessions/${sessionId}/resume`)
        await visitor.next((frame) => frame.type === 'state' && frame.state === 'ongoing')
      }

      fixture.service.model.script(fixture.agentId, reply('Here again.'))
      visitor.send({ type: 'message', text: 'hello?', clientMessageId: `c-${operation}` })
      expect(await visitor.next((frame) => frame.role === 'agent')).toMatchObject({ text: 'Here again.' })
      await switchboard.idle()
      await visitor.quietFor(200)
      expect(visitor.frames.filter((frame) => frame.type === 'typing').at(-1)).toEqual({
        type: 'typing',
        on: false,
      })
    },
    20_000,
  )

  // CONTRACT §9: without credits no agent works, so none is typing (§7); the dots used to show until
  // the 30 s timeout for a reply that never comes.
  it('turns typing off when the company has no credits left and nothing will answer', async () => {
    const { switchboard } = fixture.service.reference
    const visitor = await visit()
    const { sessionId } = await visitor.next('session')
    const { companyId } = (await switchboard.storage.sessions.get({ id: sessionId as string }))!
    const balance = await switchboard.storage.billing.getBalance({ companyId })
    await switchboard.storage.billing.adjust({ companyId, amountUsd: -balance, at: new Date() })
    try {
      visitor.send({ type: 'message', text: 'anyone?', clientMessageId: 'broke-1' })
      await visitor.next('ack')
      await switchboard.idle()
      await visitor.quietFor(300)
      const view = await fixture.service.api<SessionView>('GET', `/api/sessions/${sessionId}`)
      expect(view.body.metadata.errors.map((error) => error.code)).toEqual(['CREDITS_EXHAUSTED'])
      const lastTyping = visitor.frames.filter((frame) => frame.type === 'typing').at(-1)
      expect(lastTyping ?? { on: false }).toMatchObject({ on: false })
    } finally {
      await switchboard.storage.billing.adjust({ companyId, amountUsd: balance, at: new Date() })
    }
  })

  it('acks a message without a clientMessageId with its messageId alone', async () => {
    fixture.service.model.script(fixture.agentId, reply('Sure.'))
    const visitor = await visit()
    await visitor.next('session')
    visitor.send({ type: 'message', text: 'No id' })
    expect(await visitor.next('ack')).toEqual({ type: 'ack', messageId: expect.any(String) })
    await visitor.next('message')
  })

  it('resumes the same session with the token and replays history since a message', async () => {
    fixture.service.model.script(fixture.agentId, reply('First answer'), reply('Second answer'))
    const first = await visit()
    const session = await first.next('session')
    first.send({ type: 'message', text: 'one', clientMessageId: 'one' })
    const one = await first.next('ack')
    const firstAnswer = await first.next((frame) => frame.type === 'message' && frame.role === 'agent')
    first.send({ type: 'message', text: 'two', clientMessageId: 'two' })
    const two = await first.next('ack')
    await first.next((frame) => frame.type === 'message' && frame.role === 'agent')
    await first.close()

    const again = await visit(session.visitorToken as string)
    expect(await again.next()).toEqual({ ...session })
    again.send({ type: 'history', since: firstAnswer.messageId })
    const replayed = [await again.next('message'), await again.next('message')]
    expect(replayed.map((frame) => [frame.role, frame.text])).toEqual([
      ['customer', 'two'],
      ['agent', 'Second answer'],
    ])
    expect(replayed[0]!.messageId).toBe(two.messageId)
    expect(await again.quietFor(100, 'message')).toBe(true)

    // A UUID in capitals names the same message, as PostgreSQL reads it.
    again.send({ type: 'history', since: String(firstAnswer.messageId).toUpperCase() })
    expect((await again.next('message')).messageId).toBe(two.messageId)
    await again.next('message')

    again.send({ type: 'history' })
    const everything = await Promise.all([1, 2, 3, 4].map(() => again.next('message')))
    expect(everything.map((frame) => frame.text)).toEqual(['one', 'First answer', 'two', 'Second answer'])
    expect(everything[0]!.messageId).toBe(one.messageId)

    again.send({ type: 'history', since: '00000000-0000-4000-8000-000000000000' })
    expect(await again.next('error')).toMatchObject({ code: 'VALIDATION_ERROR' })
  })

  it('stores a repeated clientMessageId once and acks it again with the original messageId', async () => {
    fixture.service.model.script(fixture.agentId, reply('Once'))
    const visitor = await visit()
    const session = await visitor.next('session')
    visitor.send({ type: 'message', text: 'same', clientMessageId: 'dup-1' })
    visitor.send({ type: 'message', text: 'same', clientMessageId: 'dup-1' })
    const [first, second] = [await visitor.next('ack'), await visitor.next('ack')]
    expect(second).toEqual(first)
    await visitor.next('message')
    await visitor.close()

    // After a reconnect too, as a widget resends what it never saw acked.
    const again = await visit(session.visitorToken as string)
    await again.next('session')
    again.send({ type: 'message', text: 'same', clientMessageId: 'dup-1' })
    expect(await again.next('ack')).toEqual(first)
    await fixture.service.reference.switchboard.idle()
    const customerMessages = (await sessionMessages(session.sessionId as string)).filter(
      (message) => message.role === 'customer',
    )
    expect(customerMessages).toHaveLength(1)
    expect(await again.quietFor(100, 'typing')).toBe(true)
  })

  it('answers bad frames with VALIDATION_ERROR and keeps the connection open', async () => {
    fixture.service.model.script(fixture.agentId, reply('Still here'))
    const visitor = await visit()
    await visitor.next('session')
    const bad = [
      '{not json',
      JSON.stringify('a string'),
      JSON.stringify({ type: 'dance' }),
      JSON.stringify({ text: 'no type' }),
      JSON.stringify({ type: 'message', text: '' }),
      JSON.stringify({ type: 'message', text: 'x'.repeat(4001) }),
      JSON.stringify({ type: 'message', text: 7 }),
      JSON.stringify({ type: 'message', text: 'hi', clientMessageId: 'x'.repeat(101) }),
      JSON.stringify({ type: 'history', since: 5 }),
    ]
    for (const frame of bad) {
      visitor.send(frame)
      expect(await visitor.next()).toEqual({
        type: 'error',
        code: 'VALIDATION_ERROR',
        message: expect.any(String),
      })
    }
    visitor.socket.send(Buffer.from([1, 2, 3]), { binary: true })
    expect(await visitor.next()).toMatchObject({ type: 'error', code: 'VALIDATION_ERROR' })
    // A space is a character too (1..4000 characters, CONTRACT §7).
    visitor.send({ type: 'message', text: ' ', clientMessageId: 'space' })
    expect(await visitor.next('ack')).toMatchObject({ clientMessageId: 'space' })
    expect(await visitor.next('message')).toMatchObject({ role: 'agent', text: 'Still here' })
    fixture.service.model.script(fixture.agentId, reply('Still here'))
    // 4000 emoji are 4000 characters, though 8000 UTF-16 units.
    visitor.send({ type: 'message', text: '😀'.repeat(4000), clientMessageId: 'emoji' })
    expect(await visitor.next('ack')).toMatchObject({ clientMessageId: 'emoji' })
    expect(await visitor.next('message')).toMatchObject({ role: 'agent', text: 'Still here' })
  })

  it('closes the connection on a frame over 64 KiB with 1009, and keeps serving', async () => {
    const visitor = await visit()
    await visitor.next('session')
    visitor.send({ type: 'message', text: 'x'.repeat(70 * 1024) })
    expect(await visitor.closed).toBe(1009)
    expect((await fetch(`${fixture.service.url}/api/health`)).status).toBe(200)
    const next = await visit()
    expect(await next.next()).toMatchObject({ type: 'session' })
  })

  it('records a handoff to a human as HUMAN_TRANSFER_UNSUPPORTED, and the agent answers on', async () => {
    const human = await fixture.service.createAgent({ name: 'Human desk', kind: 'human' })
    const triage = await fixture.service.createAgent({
      name: 'Triage',
      handoff: { enabled: true, allowedTargets: [human] },
    })
    const entry = await fixture.service.createWebchat({ entryAgentId: triage })
    fixture.service.model.script(
      triage,
      handoff(human, 'customer asked for a person'),
      reply('I will help you myself.'),
    )
    const visitor = await fixture.connect(fixture.service.socketUrl(entry))
    const session = await visitor.next('session')
    visitor.send({ type: 'message', text: 'I want a human', clientMessageId: 'h-1' })
    expect(await visitor.next('message')).toMatchObject({ role: 'agent', text: 'I will help you myself.' })
    const view = await fixture.service.api<SessionView & { activeAgentId: number }>(
      'GET',
      `/api/sessions/${session.sessionId}`,
    )
    expect(view.body.state).toBe('ongoing')
    expect(view.body.activeAgentId).toBe(triage)
    expect(view.body.metadata.errors.map((error) => error.code)).toEqual(['HUMAN_TRANSFER_UNSUPPORTED'])
  })
})
