import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import type { EventBus } from '../../ports/event-bus.js'

export interface EventBusConformanceOptions {
  /**
   * Opens another bus on the same backend, as another process would; given, the suite checks
   * that a message published on one bus reaches subscribers on the other.
   */
  readonly createSecondBus?: () => Promise<EventBus> | EventBus
}

const DELIVERY_TIMEOUT_MS = 5_000
const POLL_INTERVAL_MS = 5
/** How long to wait for a message that must not come, once a later message has arrived. */
const QUIET_PERIOD_MS = 100

/** Unique per test, so runs sharing one backend never hear each other. */
function uniqueTopic(): string {
  return `conformance-${randomUUID()}`
}

function recorder(): { received: unknown[]; handler: (payload: unknown) => void } {
  const received: unknown[] = []
  return { received, handler: (payload) => received.push(payload) }
}

async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}

async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + DELIVERY_TIMEOUT_MS
  while (!condition()) {
    if (Date.now() > deadline)
      throw new Error(`Timed out after ${DELIVERY_TIMEOUT_MS} ms waiting for ${what}.`)
    await sleep(POLL_INTERVAL_MS)
  }
}

/**
 * The behaviour every `EventBus` must share with the in-memory one: run it against an adapter
 * with a factory that answers a connected bus. Buses the suite opens are closed after each test.
 */
export function runEventBusConformance(
  name: string,
  createBus: () => Promise<EventBus> | EventBus,
  options: EventBusConformanceOptions = {},
): void {
  describe(`${name} (EventBus conformance)`, () => {
    const openBuses: EventBus[] = []

    async function openBus(factory: () => Promise<EventBus> | EventBus = createBus): Promise<EventBus> {
      const bus = await factory()
      openBuses.push(bus)
      return bus
    }

    afterEach(async () => {
      await Promise.all(openBuses.splice(0).map((bus) => bus.close()))
    })

    it('delivers a published message to a subscriber of its topic', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      const subscriber = recorder()
      await bus.subscribe(topic, subscriber.handler)

      await bus.publish(topic, { kind: 'message-received', sessionId: 's-1' })

      await waitUntil(() => subscriber.received.length > 0, 'the message')
      expect(subscriber.received).toEqual([{ kind: 'message-received', sessionId: 's-1' }])
    })

    it('delivers only to subscribers of the topic published on', async () => {
      const bus = await openBus()
      const firstTopic = uniqueTopic()
      const secondTopic = uniqueTopic()
      const first = recorder()
      const second = recorder()
      await bus.subscribe(firstTopic, first.handler)
      await bus.subscribe(secondTopic, second.handler)

      await bus.publish(secondTopic, 'for the second')
      await bus.publish(firstTopic, 'for the first')
      await bus.publish(uniqueTopic(), 'for nobody')

      await waitUntil(() => first.received.length > 0 && second.received.length > 0, 'both messages')
      await sleep(QUIET_PERIOD_MS)
      expect(first.received).toEqual(['for the first'])
      expect(second.received).toEqual(['for the second'])
    })

    it('round-trips payloads as JSON', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      const subscriber = recorder()
      await bus.subscribe(topic, subscriber.handler)
      const payloads: unknown[] = [
        { sessionId: 's-1', active: true },
        'plain text',
        'Grüße 👋 "quoted" \\ and\na newline',
        42,
        -1.5,
        0,
        false,
        null,
        [1, 'two', { three: 3 }, []],
        { order: { id: 'o-1', items: [{ sku: 'x', quantity: 2 }], meta: { tags: ['a'], empty: {} } } },
      ]

      for (const payload of payloads) await bus.publish(topic, payload)

      await waitUntil(() => subscriber.received.length >= payloads.length, 'every payload')
      await sleep(QUIET_PERIOD_MS)
      expect(subscriber.received).toHaveLength(payloads.length)
      expect(subscriber.received).toEqual(expect.arrayContaining(payloads))
    })

    it('delivers what JSON keeps: dates as strings, undefined fields dropped', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      const subscriber = recorder()
      await bus.subscribe(topic, subscriber.handler)

      await bus.publish(topic, { at: new Date(Date.UTC(2024, 0, 2, 3, 4, 5)), missing: undefined, kept: 1 })

      await waitUntil(() => subscriber.received.length > 0, 'the message')
      expect(subscriber.received).toEqual([{ at: '2024-01-02T03:04:05.000Z', kept: 1 }])
    })

    it('delivers one copy to each of several subscribers', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      const subscribers = [recorder(), recorder(), recorder()]
      for (const subscriber of subscribers) await bus.subscribe(topic, subscriber.handler)

      await bus.publish(topic, { n: 1 })

      await waitUntil(() => subscribers.every((subscriber) => subscriber.received.length > 0), 'every copy')
      await sleep(QUIET_PERIOD_MS)
      for (const subscriber of subscribers) expect(subscriber.received).toEqual([{ n: 1 }])
    })

    it('stops delivering to a handler once it unsubscribes', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      const leaving = recorder()
      const staying = recorder()
      const unsubscribe = await bus.subscribe(topic, leaving.handler)
      await bus.subscribe(topic, staying.handler)
      await bus.publish(topic, 'before')
      await waitUntil(() => leaving.received.length > 0 && staying.received.length > 0, 'the first message')

      await unsubscribe()
      await bus.publish(topic, 'after')

      await waitUntil(() => staying.received.length > 1, 'the second message')
      await sleep(QUIET_PERIOD_MS)
      expect(leaving.received).toEqual(['before'])
      expect(staying.received).toEqual(['before', 'after'])
      await expect(unsubscribe()).resolves.toBeUndefined()
    })

    it('keeps delivering to other handlers when one throws or rejects', async () => {
      const bus = await openBus()
      const topic = uniqueTopic()
      let throwingCalls = 0
      let rejectingCalls = 0
      await bus.subscribe(topic, () => {
        throwingCalls += 1
        throw new Error('a subscriber bug')
      })
      await bus.subscribe(topic, async () => {
        rejectingCalls += 1
        throw new Error('an asynchronous subscriber bug')
      })
      const healthy = recorder()
      await bus.subscribe(topic, healthy.handler)

      await expect(bus.publish(topic, 1)).resolves.toBeUndefined()
      await expect(bus.publish(topic, 2)).resolves.toBeUndefined()

      await waitUntil(
        () => healthy.received.length >= 2 && throwingCalls >= 2 && rejectingCalls >= 2,
        'both messages',
      )
      expect(healthy.received).toEqual(expect.arrayContaining([1, 2]))
    })

    it('accepts a message nobody subscribes to', async () => {
      const bus = await openBus()

      await expect(bus.publish(uniqueTopic(), { lonely: true })).resolves.toBeUndefined()
    })

    const createSecondBus = options.createSecondBus
    if (createSecondBus !== undefined) {
      it('carries messages between buses on the same backend, both ways', async () => {
        const firstBus = await openBus()
        const secondBus = await openBus(createSecondBus)
        const topic = uniqueTopic()
        const onFirst = recorder()
        const onSecond = recorder()
        await firstBus.subscribe(topic, onFirst.handler)
        await secondBus.subscribe(topic, onSecond.handler)

        await firstBus.publish(topic, { from: 'first' })
        await secondBus.publish(topic, { from: 'second' })

        await waitUntil(
          () => onFirst.received.length >= 2 && onSecond.received.length >= 2,
          'both messages on both buses',
        )
        await sleep(QUIET_PERIOD_MS)
        for (const received of [onFirst.received, onSecond.received]) {
          expect(received).toHaveLength(2)
          expect(received).toEqual(expect.arrayContaining([{ from: 'first' }, { from: 'second' }]))
        }
      })
    }
  })
}
