import { EventEmitter } from 'eventemitter3'
import type { EventBus } from '../ports/event-bus.js'

export interface MemoryEventBusOptions {
  /** Told about a handler that threw or rejected; by default such errors are dropped. */
  readonly onHandlerError?: (error: unknown, topic: string) => void
}

/**
 * An event bus for a single process. Payloads travel as JSON text, as they would between
 * processes, so code tested against this bus sees the same copies, dropped `undefined` fields and
 * stringified dates that a shared bus would give it.
 */
export function createMemoryEventBus(options: MemoryEventBusOptions = {}): EventBus {
  const emitter = new EventEmitter<string>()
  let closed = false

  return {
    async publish(topic: string, payload: unknown): Promise<void> {
      if (closed) return
      // Serialised here, synchronously, so a payload that cannot be sent fails its publisher and
      // later changes to the object cannot reach subscribers.
      const json: string | undefined = JSON.stringify(payload)
      emitter.emit(topic, json ?? 'null')
    },

    async subscribe(topic: string, handler: (payload: unknown) => void): Promise<() => Promise<void>> {
      if (closed) throw new Error(`Cannot subscribe to "${topic}": the event bus is closed.`)
      let subscribed = true
      const listener = (json: string): void => {
        // Each handler runs in its own later task, so the publisher never waits on a subscriber
        // and one failing handler cannot stop the others.
        Promise.resolve()
          .then(() => {
            if (subscribed && !closed) return handler(JSON.parse(json))
          })
          .catch((error: unknown) => options.onHandlerError?.(error, topic))
      }
      emitter.on(topic, listener)
      return async () => {
        subscribed = false
        emitter.off(topic, listener)
      }
    },

    async close(): Promise<void> {
      closed = true
      emitter.removeAllListeners()
    },
  }
}
