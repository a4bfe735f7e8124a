import type { EventBus } from '@switchboard/core'
import { EVENTS_CHANNEL, scopedChannel } from './channels.js'
import { assertDbOption, type Db } from './db.js'
import { ensureMigrated } from './migrate.js'
import { createMutex } from './mutex.js'

export interface PostgresEventBusOptions {
  /** The caller closes it; closing the bus only stops this bus. */
  readonly db: Db
  /** Told about a handler that threw or rejected, or a message that could not be read. */
  readonly onHandlerError?: (error: unknown, topic: string) => void
}

/**
 * PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. Messages longer than this wait in
 * `event_payloads` and the notification carries their row id.
 */
const NOTIFY_PAYLOAD_MAX_BYTES = 7_900

/** Stored payloads outlive any subscriber that could still fetch them by this much. */
const STORED_PAYLOAD_TTL = '10 minutes'

/** What travels on the channel: the topic with the JSON payload, or with the id of a stored one. */
type Envelope = { readonly topic: string; readonly payload: unknown } | { readonly stored: number }

/**
 * Publish/subscribe across every process on the same database, over LISTEN/NOTIFY on one channel
 * per schema; topics are sorted out in each process. Payloads travel as JSON, so subscribers get
 * copies with dates as strings and undefined fields dropped, as on the memory bus. A message is
 * delivered to the subscriptions live when it commits; like NOTIFY itself, nothing is replayed to
 * a process that was disconnected at the time: its subscriptions are told (`onMissed`) once the
 * connection listens again, so that those that must not miss anything catch up from storage.
 */
export async function createPostgresEventBus(options: PostgresEventBusOptions): Promise<EventBus> {
  assertDbOption('createPostgresEventBus', options)
  const { db, onHandlerError = () => {} } = options
  await ensureMigrated(db)
  const channel = await scopedChannel(db, EVENTS_CHANNEL)
  const handlers = new Map<string, Set<(json: string) => void>>()
  /** Subscriptions to tell when the LISTEN connection broke and listens again. */
  const missed = new Set<{ readonly topic: string; readonly onMissed: () => void }>()
  // Notifications are read one after the other, so a stored payload that must be fetched first
  // does not let later messages overtake it.
  const reading = createMutex()
  let stopListening: (() => Promise<void>) | null = null
  let closed = false

  const deliver = (topic: string, json: string): void => {
    for (const handler of [...(handlers.get(topic) ?? [])]) handler(json)
  }

  const read = async (notification: string): Promise<void> => {
    const envelope = JSON.parse(notification) as Envelope
    if ('topic' in envelope) {
      deliver(envelope.topic, JSON.stringify(envelope.payload))
      return
    }
    const [row] = await db.query<{ topic: string; payload: string }>(
      'SELECT topic, payload FROM event_payloads WHERE id = $1',
      [envelope.stored],
    )
    if (row !== undefined) deliver(row.topic, row.payload)
  }

  // LISTEN once, on the first subscription, and keep it until the bus closes.
  const listening = (() => {
    let started: Promise<void> | null = null
    return () => {
      started ??= db
        .listen(
          channel,
          (notification) => {
            reading
              .run(() => (closed ? Promise.resolve() : read(notification)))
              .catch((error: unknown) => onHandlerError(error, channel))
          },
          {
            onReconnect: () => {
              for (const { topic, onMissed } of [...missed]) {
                if (closed) return
                try {
                  onMissed()
                } catch (error) {
                  onHandlerError(error, topic)
                }
              }
            },
          },
        )
        .then(async (stop) => {
          // Closed while LISTEN was on its way: stop right away.
          if (closed) await stop()
          else stopListening = stop
        })
        .catch((error: unknown) => {
          started = null
          throw error
        })
      return started
    }
  })()

  return {
    async publish(topic, payload) {
      if (closed) return
      // Serialised now, synchronously, so a payload that cannot be sent fails its publisher and
      // later changes to the object cannot reach subscribers.
      const json: string = JSON.stringify(payload) ?? 'null'
      const envelope = `{"topic":${JSON.stringify(topic)},"payload":${json}}`
      if (Buffer.byteLength(envelope) <= NOTIFY_PAYLOAD_MAX_BYTES) {
        await db.notify(channel, envelope)
        return
      }
      // Stored and announced in one statement; old stored payloads are cleared on the way.
      await db.query(
        `WITH stored AS (
          INSERT INTO event_payloads (topic, payload) VALUES ($1, $2) RETURNING id
        ), expired AS (
          DELETE FROM event_payloads WHERE created_at < now() - $4::interval
        )
        SELECT pg_notify($3, json_build_object('stored', stored.id)::text) FROM stored`,
        [topic, json, channel, STORED_PAYLOAD_TTL],
      )
    },

    async subscribe(topic, handler, subscribeOptions) {
      if (closed) throw new Error(`Cannot subscribe to "${topic}": the event bus is closed.`)
      let subscribed = true
      const listener = (json: string): void => {
        // Each handler runs in its own later task, with its own copy, so the reader never waits
        // on a subscriber and one failing handler cannot stop the others.
        Promise.resolve()
          .then(() => {
            if (subscribed && !closed) return handler(JSON.parse(json))
          })
          .catch((error: unknown) => onHandlerError(error, topic))
      }
      const topicHandlers = handlers.get(topic) ?? new Set()
      topicHandlers.add(listener)
      handlers.set(topic, topicHandlers)
      const told =
        subscribeOptions?.onMissed === undefined ? undefined : { topic, onMissed: subscribeOptions.onMissed }
      if (told !== undefined) missed.add(told)
      try {
        await listening()
      } catch (error) {
        topicHandlers.delete(listener)
        if (told !== undefined) missed.delete(told)
        throw error
      }
      return async () => {
        subscribed = false
        if (told !== undefined) missed.delete(told)
        topicHandlers.delete(listener)
        if (topicHandlers.size === 0 && handlers.get(topic) === topicHandlers) handlers.delete(topic)
      }
    },

    async close() {
      if (closed) return
      closed = true
      handlers.clear()
      missed.clear()
      await stopListening?.()
    },
  }
}
