import type { Agent, AgentPatch } from '../domain/agent.js'
import type { Delivery, Message, MessageRole, Session, SessionState } from '../domain/session.js'

export interface Page<T> {
  readonly items: T[]
  /** Null on the page that holds the last item. */
  readonly nextCursor: string | null
}

export interface PageRequest {
  readonly limit: number
  readonly cursor?: string | undefined
}

export interface Integration {
  /** A string of digits. */
  readonly id: string
  readonly companyId: number
  readonly type: string
  readonly name: string
  readonly active: boolean
  readonly entryAgentId: number
  readonly config: Readonly<Record<string, unknown>>
  readonly webhookSecret: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

export type NewAgent = Omit<Agent, 'id' | 'createdAt' | 'updatedAt'>

export interface AgentRepository {
  create(agent: NewAgent & { at: Date }): Promise<Agent>
  get(options: { companyId: number; id: number }): Promise<Agent | null>
  /** The agents of `ids` that exist in the company, in no particular order. */
  getMany(options: { companyId: number; ids: readonly number[] }): Promise<Agent[]>
  list(options: { companyId: number } & PageRequest): Promise<Page<Agent>>
  update(options: { companyId: number; id: number; patch: AgentPatch; at: Date }): Promise<Agent | null>
  delete(options: { companyId: number; id: number }): Promise<boolean>
  /** Whether an integration uses the agent as entry agent or another agent names it as target. */
  isReferenced(options: { companyId: number; id: number }): Promise<boolean>
}

export type NewIntegration = Omit<Integration, 'id' | 'createdAt' | 'updatedAt'>
export type IntegrationPatch = Partial<
  Pick<Integration, 'name' | 'active' | 'entryAgentId' | 'config' | 'webhookSecret'>
>

export interface IntegrationRepository {
  create(integration: NewIntegration & { at: Date }): Promise<Integration>
  /** Without `companyId`: any company's (webhooks find their integration by id alone). */
  get(options: { id: string; companyId?: number }): Promise<Integration | null>
  list(options: { companyId: number } & PageRequest): Promise<Page<Integration>>
  update(options: {
    companyId: number
    id: string
    patch: IntegrationPatch
    at: Date
  }): Promise<Integration | null>
  delete(options: { companyId: number; id: string }): Promise<boolean>
}

export interface SessionRepository {
  /** Fails when the customer already has an open (not closed) session on the integration. */
  create(session: Omit<Session, 'version'>): Promise<Session>
  get(options: { id: string; companyId?: number }): Promise<Session | null>
  /** The customer's session that is not closed, if any. */
  findOpen(options: { integrationId: string; clientId: string }): Promise<Session | null>
  /**
   * Compare-and-set: writes `session` with `version + 1` if the stored version still equals
   * `session.version`; null when someone else wrote first.
   */
  save(session: Session): Promise<Session | null>
  /** Newest first. */
  list(
    options: { companyId: number; state?: SessionState; integrationId?: string } & PageRequest,
  ): Promise<Page<Session>>
}

export interface NewMessage {
  readonly id: string
  readonly companyId: number
  readonly sessionId: string
  readonly integrationId: string
  readonly role: MessageRole
  readonly text: string
  readonly agentId?: number
  readonly at: Date
  readonly externalId?: string
  readonly delivery?: Delivery
}

export interface MessageRepository {
  insert(message: NewMessage): Promise<Message>
  get(options: { id: string; companyId?: number }): Promise<Message | null>
  findByExternalId(options: { integrationId: string; externalId: string }): Promise<Message | null>
  /** In arrival order, after `afterSequence` when given. */
  list(options: { sessionId: string; afterSequence?: number; limit: number }): Promise<Message[]>
  /**
   * The `limit` most recent conversational messages (customer, agent and operator; blocked replies
   * left out) that a turn answering the message at `currentSequence` sees, oldest first: every
   * reply and operator message so far, but no customer message that arrived after the current one.
   */
  history(options: { sessionId: string; currentSequence: number; limit: number }): Promise<Message[]>
  setDelivery(options: { id: string; delivery: Delivery }): Promise<void>
  /** Turns the session's pending outgoing messages of `roles` into blocked; returns their ids. */
  blockPending(options: { sessionId: string; roles: readonly MessageRole[] }): Promise<string[]>
}

export interface OutboxItem {
  readonly messageId: string
  readonly sessionId: string
  readonly companyId: number
  readonly integrationId: string
  /** Delivery attempts made before this one. */
  readonly attempts: number
  readonly leaseToken: string
}

export interface OutboxRepository {
  add(options: {
    messageId: string
    sessionId: string
    companyId: number
    integrationId: string
    availableAt: Date
  }): Promise<void>
  /** Claims one message for delivery if it is still waiting; null when it is gone or claimed. */
  claim(options: {
    messageId: string
    now: Date
    leaseMs: number
    leaseToken: string
  }): Promise<OutboxItem | null>
  /** Claims up to `limit` messages whose time has come. */
  claimDue(options: { now: Date; limit: number; leaseMs: number; leaseToken: string }): Promise<OutboxItem[]>
  /** Done with it: sent, failed for good or blocked. */
  remove(options: { messageId: string; leaseToken: string }): Promise<boolean>
  retryLater(options: {
    messageId: string
    leaseToken: string
    attempts: number
    availableAt: Date
  }): Promise<boolean>
  /** Drops the session's waiting messages (the session closed); returns their ids. */
  removeForSession(options: { sessionId: string }): Promise<string[]>
}

export interface JobLease {
  readonly jobId: string
  readonly companyId: number
  readonly sessionId: string
  readonly messageId: string
  /** Failed attempts before this one. */
  readonly attempts: number
  /** Fences a worker whose lease was taken over: its `complete` no longer matches. */
  readonly token: string
}

/**
 * Jobs, one per inbound message. A session's jobs run one at a time in enqueue order: only the
 * earliest unfinished job of a session can be leased, and only while no live lease holds it.
 */
export interface JobQueue {
  /** Inside the transaction that stores the message. */
  enqueue(options: {
    companyId: number
    sessionId: string
    messageId: string
    availableAt: Date
  }): Promise<void>
  lease(options: { now: Date; leaseMs: number; token: string }): Promise<JobLease | null>
  renew(options: { jobId: string; token: string; now: Date; leaseMs: number }): Promise<boolean>
  /** Inside the transaction that commits the turn; false when the lease was taken over. */
  complete(options: { jobId: string; token: string }): Promise<boolean>
  /** Gives the job back for a later attempt at `retryAt`, or marks it dead. */
  fail(options: {
    jobId: string
    token: string
    retryAt: Date
    dead: boolean
    error: string
  }): Promise<boolean>
  /** Unfinished jobs (neither completed nor dead), of one session or of all. */
  pending(options: { sessionId?: string }): Promise<number>
  /** Called when a job may have become available, in this process or another. */
  onAvailable(listener: () => void): () => void
}

export interface Repositories {
  readonly agents: AgentRepository
  readonly integrations: IntegrationRepository
  readonly sessions: SessionRepository
  readonly messages: MessageRepository
  readonly outbox: OutboxRepository
  readonly jobs: JobQueue
}

export type StorageKind = 'memory' | 'pglite' | 'postgres'

/**
 * Everything Switchboard keeps. Repositories used directly run each call on its own; inside
 * `transaction` all writes commit together or not at all. Implementations throw on
 * infrastructure failure; "not found" is null.
 */
export interface Storage extends Repositories {
  readonly kind: StorageKind
  transaction<T>(fn: (tx: Repositories) => Promise<T>): Promise<T>
  close(): Promise<void>
}
