import { randomUUID } from 'node:crypto'
import {
  createMemoryEventBus,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type Integration,
  type Message,
  type Session,
} from '@switchboard/core'
import { describe, expect, it, vi } from 'vitest'
import { createWebchatConnector } from './webchat-connector.js'

describe('the webchat connector', () => {
  // A process that only delivers replies (a front whose sweep claims them) sees a new session with
  // every send: what it remembers of them must stay bounded like its lookups.
  it('remembers at most 10,000 sessions, those it sent to included: the first of 10,001 is looked up again', async () => {
    const storage = createMemoryStorage()
    const switchboard = createSwitchboard({
      storage,
      model: createOfflineProvider(),
      knowledge: createMemoryKnowledgeIndex(),
    })
    const connector = createWebchatConnector({ switchboard, eventBus: createMemoryEventBus() })
    const lookups = vi.spyOn(storage.sessions, 'get')
    const send = (sessionId: string) => {
      const message = {
        id: randomUUID(),
        role: 'agent',
        text: 'hello',
        at: '2026-11-26T10:00:00.000Z',
      } as Message
      return connector.send({
        integration: {} as Integration,
        session: { id: sessionId } as Session,
        message,
      })
    }
    try {
      const first = randomUUID()
      expect(await send(first)).toEqual({ ok: true })
      for (let index = 0; index < 10_000; index++) await send(randomUUID())

      switchboard.events.emit('turn-started', {
        companyId: 1,
        sessionId: first,
        messageId: randomUUID(),
        agentId: 1,
      })

      await vi.waitFor(() => expect(lookups).toHaveBeenCalledWith({ id: first }))
    } finally {
      connector.close()
      await switchboard.stop()
    }
  })
})
