import { type InboundMessage, type IngestOptions, ingest } from './ingest.js'
import { type IngestOutcome, type IngestRequest, ingestMany } from './ingest-batch.js'
import type { RuntimeContext } from './runtime-context.js'

/** At most this many messages share one transaction. */
const MAX_BATCH = 64
/** Transactions of ingested messages under way at once, per process. */
const MAX_RUNNING = 2

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
 * message by message, so one bad message, or a race with another process, costs the others
 * nothing but time.
 */
export function createIngestQueue(context: RuntimeContext): IngestQueue {
  const waiting: Waiting[] = []
  let running = 0

  const storeAlone = async (request: Waiting): Promise<void> => {
    try {
      request.resolve(await ingest(context, request.inbound, request.options))
    } catch (error) {
      request.reject(error)
    }
  }

  const storeTogether = async (batch: Waiting[]): Promise<void> => {
    let outcomes: IngestOutcome[]
    try {
      outcomes = await ingestMany(context, batch)
    } catch {
      await Promise.all(batch.map(storeAlone))
      return
    }
    for (const [index, request] of batch.entries()) request.resolve(outcomes[index]!)
  }

  const drain = async (): Promise<void> => {
    running += 1
    try {
      while (waiting.length > 0) {
        const batch = waiting.splice(0, MAX_BATCH)
        await (batch.length === 1 ? storeAlone(batch[0]!) : storeTogether(batch))
      }
    } finally {
      running -= 1
    }
  }

  return {
    ingest(inbound, options) {
      return new Promise<IngestOutcome>((resolve, reject) => {
        waiting.push({ inbound, options, resolve, reject })
        if (running < MAX_RUNNING) void drain()
      })
    },
  }
}
