import type { Repositories, Storage } from '../ports/storage.js'
import { type AgentTable, createAgentRepository, createAgentTable } from './agent-repository.js'
import { type ApiTokenTable, createApiTokenRepository, createApiTokenTable } from './api-token-repository.js'
import { type BillingTable, createBillingRepository, createBillingTable } from './billing-repository.js'
import { type CompanyTable, createCompanyRepository, createCompanyTable } from './company-repository.js'
import {
  createHumanTransferRepository,
  createHumanTransferTable,
  type HumanTransferTable,
} from './human-transfer-repository.js'
import {
  createIntegrationRepository,
  createIntegrationTable,
  type IntegrationTable,
} from './integration-repository.js'
import {
  type AvailabilityListeners,
  createAvailabilityListeners,
  createJobQueue,
  createJobTable,
  type JobTable,
} from './job-queue.js'
import {
  createKnowledgeDocumentRepository,
  createKnowledgeDocumentTable,
  type KnowledgeDocumentTable,
} from './knowledge-document-repository.js'
import {
  createLoginFailureRepository,
  createLoginFailureTable,
  type LoginFailureTable,
} from './login-failure-repository.js'
import { createMessageRepository, createMessageTable, type MessageTable } from './message-repository.js'
import { createMutex } from './mutex.js'
import { createOutboxRepository, createOutboxTable, type OutboxTable } from './outbox-repository.js'
import { createPipelineRepository, createPipelineTable, type PipelineTable } from './pipeline-repository.js'
import {
  createRefreshTokenRepository,
  createRefreshTokenTable,
  type RefreshTokenTable,
} from './refresh-token-repository.js'
import { createSessionRepository, createSessionTable, type SessionTable } from './session-repository.js'
import {
  createJournal,
  type Journal,
  type Statement,
  transactionStatement,
  type UndoLog,
} from './undo-log.js'
import { createUserRepository, createUserTable, type UserTable } from './user-repository.js'
import {
  createWebhookDeliveryRepository,
  createWebhookDeliveryTable,
  type WebhookDeliveryTable,
} from './webhook-delivery-repository.js'
import {
  createWebhookLogRepository,
  createWebhookLogTable,
  type WebhookLogTable,
} from './webhook-log-repository.js'

interface Tables {
  readonly agents: AgentTable
  readonly integrations: IntegrationTable
  readonly sessions: SessionTable
  readonly messages: MessageTable
  readonly outbox: OutboxTable
  readonly humanTransfers: HumanTransferTable
  readonly jobs: JobTable
  readonly companies: CompanyTable
  readonly users: UserTable
  readonly refreshTokens: RefreshTokenTable
  readonly apiTokens: ApiTokenTable
  readonly billing: BillingTable
  readonly pipelines: PipelineTable
  readonly loginFailures: LoginFailureTable
  readonly webhookLogs: WebhookLogTable
  readonly webhookDeliveries: WebhookDeliveryTable
  readonly knowledgeDocuments: KnowledgeDocumentTable
}

function createRepositories(
  tables: Tables,
  listeners: AvailabilityListeners,
  statement: Statement,
): Repositories {
  return {
    agents: createAgentRepository({ agents: tables.agents, integrations: tables.integrations, statement }),
    integrations: createIntegrationRepository({ integrations: tables.integrations, statement }),
    sessions: createSessionRepository({ sessions: tables.sessions, statement }),
    messages: createMessageRepository({ messages: tables.messages, sessions: tables.sessions, statement }),
    outbox: createOutboxRepository({ outbox: tables.outbox, messages: tables.messages, statement }),
    humanTransfers: createHumanTransferRepository({
      transfers: tables.humanTransfers,
      outbox: tables.outbox,
      statement,
    }),
    jobs: createJobQueue({ jobs: tables.jobs, listeners, statement }),
    companies: createCompanyRepository({ companies: tables.companies, statement }),
    users: createUserRepository({ users: tables.users, statement }),
    refreshTokens: createRefreshTokenRepository({ refreshTokens: tables.refreshTokens, statement }),
    apiTokens: createApiTokenRepository({ apiTokens: tables.apiTokens, statement }),
    billing: createBillingRepository({ billing: tables.billing, statement }),
    pipelines: createPipelineRepository({ pipelines: tables.pipelines, statement }),
    loginFailures: createLoginFailureRepository({ loginFailures: tables.loginFailures, statement }),
    webhookLogs: createWebhookLogRepository({ webhookLogs: tables.webhookLogs, statement }),
    webhookDeliveries: createWebhookDeliveryRepository({
      webhookDeliveries: tables.webhookDeliveries,
      statement,
    }),
    knowledgeDocuments: createKnowledgeDocumentRepository({
      documents: tables.knowledgeDocuments,
      statement,
    }),
  }
}

/**
 * Storage held in this process's memory: the offline default and the reference the conformance
 * suites are written against. One transaction runs at a time and every call made on the storage
 * itself waits its turn too, so nothing ever sees a transaction half done. A consequence: inside
 * `transaction(fn)`, use the `tx` repositories only; calling the storage itself there waits for
 * the transaction that is waiting for it.
 */
export function createMemoryStorage(): Storage {
  const tables: Tables = {
    agents: createAgentTable(),
    integrations: createIntegrationTable(),
    sessions: createSessionTable(),
    messages: createMessageTable(),
    outbox: createOutboxTable(),
    humanTransfers: createHumanTransferTable(),
    jobs: createJobTable(),
    companies: createCompanyTable(),
    users: createUserTable(),
    refreshTokens: createRefreshTokenTable(),
    apiTokens: createApiTokenTable(),
    billing: createBillingTable(),
    pipelines: createPipelineTable(),
    loginFailures: createLoginFailureTable(),
    webhookLogs: createWebhookLogTable(),
    webhookDeliveries: createWebhookDeliveryTable(),
    knowledgeDocuments: createKnowledgeDocumentTable(),
  }
  const listeners = createAvailabilityListeners()
  const mutex = createMutex()
  let closed = false

  const assertOpen = (): void => {
    if (closed) throw new Error('The memory storage is closed')
  }

  // A journal is empty again once its call committed or rolled back, and most calls are reads that
  // never write to it: the last call's journal serves the next. A call made while another runs
  // alone (from a commit's effect) takes one of its own.
  let idleJournal: Journal | null = createJournal()
  const runAlone = <T>(body: (log: UndoLog) => T): T => {
    assertOpen()
    const journal = idleJournal ?? createJournal()
    idleJournal = null
    try {
      const result = body(journal)
      journal.commit()
      return result
    } catch (error) {
      journal.rollback()
      throw error
    } finally {
      idleJournal = journal
    }
  }

  // A call's body is synchronous, so when nothing holds or waits for the lock it can run at once:
  // no transaction is under way to be seen half done, and no earlier caller is overtaken.
  const alone: Statement = (body) => {
    if (!mutex.isFree()) return mutex.run(async () => runAlone(body))
    try {
      return Promise.resolve(runAlone(body))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  // The lock lets one transaction run at a time, so one set of repositories, built once, serves
  // them all, writing to the journal of the transaction that holds the slot: building a set per
  // transaction cost more than the rest of a small transaction. Between transactions the slot is
  // empty and a `tx` kept past its transaction fails; used while a later transaction runs, it
  // would write into that one, which only a set per transaction could tell apart.
  const slot: { journal: Journal | null } = { journal: null }
  const transactionRepositories = createRepositories(tables, listeners, transactionStatement(slot))

  return {
    kind: 'memory',
    ...createRepositories(tables, listeners, alone),

    transaction: (fn) =>
      mutex.run(async () => {
        assertOpen()
        const journal = createJournal()
        slot.journal = journal
        try {
          const result = await fn(transactionRepositories)
          if (journal.failure !== null) throw journal.failure.error
          journal.commit()
          return result
        } catch (error) {
          journal.rollback()
          throw error
        } finally {
          slot.journal = null
        }
      }),

    close: () =>
      mutex.run(async () => {
        closed = true
      }),
  }
}
