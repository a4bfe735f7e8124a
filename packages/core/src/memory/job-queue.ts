import type { JobLease, JobQueue, NewJob } from '../ports/storage.js'
import type { Statement, UndoLog } from './undo-log.js'

interface JobRecord {
  readonly id: string
  readonly companyId: number
  readonly sessionId: string
  readonly messageId: string
  /** Enqueue order across all sessions; the oldest eligible job is leased first. */
  readonly order: number
  readonly availableAt: number
  readonly attempts: number
  readonly leaseToken: string | null
  readonly leasedUntil: number
  readonly lastError: string | null
}

/**
 * Only unfinished jobs are kept: a completed or dead job has no reader left. Each session with
 * work has its queue of job ids in enqueue order, so leasing looks at one head per busy session
 * instead of every job.
 */
export interface JobTable {
  readonly rows: Map<string, JobRecord>
  readonly bySession: Map<string, string[]>
  /** Every message that ever had a job, so none gets a second one. */
  readonly messageIds: Set<string>
  /** Like a database sequence, not taken back by a rollback. */
  lastId: number
}

export function createJobTable(): JobTable {
  return { rows: new Map(), bySession: new Map(), messageIds: new Set(), lastId: 0 }
}

export interface AvailabilityListeners {
  add(listener: () => void): () => void
  notify(): void
}

export function createAvailabilityListeners(): AvailabilityListeners {
  const listeners = new Set<() => void>()
  return {
    add(listener) {
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
    notify() {
      // One microtask each: a listener that throws cannot keep the others from hearing.
      for (const listener of [...listeners]) queueMicrotask(listener)
    },
  }
}

function hasLiveLease(job: JobRecord, now: number): boolean {
  return job.leaseToken !== null && job.leasedUntil > now
}

export function createJobQueue(options: {
  jobs: JobTable
  listeners: AvailabilityListeners
  statement: Statement
}): JobQueue {
  const { jobs, listeners, statement } = options

  const heldBy = (jobId: string, token: string): JobRecord | null => {
    const job = jobs.rows.get(jobId)
    return job !== undefined && job.leaseToken === token ? job : null
  }

  const finish = (log: UndoLog, job: JobRecord): void => {
    log.remove(jobs.rows, job.id, job)
    const queue = jobs.bySession.get(job.sessionId)!
    // The session's only job, the usual case: its queue goes as it is.
    if (queue.length === 1) {
      log.remove(jobs.bySession, job.sessionId, queue)
      return
    }
    const index = queue.indexOf(job.id)
    queue.splice(index, 1)
    log.record(() => queue.splice(index, 0, job.id))
    // The session's next job is no longer held back.
    log.afterCommit(listeners.notify)
  }

  /** A job leased from the start (`enqueueLeased`) is nobody else's to take: no one is told of it. */
  const enqueueOne = (log: UndoLog, input: NewJob, lease?: { token: string; until: number }): JobRecord => {
    if (jobs.messageIds.has(input.messageId)) throw new Error(`Message ${input.messageId} already has a job`)
    jobs.messageIds.add(input.messageId)
    log.record(() => jobs.messageIds.delete(input.messageId))
    jobs.lastId += 1
    const job: JobRecord = {
      id: String(jobs.lastId),
      companyId: input.companyId,
      sessionId: input.sessionId,
      messageId: input.messageId,
      order: jobs.lastId,
      availableAt: input.availableAt.getTime(),
      attempts: 0,
      leaseToken: lease?.token ?? null,
      leasedUntil: lease?.until ?? 0,
      lastError: null,
    }
    // A sequence number, never used before.
    log.insert(jobs.rows, job.id, job)
    const queue = jobs.bySession.get(job.sessionId)
    if (queue === undefined) {
      log.insert(jobs.bySession, job.sessionId, [job.id])
    } else {
      queue.push(job.id)
      log.record(() => queue.pop())
    }
    if (lease === undefined) log.afterCommit(listeners.notify)
    return job
  }

  /** Leased to its token when it has one and its session no other unfinished job (earlier ones included). */
  const enqueueLeasedOne = (
    log: UndoLog,
    input: NewJob,
    token: string | undefined,
    until: number,
  ): JobLease | null => {
    if (token === undefined || jobs.bySession.has(input.sessionId)) {
      enqueueOne(log, input)
      return null
    }
    return leaseOf(enqueueOne(log, input, { token, until }), token)
  }

  const leaseOf = (job: JobRecord, token: string): JobLease =>
    // Strings and numbers of our own record: nothing to copy, only to freeze.
    Object.freeze<JobLease>({
      jobId: job.id,
      companyId: job.companyId,
      sessionId: job.sessionId,
      messageId: job.messageId,
      attempts: job.attempts,
      token,
    })

  return {
    enqueue: (input) =>
      statement((log) => {
        enqueueOne(log, input)
      }),

    enqueueMany: (inputs) =>
      statement((log) => {
        for (const input of inputs) enqueueOne(log, input)
      }),

    enqueueLeased: (input, { now, leaseMs, token }) =>
      statement((log) => enqueueLeasedOne(log, input, token, now.getTime() + leaseMs)),

    enqueueManyLeased: (inputs, { now, leaseMs }) =>
      statement((log) => {
        const until = now.getTime() + leaseMs
        return inputs.map((input) => enqueueLeasedOne(log, input, input.token, until))
      }),

    lease: ({ now, leaseMs, token }) =>
      statement((log) => {
        const time = now.getTime()
        let chosen: JobRecord | null = null
        for (const queue of jobs.bySession.values()) {
          const head = jobs.rows.get(queue[0]!)!
          if (head.availableAt > time || hasLiveLease(head, time)) continue
          if (chosen === null || head.order < chosen.order) chosen = head
        }
        if (chosen === null) return null
        log.set(jobs.rows, chosen.id, { ...chosen, leaseToken: token, leasedUntil: time + leaseMs })
        return leaseOf(chosen, token)
      }),

    renew: ({ jobId, token, now, leaseMs }) =>
      statement((log) => {
        const job = heldBy(jobId, token)
        if (job === null) return false
        log.set(jobs.rows, jobId, { ...job, leasedUntil: now.getTime() + leaseMs })
        return true
      }),

    complete: ({ jobId, token }) =>
      statement((log) => {
        const job = heldBy(jobId, token)
        if (job === null) return false
        finish(log, job)
        return true
      }),

    fail: ({ jobId, token, retryAt, dead, error }) =>
      statement((log) => {
        const job = heldBy(jobId, token)
        if (job === null) return false
        if (dead) {
          finish(log, job)
          return true
        }
        log.set(jobs.rows, jobId, {
          ...job,
          attempts: job.attempts + 1,
          availableAt: retryAt.getTime(),
          leaseToken: null,
          leasedUntil: 0,
          lastError: error,
        })
        log.afterCommit(listeners.notify)
        return true
      }),

    pending: ({ sessionId }) =>
      statement(() =>
        sessionId === undefined ? jobs.rows.size : (jobs.bySession.get(sessionId)?.length ?? 0),
      ),

    onAvailable: (listener) => listeners.add(listener),
  }
}
