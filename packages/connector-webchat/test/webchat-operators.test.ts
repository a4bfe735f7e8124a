import { reply } from '@switchboard/core/testing'
import { describe, expect, it } from 'vitest'
import { useWebchatFixture } from './support/webchat-fixture.js'

const fixture = useWebchatFixture()
const visit = (token?: string) => fixture.visit(token)

describe('operators and the webchat', () => {
  it('sends state frames on pause, resume and close; the next message opens a new session', async () => {
    const visitor = await visit()
    const session = await visitor.next('session')
    const path = `/api/sessions/${session.sessionId}`

    expect(
      (await fixture.service.api('POST', `${path}/pause`, { reason: 'a person takes over' })).status,
    ).toBe(200)
    expect(await visitor.next()).toEqual({ type: 'state', state: 'paused' })
    // Stored while paused, and no agent works on it: no typing.
    visitor.send({ type: 'message', text: 'hello?', clientMessageId: 'p-1' })
    await visitor.next('ack')
    expect(await visitor.quietFor(150, 'typing')).toBe(true)

    expect((await fixture.service.api('POST', `${path}/resume`)).status).toBe(200)
    expect(await visitor.next()).toEqual({ type: 'state', state: 'ongoing' })
    expect((await fixture.service.api('POST', `${path}/close`)).status).toBe(200)
    expect(await visitor.next()).toEqual({ type: 'state', state: 'closed' })

    fixture.service.model.script(fixture.agentId, reply('A fresh start'))
    visitor.send({ type: 'message', text: 'me again', clientMessageId: 'p-2' })
    const renewed = await visitor.next()
    expect(renewed).toEqual({
      type: 'session',
      sessionId: expect.any(String),
      visitorToken: session.visitorToken,
      state: 'ongoing',
    })
    expect(renewed.sessionId).not.toBe(session.sessionId)
    // The new session's first turn starts as the message is stored, and may end before the store
    // answers: its frames still follow the ack.
    expect(await visitor.next()).toMatchObject({ type: 'ack', clientMessageId: 'p-2' })
    expect(await visitor.next()).toEqual({ type: 'typing', on: true })
    expect(await visitor.next()).toMatchObject({ type: 'message', role: 'agent', text: 'A fresh start' })
    expect(await visitor.next()).toEqual({ type: 'typing', on: false })

    // The new session's events reach this socket; the old one's no longer matter.
    expect((await fixture.service.api('POST', `/api/sessions/${renewed.sessionId}/pause`)).status).toBe(200)
    expect(await visitor.next('state')).toEqual({ type: 'state', state: 'paused' })
  })

  it('gives the next connection a new session once the visitor’s session is closed', async () => {
    const visitor = await visit()
    const session = await visitor.next('session')
    await visitor.close()
    await fixture.service.api('POST', `/api/sessions/${session.sessionId}/close`)
    const again = await visit(session.visitorToken as string)
    const renewed = await again.next()
    expect(renewed).toMatchObject({ type: 'session', state: 'ongoing', visitorToken: session.visitorToken })
    expect(renewed.sessionId).not.toBe(session.sessionId)
  })

  // CONTRACT §8: on webchat a reassign to a human agent pauses with no connector call.
  it('pauses on a reassign to a human agent, with no transfer to make; no agent answers', async () => {
    const desk = await fixture.service.createAgent({ name: 'Front desk', kind: 'human' })
    const visitor = await visit()
    const session = await visitor.next('session')
    const path = `/api/sessions/${session.sessionId}`

    const reassigned = await fixture.service.api('POST', `${path}/reassign`, { agentId: desk })
    expect(reassigned.status).toBe(200)
    expect(reassigned.body).toEqual({
      id: session.sessionId,
      state: 'paused',
      activeAgentId: desk,
      pauseState: { pausedAt: expect.any(String) },
    })
    expect(await visitor.next()).toEqual({ type: 'state', state: 'paused' })

    // Stored, and no agent works on it (the scripted model fails the test on a call it lacks).
    visitor.send({ type: 'message', text: 'anyone there?', clientMessageId: 'd-1' })
    await visitor.next('ack')
    expect(await visitor.quietFor(150, 'typing')).toBe(true)
    await fixture.service.reference.switchboard.idle()
    const view = await fixture.service.api<{ metadata: { errors: unknown[] } }>('GET', path)
    expect(view.body.metadata.errors).toEqual([])
  })

  it('delivers an operator message, in any state but closed', async () => {
    const visitor = await visit()
    const session = await visitor.next('session')
    const path = `/api/sessions/${session.sessionId}`
    await fixture.service.api('POST', `${path}/pause`)
    await visitor.next('state')
    const sent = await fixture.service.api<{ id: string }>('POST', `${path}/messages`, {
      text: 'Hi, this is Ann from support.',
    })
    expect(sent.status).toBe(201)
    expect(await visitor.next('message')).toEqual({
      type: 'message',
      messageId: sent.body.id,
      role: 'operator',
      text: 'Hi, this is Ann from support.',
      at: expect.any(String),
    })
    await fixture.service.reference.switchboard.idle()
    const messages = await fixture.service.api<{ messages: { id: string; delivery: string }[] }>(
      'GET',
      `${path}/messages`,
    )
    expect(messages.body.messages.find((message) => message.id === sent.body.id)?.delivery).toBe('sent')
  })

  it('shows a message to the visitor’s other tabs, not back to the tab that sent it', async () => {
    const first = await visit()
    const session = await first.next('session')
    const second = await visit(session.visitorToken as string)
    expect(await second.next('session')).toMatchObject({ sessionId: session.sessionId })
    await fixture.service.api('POST', `/api/sessions/${session.sessionId}/pause`)
    first.send({ type: 'message', text: 'from tab one', clientMessageId: 't-1' })
    const ack = await first.next('ack')
    expect(await second.next('message')).toMatchObject({
      messageId: ack.messageId,
      role: 'customer',
      text: 'from tab one',
    })
    expect(await first.quietFor(100, 'message')).toBe(true)
  })

  it('answers RATE_LIMITED past 20 messages in 10 s, storing none of the extra, and stays open', async () => {
    const visitor = await visit()
    const session = await visitor.next('session')
    // Paused, so no agent runs: only the limit is under test.
    await fixture.service.api('POST', `/api/sessions/${session.sessionId}/pause`)
    await visitor.next('state')
    for (let index = 1; index <= 22; index += 1) {
      visitor.send({ type: 'message', text: `message ${index}`, clientMessageId: `r-${index}` })
    }
    const answers = await Promise.all(
      Array.from({ length: 22 }, () =>
        visitor.next((frame) => frame.type === 'ack' || frame.type === 'error'),
      ),
    )
    expect(answers.slice(0, 20).every((frame) => frame.type === 'ack')).toBe(true)
    expect(answers.slice(20)).toEqual([
      { type: 'error', code: 'RATE_LIMITED', message: expect.any(String) },
      { type: 'error', code: 'RATE_LIMITED', message: expect.any(String) },
    ])
    const stored = await fixture.service.api<{ messages: unknown[] }>(
      'GET',
      `/api/sessions/${session.sessionId}/messages`,
    )
    expect(stored.body.messages).toHaveLength(20)
    visitor.send({ type: 'history' })
    expect(await visitor.next('message')).toMatchObject({ text: 'message 1' })
  })

  it('sends the session frame first even to a burst sent before it', async () => {
    const { switchboard } = fixture.service.reference
    const openSession = switchboard.openSession
    // A slow store: the visitor's frames arrive while the session is still being opened.
    switchboard.openSession = async (customer) => {
      await new Promise((resolve) => setTimeout(resolve, 200))
      return openSession(customer)
    }
    try {
      const visitor = await visit()
      const burst = 80
      for (let index = 1; index <= burst; index += 1) visitor.send({ type: 'history' })
      await visitor.next('session')
      await visitor.quietFor(300)
      expect(visitor.frames[0]?.type).toBe('session')
      // The first 20 history requests are served (an empty session has nothing to resend); each
      // frame past the 64 waiting is refused, after the session frame.
      expect(visitor.frames.filter((frame) => frame.type === 'error')).toHaveLength(burst - 20)
    } finally {
      switchboard.openSession = openSession
    }
  })

  it('answers every frame of a burst larger than it queues, and stays open', async () => {
    const visitor = await visit()
    const session = await visitor.next('session')
    await fixture.service.api('POST', `/api/sessions/${session.sessionId}/pause`)
    await visitor.next('state')
    const burst = 150
    for (let index = 1; index <= burst; index += 1) {
      visitor.send({ type: 'message', text: `message ${index}`, clientMessageId: `b-${index}` })
    }
    const answers = await Promise.all(
      Array.from({ length: burst }, () =>
        visitor.next((frame) => frame.type === 'ack' || frame.type === 'error'),
      ),
    )
    // The first 20 within the rate limit are stored; every other frame is refused, none dropped.
    const acks = answers.filter((frame) => frame.type === 'ack')
    expect(acks.map((frame) => frame.clientMessageId)).toEqual(
      Array.from({ length: 20 }, (_, index) => `b-${index + 1}`),
    )
    expect(answers.filter((frame) => frame.type === 'error' && frame.code === 'RATE_LIMITED')).toHaveLength(
      burst - 20,
    )
    visitor.send({ type: 'message', text: 'still there?', clientMessageId: 'after' })
    expect(await visitor.next((frame) => frame.type === 'ack' || frame.type === 'error')).toMatchObject({
      type: 'error',
      code: 'RATE_LIMITED',
    })
  })
})
