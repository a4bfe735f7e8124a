import type { Repositories, Storage } from '@switchboard/core'
import { JOBS_CHANNEL, scopedChannel } from './channels.js'
import { assertDbOption, type Db, type DbClient, type DbRow } from './db.js'
import { ensureMigrated } from './migrate.js'
import { createAgentRepository } from './storage/agent-repository.js'
import { createApiTokenRepository } from './storage/api-token-repository.js'
import { createBillingRepository } from './storage/billing-repository.js'
import { createCompanyRepository } from './storage/company-repository.js'
import { createHumanTransferRepository } from './storage/human-transfer-repository.js'
import { createIntegrationRepository } from './storage/integration-repository.js'
import { type AvailabilityListeners, createJobQueue } from './storage/job-queue.js'
import { createKnowledgeDocumentRepository } from './storage/knowledge-document-repository.js'
import { createLoginFailureRepository } from './storage/login-failure-repository.js'
import { createMessageRepository } from './storage/message-repository.js'
import { createOutboxRepository } from './storage/outbox-repository.js'
import { createPipelineRepository } from './storage/pipeline-repository.js'
import { createRefreshTokenRepository } from './storage/refresh-token-repository.js'
import { createSessionRepository } from './storage/session-repository.js'
import { trimSchedule } from './storage/trim-schedule.js'
import { createUserRepository } from './storage/user-repository.js'
import {
  createWebhookDeliveryRepository,
  WEBHOOK_DELIVERY_TRIM_EVERY,
} from './storage/webhook-delivery-repository.js'
import { createWebhookLogRepository, WEBHOOK_LOG_TRIM_EVERY } from './storage/webhook-log-repository.js'

export interface PostgresStorageOptions {
  /** Shared with the event bus and the knowledge index if you like; the caller closes it. */
  readonly db: Db
}

/**
 * Switchboard's `Storage` in PostgreSQL or PGlite. Migrates the schema first (once per `Db`), and
 * listens for job notifications so `jobs.onAvailable` hears of work committed by any process.
 * Repositories used directly run each call as its own statement; inside `transaction(fn)` they
 * share one connection and commit together. `close()` stops this storage, not the `Db`.
 */
export async function createPostgresStorage(options: PostgresStorageOptions): Promise<Storage> {
  assertDbOption('createPostgresStorage', options)
  const { db } = options
  await ensureMigrated(db)
  const channel = await scopedChannel(db, JOBS_CHANNEL)

  const listeners = new Set<() => void>()
  const availability: AvailabilityListeners = {
    add(listener) {
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
  }
  const stopListening = await db.listen(channel, () => {
    // One microtask each, as the memory storage does; a listener only wakes a worker, so one
    // that throws is ignored rather than allowed to crash the process or silence the others.
    for (const listener of [...listeners]) {
      queueMicrotask(() => {
        try {
          listener()
        } catch {}
      })
    }
  })

  let closed = false
  const assertOpen = (): void => {
    if (closed) throw new Error('The storage is closed')
  }
  const alone: DbClient = {
    query: <Row extends object = DbRow>(sql: string, params?: readonly unknown[]) => {
      assertOpen()
      return db.query<Row>(sql, params)
    },
  }

  // Per storage, not per call: each counts the rows this process wrote since it last trimmed.
  const webhookLogTrims = trimSchedule(WEBHOOK_LOG_TRIM_EVERY)
  const webhookDeliveryTrims = trimSchedule(WEBHOOK_DELIVERY_TRIM_EVERY)
  const repositoriesOf = (client: DbClient): Repositories => ({
    agents: createAgentRepository(client),
    integrations: createIntegrationRepository(client),
    sessions: createSessionRepository(client),
    messages: createMessageRepository(client),
    outbox: createOutboxRepository(client),
    humanTransfers: createHumanTransferRepository(client),
    jobs: createJobQueue({ client, channel, listeners: availability }),
    companies: createCompanyRepository(client),
    users: createUserRepository(client),
    refreshTokens: createRefreshTokenRepository(client),
    apiTokens: createApiTokenRepository(client),
    billing: createBillingRepository(client),
    pipelines: createPipelineRepository(client),
    loginFailures: createLoginFailureRepository(client),
    webhookLogs: createWebhookLogRepository(client, webhookLogTrims),
    webhookDeliveries: createWebhookDeliveryRepository(client, webhookDeliveryTrims),
    knowledgeDocuments: createKnowledgeDocumentRepository(client),
  })

  return {
    kind: db.kind,
    ...repositoriesOf(alone),

    async transaction(fn) {
      assertOpen()
      return db.transaction(async (client) => {
        const failures: unknown[] = []
        const underWay = new Map<string, number>()
        const repositories = recordingFailures(repositoriesOf(client), failures, underWay)
        const { commitBehindStatements } = client
        const noMoreCalls = () => {
          // COMMIT goes out behind the statements sent so far: only when no call under way has
          // one still to send, or a failure still to find in this process, which would come after
          // the commit. Otherwise the transaction commits when `fn` returns, as without the hint.
          for (const call of underWay.keys()) if (!SENT_WHEN_CALLED.has(call)) return
          // A call that failed in this process already (and `fn` went on) dooms the transaction,
          // yet failed no statement: COMMIT would commit what the others wrote. Rolled back below.
          if (failures.length > 0) return
          commitBehindStatements?.()
        }
        const result = await fn(
          commitBehindStatements === undefined ? repositories : { ...repositories, noMoreCalls },
        )
        // A call that failed dooms its transaction even when `fn` went on, as a failed statement
        // does in PostgreSQL; some calls fail in this process (a conflict found by ON CONFLICT).
        if (failures.length > 0) throw failures[0]
        return result
      })
    },

    async close() {
      if (closed) return
      closed = true
      listeners.clear()
      await stopListening()
    },
  }
}

/**
 * The calls that send every statement they need when they are made, and fail only through one of
 * them: nothing of theirs can come after a COMMIT sent behind them.
 */
const SENT_WHEN_CALLED: ReadonlySet<string> = new Set([
  'messages.insertMany',
  'jobs.enqueueMany',
  'jobs.enqueueManyLeased',
  'webhookLogs.addMany',
  'loginFailures.record',
])

/**
 * `repositories` whose calls that fail also push their error to `failures`, and that count their
 * calls under way in `underWay` (by `repository.method`).
 */
function recordingFailures(
  repositories: Repositories,
  failures: unknown[],
  underWay: Map<string, number>,
): Repositories {
  const record = (error: unknown) => {
    failures.push(error)
    throw error
  }
  const watched: Record<string, unknown> = {}
  for (const [name, repository] of Object.entries(repositories)) {
    watched[name] = new Proxy(repository as object, {
      get(target, method) {
        const value = Reflect.get(target, method)
        if (typeof value !== 'function') return value
        const call = `${name}.${String(method)}`
        const settled = () => {
          const left = underWay.get(call)! - 1
          if (left === 0) underWay.delete(call)
          else underWay.set(call, left)
        }
        return (...args: unknown[]) => {
          const returned = (value as (...args: unknown[]) => unknown).apply(target, args)
          if (!(returned instanceof Promise)) return returned
          underWay.set(call, (underWay.get(call) ?? 0) + 1)
          returned.then(settled, settled)
          return returned.catch(record)
        }
      },
    })
  }
  return watched as unknown as Repositories
}
