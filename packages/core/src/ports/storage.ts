import type { Agent, AgentPatch } from '../domain/agent.js'
import type { Delivery, Message, MessageRole, Session, SessionState } from '../domain/session.js'
import type { WebhookOutcome } from '../domain/webhook-log.js'

export interface Page<T> {
  readonly items: T[]
  /**
   * Null on the page that holds the last item. Otherwise base64url of a JSON array of non-negative
   * safe integers and strings (`isCursor`), opaque to callers: the HTTP edge refuses any other
   * cursor with 400 before a storage sees it. A storage answers any cursor of that form, one naming
   * no position included, with a page (empty then), never an error.
   */
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

/**
 * How a read inside a transaction holds the agent until the transaction ends: `share` by one that
 * writes a reference to it (an entry agent, a handoff target, a reassignment), so it cannot be
 * deleted meanwhile; `edit` by one that changes the agent from what it read (a PATCH merging its
 * handoff or routing settings), so another edit waits and then reads what this one wrote, while
 * writers of references do not wait; `update` by its delete, which then waits for all of those
 * and sees what they wrote.
 */
export type AgentLock = 'share' | 'edit' | 'update'

export interface AgentRepository {
  create(agent: NewAgent & { at: Date }): Promise<Agent>
  get(options: { companyId: number; id: number; lock?: AgentLock }): Promise<Agent | null>
  /** The agents of `ids` that exist in the company, in no particular order. */
  getMany(options: { companyId: number; ids: readonly number[]; lock?: 'share' }): Promise<Agent[]>
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
  /**
   * Without `companyId`: any company's (webhooks find their integration by id alone). With `lock`,
   * inside a transaction that changes the integration from what it read (a PATCH merging its
   * config): another such read waits until the transaction ends, and then reads what it wrote.
   */
  get(options: { id: string; companyId?: number; lock?: boolean }): Promise<Integration | null>
  /** `get` for several ids of any company at once: the integrations found, in no order. */
  getMany(options: { ids: readonly string[] }): Promise<Integration[]>
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
  /**
   * With `lock`, inside a transaction: the session stays as read until the transaction ends. A
   * `save` of it elsewhere waits until then (and lands if nothing else moved the version); reads
   * with `lock` do not wait for each other. Writers take a session's messages before the session
   * itself (an insert, then a save or a locked read); a transaction that locked the session
   * before inserting its messages could wait in a circle with one saving it.
   */
  get(options: { id: string; companyId?: number; lock?: boolean }): Promise<Session | null>
  /** The customer's session that is not closed, if any. */
  findOpen(options: { integrationId: string; clientId: string }): Promise<Session | null>
  /** `findOpen` for several customers of one integration at once: the open sessions found, in no order. */
  findOpenMany(options: { integrationId: string; clientIds: readonly string[] }): Promise<Session[]>
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
  readonly channelId?: string
  readonly transport?: string
  readonly delivery?: Delivery
}

export interface MessageInsertOptions {
  /**
   * Store the message only while its session is not closed, as it is when the message commits: a
   * close committed before, or while the insert waited for the session, stores nothing and
   * rejects with a `SessionClosedError`. A customer message read its session open before this
   * insert, and a close may land in between; told so, it opens a new session instead.
   */
  readonly intoOpenSession?: boolean
}

export interface MessageRepository {
  insert(message: NewMessage, options?: MessageInsertOptions): Promise<Message>
  /**
   * `insert` for several messages in one statement, in the order given (their sequences follow
   * it); all or none: one that `insert` would refuse fails them all.
   */
  insertMany(messages: readonly NewMessage[], options?: MessageInsertOptions): Promise<Message[]>
  get(options: { id: string; companyId?: number }): Promise<Message | null>
  findByExternalId(options: { integrationId: string; externalId: string }): Promise<Message | null>
  /** `findByExternalId` for several external ids of one integration: the messages found, in no order. */
  findByExternalIds(options: { integrationId: string; externalIds: readonly string[] }): Promise<Message[]>
  /** In arrival order, after `afterSequence` when given. */
  list(options: { sessionId: string; afterSequence?: number; limit: number }): Promise<Message[]>
  /**
   * The `limit` most recent conversational messages (customer, agent and operator; blocked replies
   * left out) that a turn answering the message at `currentSequence` sees, oldest first: every
   * reply and operator message so far, but no customer message that arrived after the current one.
   */
  history(options: { sessionId: string; currentSequence: number; limit: number }): Promise<Message[]>
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

/**
 * Outgoing messages waiting to be sent. A session's messages leave one at a time, in the order
 * they were added, across processes: only the session's head (its earliest message still in the
 * outbox) can be claimed, so a later message waits while an earlier one is waiting, claimed or
 * between retries. The head leaves with `remove` (sent, failed for good or blocked), and then
 * `claimNext` takes the one after it.
 */
export interface OutboxRepository {
  /**
   * Inside the transaction that stores the message. A session's messages are added in the order
   * their transactions commit, so none can slip in before one already waiting.
   */
  add(options: {
    messageId: string
    sessionId: string
    companyId: number
    integrationId: string
    availableAt: Date
  }): Promise<void>
  /**
   * Claims one message for delivery if it heads its session, is due and is not claimed; null
   * otherwise (gone, claimed, not yet due, or behind an earlier message of its session).
   */
  claim(options: {
    messageId: string
    now: Date
    leaseMs: number
    leaseToken: string
  }): Promise<OutboxItem | null>
  /** Claims the session's head if it is due and not claimed: the message after one that left. */
  claimNext(options: {
    sessionId: string
    now: Date
    leaseMs: number
    leaseToken: string
  }): Promise<OutboxItem | null>
  /** Claims up to `limit` session heads whose time has come, earliest due first: one per session. */
  claimDue(options: { now: Date; limit: number; leaseMs: number; leaseToken: string }): Promise<OutboxItem[]>
  /**
   * Done with it: sent, failed for good or blocked. The session's next message is free to go.
   * False, changing nothing, unless this claim still held it. With `delivery`, the message's
   * delivery becomes that in the same statement, so a sender records its outcome in one call.
   */
  remove(options: {
    messageId: string
    leaseToken: string
    delivery?: 'sent' | 'failed' | 'blocked'
  }): Promise<boolean>
  /** Gives the message back until `availableAt`; it stays its session's head meanwhile. */
  retryLater(options: {
    messageId: string
    leaseToken: string
    attempts: number
    availableAt: Date
  }): Promise<boolean>
  /** Drops the session's waiting messages (the session closed); returns their ids. */
  removeForSession(options: { sessionId: string }): Promise<string[]>
  /**
   * Drops those of `messageIds` that no sender holds now (not yet tried, or waiting for a retry):
   * messages blocked before they left, which must not hold the session's later ones back. One
   * being sent stays; its sender removes it. Returns the ids dropped.
   */
  removeWaiting(options: { sessionId: string; messageIds: readonly string[]; now: Date }): Promise<string[]>
}

/**
 * A transfer to a human that a session was paused for and that the platform has not been asked for
 * yet (or whose outcome is not recorded yet): kept from the pause's commit until the outcome's.
 */
export interface PendingHumanTransfer {
  readonly id: string
  readonly sessionId: string
  readonly companyId: number
  readonly integrationId: string
  /** The human agent the session went to: the transfer is made only while it is still active. */
  readonly agentId: number
  readonly operatorId?: number
  readonly groupId?: number
  readonly systemMessage: boolean
  /**
   * The session's pause count (`metadata.pauses`) as the transfer paused it: a resume, and a pause
   * after it, tell a later state from the one the transfer was made for.
   */
  readonly pauses: number
  readonly leaseToken: string
}

/**
 * Transfers to a human waiting to be made. A transfer is added in the transaction that pauses its
 * session, claimed by the holder of `leaseToken` until then, and leaves with `remove` in the
 * transaction that records its outcome: one left behind by a process that died is claimed again
 * once its lease ran out. A transfer waits for the messages it follows (a handoff's announcement):
 * it cannot be claimed while one of them is in the outbox.
 */
export interface HumanTransferRepository {
  /**
   * Inside the transaction that pauses the session; claimed at once by `leaseToken` until
   * `leasedUntil`, so the process pausing it makes it unless it dies first.
   */
  add(
    transfer: Omit<PendingHumanTransfer, 'leaseToken'> & {
      /** Message ids it follows; they are stored in the same transaction. */
      after: readonly string[]
      leaseToken: string
      leasedUntil: Date
    },
  ): Promise<void>
  /**
   * Claims the transfer, or takes its claim again for `leaseToken` (its own, even run out), if no
   * other live lease holds it and none of the messages it follows is in the outbox; null otherwise
   * (gone, held by another, or waiting for its messages).
   */
  claim(options: {
    id: string
    now: Date
    leaseMs: number
    leaseToken: string
  }): Promise<PendingHumanTransfer | null>
  /**
   * Claims up to `limit` transfers no live lease holds whose messages have all left the outbox,
   * the earliest added first.
   */
  claimDue(options: {
    now: Date
    limit: number
    leaseMs: number
    leaseToken: string
  }): Promise<PendingHumanTransfer[]>
  /** Done with it (made, failed, or no longer wanted). False, changing nothing, unless this claim holds it. */
  remove(options: { id: string; leaseToken: string }): Promise<boolean>
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

export interface NewJob {
  readonly companyId: number
  readonly sessionId: string
  readonly messageId: string
  readonly availableAt: Date
}

/** A job to enqueue, leased to `token` when given and its session has no earlier unfinished job. */
export interface LeasableJob extends NewJob {
  readonly token?: string | undefined
}

/**
 * Jobs, one per inbound message. A session's jobs run one at a time in enqueue order: only the
 * earliest unfinished job of a session can be leased, and only while no live lease holds it.
 */
export interface JobQueue {
  /** Inside the transaction that stores the message. */
  enqueue(job: NewJob): Promise<void>
  /** `enqueue` for several messages at once, in the order given; all or none. */
  enqueueMany(jobs: readonly NewJob[]): Promise<void>
  /**
   * `enqueue`, and when the session has no other unfinished job, the job leased at once to `token`
   * until `now + leaseMs`, so the process storing the message runs it without looking for it
   * (nobody is told of it then). Null when the session has an earlier unfinished job: this one is
   * enqueued behind it, as by `enqueue`. Of concurrent transactions enqueuing for one session, at
   * most one finds no other job. Meant for the transaction that stores the message: the job is
   * the holder's only once that commits.
   */
  enqueueLeased(job: NewJob, lease: { now: Date; leaseMs: number; token: string }): Promise<JobLease | null>
  /**
   * `enqueueMany`, where each job given a `token` is leased at once to it until `now + leaseMs`
   * when its session has no other unfinished job, stored before or earlier in the same call (as
   * `enqueueLeased` for each in turn). Answers each job's lease in the order given, null for a job
   * enqueued unleased, which listeners are told of. All or none.
   */
  enqueueManyLeased(
    jobs: readonly LeasableJob[],
    lease: { now: Date; leaseMs: number },
  ): Promise<(JobLease | null)[]>
  lease(options: { now: Date; leaseMs: number; token: string }): Promise<JobLease | null>
  /**
   * Extends the holder's lease to `now + leaseMs`; false when it is not the holder any more. With
   * `leaseMs: 0` the job is given back: free for any worker at once, no attempt counted.
   */
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
  /**
   * Called when a job may have become available, in this process or another. A job enqueued
   * while the one before it in its session is being completed or made dead is leased to its
   * enqueuer or announced once both have committed, so it never waits for a worker's poll.
   */
  onAvailable(listener: () => void): () => void
}

export interface Company {
  /** Internal number, from a sequence. */
  readonly id: number
  /** Public UUID. */
  readonly companyId: string
  readonly companyName: string
  readonly createdAt: string
}

export interface CompanyRepository {
  create(options: { companyName: string; publicId: string; at: Date }): Promise<Company>
  get(options: { id: number }): Promise<Company | null>
}

export interface User {
  readonly id: string
  /** As given at registration; compared case-insensitively. */
  readonly email: string
  readonly companyId: number
  readonly passwordHash: string
  readonly createdAt: string
}

export interface UserRepository {
  /** Throws when a user with the same email, compared case-insensitively, or the same id exists. */
  create(options: {
    id: string
    email: string
    companyId: number
    passwordHash: string
    at: Date
  }): Promise<User>
  /** Case-insensitive. */
  findByEmail(options: { email: string }): Promise<User | null>
  /** A UUID in capitals names the same user. */
  get(options: { id: string }): Promise<User | null>
}

export interface RefreshToken {
  readonly id: string
  /** Only the hash of the secret is kept. */
  readonly tokenHash: string
  readonly userId: string
  readonly companyId: number
  /** Every token refreshed from one login shares it, so a theft revokes the whole chain. */
  readonly loginId: string
  readonly expiresAt: string
  readonly usedAt?: string
  readonly revokedAt?: string
  readonly createdAt: string
}

export interface RefreshTokenRepository {
  /** Throws on a repeated id or token hash. */
  create(options: {
    id: string
    tokenHash: string
    userId: string
    companyId: number
    loginId: string
    expiresAt: Date
    at: Date
  }): Promise<RefreshToken>
  findByHash(options: { tokenHash: string }): Promise<RefreshToken | null>
  /**
   * Compare-and-set: records the use and answers true only for the one caller that finds the
   * token neither used nor revoked (`UPDATE … SET used_at = $2 WHERE id = $1 AND used_at IS NULL
   * AND revoked_at IS NULL`), however many race; false for everyone else and for an unknown id.
   * Also false once any token of its login is revoked: a revocation cannot see a successor that a
   * refresh racing it committed, and that one must not outlive it.
   */
  markUsed(options: { id: string; at: Date }): Promise<boolean>
  /** Revokes every token of the login that is not revoked yet; earlier revocations keep their time. */
  revokeLogin(options: { loginId: string; at: Date }): Promise<void>
  /** `revokeLogin` for every login of the user; a UUID in capitals names the same user. */
  revokeUser(options: { userId: string; at: Date }): Promise<void>
}

/** A company API token as stored, without its secret. */
export interface ApiToken {
  readonly id: string
  readonly companyId: number
  /** Who created it; requests made with it act as this user. */
  readonly userId: string
  readonly name: string
  readonly createdAt: string
}

export interface ApiTokenRepository {
  /** Throws on a repeated id or token hash. */
  create(options: {
    id: string
    companyId: number
    userId: string
    name: string
    tokenHash: string
    at: Date
  }): Promise<ApiToken>
  /** Deleted tokens are never found. */
  findByHash(options: { tokenHash: string }): Promise<ApiToken | null>
  /** Oldest first (by creation time, then id); deleted tokens left out. */
  list(options: { companyId: number } & PageRequest): Promise<Page<ApiToken>>
  /**
   * False when the id names no live token of the company, including an id that is not a UUID; a
   * UUID in capitals names the same token.
   */
  delete(options: { companyId: number; id: string }): Promise<boolean>
}

/** One priced model call. */
export interface UsageRecord {
  readonly id: string
  readonly at: string
  readonly model: string
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number
  readonly sessionId: string
}

export interface NewUsageRecord {
  readonly id: string
  readonly companyId: number
  readonly sessionId: string
  readonly model: string
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costUsd: number
  readonly at: Date
}

/**
 * A company's credit balance in USD and its usage ledger. Amounts are exact to 9 decimal places
 * (a NUMERIC column, not floating point), so 5 - 0.1 - 0.2 is 4.7.
 */
export interface BillingRepository {
  /** 0 for a company that never had credits. */
  getBalance(options: { companyId: number }): Promise<number>
  /** Positive amounts credit the company, negative ones charge it; the balance may go below 0. */
  adjust(options: { companyId: number; amountUsd: number; at: Date }): Promise<void>
  /** Stores the record and subtracts its cost from the balance, together. Throws on a repeated id. */
  recordUsage(usage: NewUsageRecord): Promise<UsageRecord>
  /** Newest first (by `at`, then the later recorded first). */
  listUsage(options: { companyId: number } & PageRequest): Promise<Page<UsageRecord>>
}

export interface PipelineStage {
  readonly id: string
  readonly name: string
  /** 0 for the first stage, in the order given at creation. */
  readonly position: number
}

export interface Pipeline {
  readonly id: string
  readonly name: string
  readonly isDefault: boolean
  readonly stages: readonly PipelineStage[]
}

export interface PipelineRepository {
  create(options: {
    companyId: number
    name: string
    isDefault: boolean
    stages: readonly string[]
    at: Date
  }): Promise<Pipeline>
  /** In creation order. */
  list(options: { companyId: number }): Promise<Pipeline[]>
}

/** Failed logins per email, for throttling; `emailKey` is whatever the caller derives from the email. */
export interface LoginFailureRepository {
  record(options: { emailKey: string; at: Date }): Promise<void>
  /** Failures recorded strictly after `since`. */
  count(options: { emailKey: string; since: Date }): Promise<number>
  /** The time of the earliest failure recorded strictly after `since`, or null. */
  oldestSince(options: { emailKey: string; since: Date }): Promise<string | null>
  /**
   * Takes back one failure recorded at `at`: the attempt that recorded it turned out to be a
   * success. The other failures stay until they leave the window.
   */
  forget(options: { emailKey: string; at: Date }): Promise<void>
  /**
   * Deletes the failures of every email recorded at or before `before`: they have left the window
   * and count for nothing. Housekeeping, so that records do not pile up for good.
   */
  forgetBefore(options: { before: Date }): Promise<void>
}

export interface WebhookLog {
  readonly id: string
  readonly receivedAt: string
  readonly httpStatus: number
  readonly outcome: WebhookOutcome
  readonly reason?: string
  readonly sessionId?: string
  readonly messageId?: string
}

export interface NewWebhookLog {
  readonly id: string
  readonly companyId: number
  readonly integrationId: string
  readonly receivedAt: Date
  readonly httpStatus: number
  readonly outcome: WebhookOutcome
  readonly reason?: string | undefined
  readonly sessionId?: string | undefined
  readonly messageId?: string | undefined
}

export interface WebhookLogRepository {
  /**
   * Keeps only the newest `WEBHOOK_LOGS_KEPT_PER_INTEGRATION` entries of the integration (by
   * `receivedAt`, then the later added). Throws on a repeated id.
   */
  add(log: NewWebhookLog): Promise<void>
  /** `add` for several entries in one statement; all or none. */
  addMany(logs: readonly NewWebhookLog[]): Promise<void>
  /** Newest first, as `add` orders them. */
  list(options: { companyId: number; integrationId: string } & PageRequest): Promise<Page<WebhookLog>>
}

/**
 * The delivery ids (a Standard Webhooks `webhook-id`) of the webhooks each integration processed,
 * so that a delivery sent again is processed once. An id recorded at `at` is remembered until
 * `at + WEBHOOK_DELIVERIES_KEPT_MS`; then it expires, and may be deleted.
 */
export interface WebhookDeliveryRepository {
  /**
   * Records the id unless the integration remembers it, in one atomic step: true for the one
   * caller that recorded it, however many race; false while an earlier record has not expired.
   */
  record(options: { integrationId: string; deliveryId: string; at: Date }): Promise<boolean>
  /** Forgets the id, for a delivery whose processing failed and is to be processed when retried. */
  forget(options: { integrationId: string; deliveryId: string }): Promise<void>
}

export interface KnowledgeDocument {
  /** A UUID. */
  readonly id: string
  readonly companyId: number
  readonly agentId: number
  readonly title: string
  readonly content: string
  readonly createdAt: string
}

/** The documents of an agent's knowledge base; their passages are searched through the KnowledgeIndex. */
export interface KnowledgeDocumentRepository {
  create(document: Omit<KnowledgeDocument, 'createdAt'> & { at: Date }): Promise<KnowledgeDocument>
  get(options: { companyId: number; agentId: number; id: string }): Promise<KnowledgeDocument | null>
  /** Oldest first. */
  list(options: { companyId: number; agentId: number } & PageRequest): Promise<Page<KnowledgeDocument>>
  delete(options: { companyId: number; agentId: number; id: string }): Promise<boolean>
}

export interface Repositories {
  readonly agents: AgentRepository
  readonly integrations: IntegrationRepository
  readonly sessions: SessionRepository
  readonly messages: MessageRepository
  readonly outbox: OutboxRepository
  readonly humanTransfers: HumanTransferRepository
  readonly jobs: JobQueue
  readonly companies: CompanyRepository
  readonly users: UserRepository
  readonly refreshTokens: RefreshTokenRepository
  readonly apiTokens: ApiTokenRepository
  readonly billing: BillingRepository
  readonly pipelines: PipelineRepository
  readonly loginFailures: LoginFailureRepository
  readonly webhookLogs: WebhookLogRepository
  readonly webhookDeliveries: WebhookDeliveryRepository
  readonly knowledgeDocuments: KnowledgeDocumentRepository
}

/** The repositories of one transaction, as `Storage.transaction` hands them to its function. */
export interface Transaction extends Repositories {
  /**
   * Optional: says that the calls made so far are the transaction's last. A storage that sends
   * statements over a network may then send its COMMIT right behind theirs, without waiting for
   * their answers or for the function to return: a round trip fewer. The transaction then commits
   * exactly when those calls succeed, so the function makes no call after this one and must not
   * fail after it (its throw would no longer undo what they wrote). A storage without it commits
   * when the function returns, as always.
   */
  readonly noMoreCalls?: () => void
}

export type StorageKind = 'memory' | 'pglite' | 'postgres'

/**
 * Everything Switchboard keeps. Text is stored with U+FFFD in place of each U+0000 and lone
 * surrogate (`storableText`), as PostgreSQL must, in every field and object key but the ones kept
 * exact: a customer's client id, channel and transport, a message's external id, channel and
 * transport, a webhook delivery id. Repositories used directly run each call on its own; inside
 * `transaction` all writes commit together or not at all. A call that fails inside `transaction`
 * dooms it, even when `fn` catches the error and goes on: as a failed statement aborts a
 * PostgreSQL transaction, nothing of it is committed and `transaction` rejects with that failure.
 * Implementations throw on infrastructure failure; "not found" is null.
 */
export interface Storage extends Repositories {
  readonly kind: StorageKind
  /** Rejects with a `TransactionConflictError` when it lost to a concurrent transaction. */
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T>
  close(): Promise<void>
}

const TRANSACTION_CONFLICT = Symbol.for('switchboard.TransactionConflictError')

/**
 * A transaction the storage gave up on because of concurrent ones, nothing of it committed: a
 * deadlock, a serialization failure. Run again, it may well succeed; core's read-modify-write
 * paths do so. Told apart by `isInstance`, which holds across copies of this package.
 */
export class TransactionConflictError extends Error {
  readonly [TRANSACTION_CONFLICT] = true
  override readonly name = 'TransactionConflictError'

  static isInstance(value: unknown): value is TransactionConflictError {
    return typeof value === 'object' && value !== null && TRANSACTION_CONFLICT in value
  }
}

const SESSION_CLOSED = Symbol.for('switchboard.SessionClosedError')

/**
 * A message inserted `intoOpenSession` found its session closed, and nothing was stored. Thrown
 * by the storage, it dooms the transaction; ingest runs it again, and then opens a new session.
 * Told apart by `isInstance`, which holds across copies of this package.
 */
export class SessionClosedError extends Error {
  readonly [SESSION_CLOSED] = true
  override readonly name = 'SessionClosedError'

  constructor(readonly sessionId: string) {
    super(`Session ${sessionId} is closed: a message is stored only while its session is open`)
  }

  static isInstance(value: unknown): value is SessionClosedError {
    return typeof value === 'object' && value !== null && SESSION_CLOSED in value
  }
}
