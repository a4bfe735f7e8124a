import { EventEmitter } from 'eventemitter3'
import type { Result } from 'neverthrow'
import { createPriceTable, type PriceTable } from '../billing/model-prices.js'
import type { SwitchboardError } from '../domain/errors.js'
import type { Session } from '../domain/session.js'
import type { Clock, IdGenerator } from '../ports/clock.js'
import type { Connector } from '../ports/connector.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import type { LlmProvider } from '../ports/llm-provider.js'
import type { Integration, Storage } from '../ports/storage.js'
import type { Tool } from '../tools/tool.js'
import { createToolRegistry } from '../tools/tool-registry.js'
import { checkConnector, checkSwitchboardOptions } from './check-options.js'
import { coalesceReads } from './coalesce-reads.js'
import { createDeliveryService } from './deliver-outbox.js'
import type { SwitchboardEvents } from './events.js'
import { createHumanTransferService } from './human-transfer.js'
import type { InboundMessage, IngestOptions, IngestResult } from './ingest.js'
import { createIngestQueue } from './ingest-queue.js'
import { type CustomerAddress, openSession } from './open-session.js'
import type { RuntimeContext, RuntimeLogger } from './runtime-context.js'
import { createSessionOperations, type SessionOperations } from './session-operations.js'
import { createRandomIds, createSystemClock } from './system-clock.js'
import { createWorkerPool } from './worker-pool.js'

export interface SwitchboardOptions {
  readonly storage: Storage
  readonly model: LlmProvider
  readonly knowledge: KnowledgeIndex
  readonly connectors?: readonly Connector[]
  readonly tools?: readonly Tool[]
  readonly clock?: Clock
  readonly ids?: IdGenerator
  readonly logger?: RuntimeLogger
  /** Jobs processed at once by this process; 0 makes it ingest only. Default 8. */
  readonly concurrency?: number
  /**
   * How long a job's lease lasts before another process may take it; renewed while a turn runs.
   * Default 55 s: with a poll of 1 s, a job of a process that died is taken again within 60 s.
   */
  readonly leaseMs?: number
  /** How often to look for due retries and abandoned jobs and deliveries. Default 1 s. */
  readonly pollMs?: number
  /** What model calls cost; every call's usage is recorded and charged with the turn. */
  readonly prices?: PriceTable
  /**
   * Stop answering for a company whose balance is at or below 0 USD (no model call, no fallback
   * reply, `CREDITS_EXHAUSTED` on the session). Off by default: an embedding app may not sell credits.
   */
  readonly enforceCredits?: boolean
}

export interface Switchboard {
  readonly storage: Storage
  readonly knowledge: KnowledgeIndex
  readonly events: EventEmitter<SwitchboardEvents>
  readonly sessions: SessionOperations
  /**
   * Store one customer message and queue it; durable once this resolves with ok. Its turn may be
   * under way by then, on a free worker of this process (`message-received` is emitted first).
   */
  ingest(inbound: InboundMessage, options?: IngestOptions): Promise<Result<IngestResult, SwitchboardError>>
  /**
   * The integration with this id, of any company, as a webhook finds it; reads made at the same
   * time share one query. With `remembered`, the copy this process read last, when it has one:
   * no query, but possibly out of date. `ingest` checks such a copy inside its transaction and
   * answers `CONFLICT` when it no longer matches, so a caller may act on it only where ingest
   * does: anything it would refuse (unknown, inactive, a bad signature) it decides on a fresh read.
   */
  integration(id: string, options?: { remembered?: boolean }): Promise<Integration | null>
  /** The customer's open session, opened now if none is (for channels that show it before a message). */
  openSession(customer: CustomerAddress): Promise<Result<Session, SwitchboardError>>
  /** Throws a `ConfigError` for a connector without a type, or of a type another one has. */
  registerConnector(connector: Connector): void
  connector(type: string): Connector | undefined
  registerTool(tool: Tool): void
  /**
   * Resolves when no turn, delivery or transfer to a human is running and no job can be taken
   * right now.
   */
  idle(): Promise<void>
  /**
   * Takes no new work, lets running turns, deliveries and transfers to a human finish (at most
   * `timeoutMs`, default 10 s).
   */
  stop(options?: { timeoutMs?: number }): Promise<void>
}

/**
 * CONTRACT §11 promises a job of a process that died is taken again within 60 s: the lease, then
 * up to one poll interval before a live process notices it ran out, must fit in that.
 */
const DEFAULT_LEASE_MS = 55_000

/** Integrations remembered for webhooks (`integration(id, { remembered: true })`), at most. */
const MAX_REMEMBERED_INTEGRATIONS = 10_000

const silentLogger: RuntimeLogger = { warn: () => undefined, error: () => undefined }

/**
 * Composes the runtime: ingest → queue → turn → outbox → connector. It holds no state of its own
 * that correctness depends on; several processes may share one storage. Throws a `ConfigError`
 * on a missing or invalid option.
 */
export function createSwitchboard(options: SwitchboardOptions): Switchboard {
  checkSwitchboardOptions(options)
  const connectors = new Map<string, Connector>()
  const addConnector = (connector: Connector) => {
    checkConnector(connector, connectors)
    connectors.set(connector.type, connector)
  }
  for (const connector of options.connectors ?? []) addConnector(connector)
  const tools = createToolRegistry(options.tools ?? [])
  const events = new EventEmitter<SwitchboardEvents>()
  const context: RuntimeContext = {
    storage: options.storage,
    model: options.model,
    knowledge: options.knowledge,
    tools,
    connectors,
    clock: options.clock ?? createSystemClock(),
    ids: options.ids ?? createRandomIds(),
    events,
    logger: options.logger ?? silentLogger,
    leaseMs: options.leaseMs ?? DEFAULT_LEASE_MS,
    prices: options.prices ?? createPriceTable(),
    enforceCredits: options.enforceCredits ?? false,
  }
  const delivery = createDeliveryService(context)
  const transfers = createHumanTransferService(context, delivery)
  const workers = createWorkerPool(
    context,
    { delivery, transfers },
    {
      concurrency: options.concurrency ?? 8,
      pollMs: options.pollMs ?? 1000,
    },
  )
  const sessions = createSessionOperations(context, delivery, transfers)
  const ingestQueue = createIngestQueue(context, workers)
  const readIntegrations = coalesceReads(
    (ids) => options.storage.integrations.getMany({ ids }),
    (integration) => integration.id,
  )
  const remembered = new Map<string, Integration>()
  const readIntegration = async (id: string): Promise<Integration | null> => {
    const found = await readIntegrations(id)
    if (found === null) {
      remembered.delete(id)
      return null
    }
    // Copies are small and integrations few; a process that has seen this many starts over.
    if (remembered.size >= MAX_REMEMBERED_INTEGRATIONS) remembered.clear()
    remembered.set(id, found)
    return found
  }
  let sweepCancel: (() => void) | null = null
  const sweepEvery = options.pollMs ?? 1000
  const scheduleSweep = () => {
    sweepCancel = context.clock.setTimer(() => {
      delivery.sweep().catch((error) => context.logger.error({ error: String(error) }, 'outbox sweep failed'))
      transfers
        .sweep()
        .catch((error) => context.logger.error({ error: String(error) }, 'human transfer sweep failed'))
      scheduleSweep()
    }, sweepEvery * 5)
  }
  scheduleSweep()
  workers.wake()
  let stopped: Promise<void> | null = null

  return {
    storage: options.storage,
    knowledge: options.knowledge,
    events,
    sessions,
    // A queued job is handed to a worker, or the workers are woken for it, by the ingest itself.
    ingest: (inbound, ingestOptions = {}) => ingestQueue.ingest(inbound, ingestOptions),
    async integration(id, integrationOptions) {
      const copy = integrationOptions?.remembered === true ? remembered.get(id) : undefined
      return copy ?? readIntegration(id)
    },
    openSession: (customer) => openSession(context, customer),
    registerConnector: addConnector,
    connector: (type) => connectors.get(type),
    registerTool: (tool) => tools.register(tool),
    idle: () => workers.idle(),
    stop(stopOptions = {}) {
      stopped ??= (async () => {
        sweepCancel?.()
        const timeoutMs = stopOptions.timeoutMs ?? 10_000
        // One deadline for the turns and the deliveries: a send that hangs (a channel's 10 s
        // timeout, a drain of many replies) must not hold a shutdown past it. A claim left
        // unfinished runs out, and a sweep of another process sends its message.
        let timer: ReturnType<typeof setTimeout> | undefined
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs)
        })
        try {
          await workers.stop(timeoutMs)
          delivery.stop()
          transfers.stop()
          await Promise.race([Promise.all([delivery.settled(), transfers.settled()]), deadline])
        } finally {
          clearTimeout(timer)
        }
      })()
      return stopped
    },
  }
}
