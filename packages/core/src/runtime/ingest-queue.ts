import { createHandOff } from './hand-off.js'
import { type InboundMessage, type IngestOptions, ingest } from './ingest.js'
import { type IngestOutcome, type IngestRequest, ingestMany } from './ingest-batch.js'
import type { RuntimeContext } from './runtime-context.js'
import type { JobHandOff } from './worker-pool.js'

/** At most this many messages share one transaction. */
const MAX_BATCH = 64
/**
 * No batch started for this long while messages wait: the store under way is stuck (waiting for a
 * lock, say), and another one starts beside it.
 */
const STALLED_MS = 100
/** Stores under way at once, at most, per process. */
const MAX_RUNNING = 8

interface Waiting extends IngestRequest {
  resolve(outcome: IngestOutcome): void
  reject(error: unknown): void
}

export interface IngestQueue {
  ingest(inbound: InboundMessage, options: IngestOptions): Promise<IngestOutcome>
}

/**
 * Group commit for inbound messages. A message that finds no transaction of messages under way
 * is stored at once, alone; messages arriving while one is under way wait for it and are then
 * stored together (`ingestMany`), so under load a few statements and one commit serve many
 * messages instead of each paying its own. A batch whose transaction fails is stored again
 * message by message (each customer's in the order they came), so one bad message, or a race
 * with another process, costs the others nothing but time.
 */
export function createIngestQueue(context: RuntimeContext, workers: JobHandOff): IngestQueue {
  const waiting: Waiting[] = []
  // One store under way at a time while they go well: the messages that wait for it make the next
  // batch bigger, and bigger batches cost fewer statements per message (two at a time stored
  // fewer per second on PostgreSQL).
  let running = 0
  let lastStartedAt = 0
  let stallCheckPending = false
  // Customers with a message in a store under way: a store started beside a stuck one leaves their
  // later messages waiting, so a customer's messages are stored in the order they came. The
  // customer of a lone store (`storeFirst`) is `first` instead.
  const storing = new Map<string, number>()
  // A lone store starts only when no store is under way, so at most one is. Its customer is kept
  // as the message itself: a key in `storing` was built, hashed and dropped for every message.
  let first: InboundMessage | null = null
  const isFirstCustomer = ({ integrationId, clientId }: InboundMessage): boolean =>
    first !== null && first.integrationId === integrationId && first.clientId === clientId
  const hold = (key: string) => storing.set(key, (storing.get(key) ?? 0) + 1)
  const letGo = (key: string) => {
    const left = storing.get(key)! - 1
    if (left === 0) storing.delete(key)
    else storing.set(key, left)
  }

  /** Up to MAX_BATCH waiting messages, in the order they came, of customers no store holds. */
  const takeBatch = (): Waiting[] => {
    if (storing.size === 0 && first === null) return waiting.splice(0, MAX_BATCH)
    const batch: Waiting[] = []
    const kept: Waiting[] = []
    for (const request of waiting) {
      const held = isFirstCustomer(request.inbound) || storing.has(customerKey(request.inbound))
      if (batch.length < MAX_BATCH && !held) batch.push(request)
      else kept.push(request)
    }
    waiting.splice(0, waiting.length, ...kept)
    return batch
  }

  const storeAlone = async (request: Waiting): Promise<void> => {
    try {
      request.resolve(await ingest(context, workers, request.inbound, request.options))
    } catch (error) {
      request.reject(error)
    }
  }

  /** A customer's messages one after the other, in the order they came. */
  const storeInTurn = async (requests: readonly Waiting[]): Promise<void> => {
    for (const request of requests) await storeAlone(request)
  }

  const storeTogether = async (batch: Waiting[]): Promise<void> => {
    // The first job of each session in the batch goes to a free worker, as a lone message's does.
    const handOff = createHandOff(context, workers)
    try {
      let outcomes: IngestOutcome[]
      try {
        outcomes = await ingestMany(context, batch, handOff)
      } catch {
        handOff.failed()
        await Promise.all(inCustomerOrder(batch).map(storeInTurn))
        return
      }
      const queued = outcomes.filter((outcome) => outcome.isOk() && outcome.value.queued).length
      if (handOff.committed() < queued) workers.wake()
      for (const [index, request] of batch.entries()) request.resolve(outcomes[index]!)
    } finally {
      const givingBack = handOff.finish()
      if (givingBack !== undefined) await givingBack
    }
  }

  const drain = async (): Promise<void> => {
    running += 1
    try {
      while (waiting.length > 0) {
        const batch = takeBatch()
        // All that wait are customers another store holds: it takes them when it is done.
        if (batch.length === 0) return
        const keys = batch.map((request) => customerKey(request.inbound))
        for (const key of keys) hold(key)
        lastStartedAt = context.clock.now().getTime()
        try {
          await (batch.length === 1 ? storeAlone(batch[0]!) : storeTogether(batch))
        } finally {
          for (const key of keys) letGo(key)
        }
      }
    } finally {
      running -= 1
    }
  }

  const storedFirst = (): void => {
    running -= 1
    first = null
    if (waiting.length > 0 && running === 0) void drain()
  }

  /**
   * A store that found nothing under way; the messages that arrive meanwhile are batched after it.
   * Its bookkeeping is a reaction to ingest's own promise, registered before the caller's, rather
   * than an async wrapper that would resolve a promise of its own with the outcome.
   */
  const storeFirst = (inbound: InboundMessage, options: IngestOptions): Promise<IngestOutcome> => {
    running += 1
    first = inbound
    lastStartedAt = context.clock.now().getTime()
    const storing = ingest(context, workers, inbound, options)
    void storing.then(storedFirst, storedFirst)
    return storing
  }

  const checkForStallIn = (ms: number): void => {
    stallCheckPending = true
    context.clock.setTimer(() => {
      stallCheckPending = false
      if (waiting.length === 0) return
      const waited = context.clock.now().getTime() - lastStartedAt
      if (waited < STALLED_MS) checkForStallIn(STALLED_MS - waited)
      else if (running < MAX_RUNNING) void drain()
    }, ms)
  }

  return {
    ingest(inbound, options) {
      // Nothing under way: this message is stored at once, alone, without joining the queue.
      if (running === 0) return storeFirst(inbound, options)
      return new Promise<IngestOutcome>((resolve, reject) => {
        waiting.push({ inbound, options, resolve, reject })
        if (!stallCheckPending) checkForStallIn(STALLED_MS)
      })
    },
  }
}

/**
 * A failed batch's messages by customer, each customer's in the order they came. Stored again one
 * by one, a customer's messages go one after the other: side by side they would race each other
 * for their session (a new one, when the batch failed because a close landed), and land, and be
 * answered, out of order. Different customers' still go side by side.
 */
function inCustomerOrder<T extends IngestRequest>(batch: readonly T[]): T[][] {
  const byCustomer = new Map<string, T[]>()
  for (const request of batch) {
    const key = customerKey(request.inbound)
    const requests = byCustomer.get(key)
    if (requests === undefined) byCustomer.set(key, [request])
    else requests.push(request)
  }
  return [...byCustomer.values()]
}

/** One key per customer of an integration (the integration id's length keeps the two parts apart). */
function customerKey({ integrationId, clientId }: InboundMessage): string {
  return `${integrationId.length}:${integrationId}${clientId}`
}
