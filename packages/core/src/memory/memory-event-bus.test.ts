import { describe, expect, it, vi } from 'vitest'
import type { EventBus } from '../ports/event-bus.js'
import { runEventBusConformance } from '../testing/conformance/event-bus-conformance.js'
import { createMemoryEventBus } from './memory-event-bus.js'

runEventBusConformance('memory event bus', async () => createMemoryEventBus())

/**
 * Handles onto one memory bus stand in for two processes on one backend, so the suite's
 * cross-bus case runs here too. Closing a handle ends only its own subscriptions.
 */
function handleOnto(shared: EventBus): EventBus {
  const unsubscribes = new Set<() => Promise<void>>()
  let closed = false
  return {
    publish: async (topic, payload) => {
      if (!closed) await shared.publish(topic, payload)
    },
    subscribe: async (topic, handler) => {
      if (closed) throw new Error('closed')
      const unsubscribe = await shared.subscribe(topic, handler)
      unsubscribes.add(unsubscribe)
      return unsubscribe
    },
    close: async () => {
      closed = true
      await Promise.all([...unsubscribes].map((unsubscribe) => unsubscribe()))
    },
  }
}

const shared = createMemoryEventBus()
runEventBusConformance('memory event bus, two handles', async () => handleOnto(shared), {
  createSecondBus: async () => handleOnto(shared),
})

async function flush(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 0))
}

describe('createMemoryEventBus', () => {
  it('calls handlers after publish returns, not during it', async () => {
    const bus = createMemoryEventBus()
    const handler = vi.fn()
    await bus.subscribe('topic', handler)

    const publishing = bus.publish('topic', 'hello')

    expect(handler).not.toHaveBeenCalled()
    await publishing
    await flush()
    expect(handler).toHaveBeenCalledWith('hello')
  })

  it('gives each handler its own copy of the payload', async () => {
    const bus = createMemoryEventBus()
    const received: { count: number }[] = []
    await bus.subscribe('topic', (payload) => {
      const copy = payload as { count: number }
      copy.count += 1
      received.push(copy)
    })
    await bus.subscribe('topic', (payload) => received.push(payload as { count: number }))
    const payload = { count: 0 }

    await bus.publish('topic', payload)
    payload.count = 100
    await flush()

    expect(received).toEqual([{ count: 1 }, { count: 0 }])
  })

  it('delivers undefined as null', async () => {
    const bus = createMemoryEventBus()
    const handler = vi.fn()
    await bus.subscribe('topic', handler)

    await bus.publish('topic', undefined)
    await flush()

    expect(handler).toHaveBeenCalledWith(null)
  })

  it('rejects a payload JSON cannot carry, without delivering it', async () => {
    const bus = createMemoryEventBus()
    const handler = vi.fn()
    await bus.subscribe('topic', handler)
    const circular: Record<string, unknown> = {}
    circular.self = circular

    await expect(bus.publish('topic', circular)).rejects.toThrow(TypeError)
    await expect(bus.publish('topic', 10n)).rejects.toThrow(TypeError)
    await flush()

    expect(handler).not.toHaveBeenCalled()
  })

  it('reports handler errors to onHandlerError with their topic', async () => {
    const onHandlerError = vi.fn()
    const bus = createMemoryEventBus({ onHandlerError })
    const failure = new Error('boom')
    await bus.subscribe('topic', () => {
      throw failure
    })

    await bus.publish('topic', 1)
    await flush()

    expect(onHandlerError).toHaveBeenCalledWith(failure, 'topic')
  })

  it('does not deliver a message published before unsubscribing but not yet handled', async () => {
    const bus = createMemoryEventBus()
    const handler = vi.fn()
    const unsubscribe = await bus.subscribe('topic', handler)

    const publishing = bus.publish('topic', 1)
    const unsubscribing = unsubscribe()
    await Promise.all([publishing, unsubscribing])
    await flush()

    expect(handler).not.toHaveBeenCalled()
  })

  describe('once closed', () => {
    it('ignores publishing', async () => {
      const bus = createMemoryEventBus()
      const handler = vi.fn()
      await bus.subscribe('topic', handler)

      await bus.close()
      await expect(bus.publish('topic', 1)).resolves.toBeUndefined()
      await flush()

      expect(handler).not.toHaveBeenCalled()
    })

    it('refuses new subscriptions', async () => {
      const bus = createMemoryEventBus()
      await bus.close()

      await expect(bus.subscribe('topic', () => {})).rejects.toThrow(/closed/)
    })

    it('can be closed again, and unsubscribing still resolves', async () => {
      const bus = createMemoryEventBus()
      const unsubscribe = await bus.subscribe('topic', () => {})

      await bus.close()

      await expect(bus.close()).resolves.toBeUndefined()
      await expect(unsubscribe()).resolves.toBeUndefined()
    })
  })
})
