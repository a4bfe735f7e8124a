import type { JobLease } from '../ports/storage.js'
import { giveBackJob } from './give-back-job.js'
import { type KnownJob, LeaseLost, type OutgoingServices, processJob } from './process-job.js'
import { emitSafely, type RuntimeContext } from './runtime-context.js'
import { setTimerUntil } from './timer-until.js'
import { updateSession } from './update-session.js'

/** A job that failed this many times is dead: `PROCESSING_FAILED` is recorded on its session. */
const MAX_JOB_ATTEMPTS = 5

/**
 * A worker kept free for a job its caller is about to enqueue leased to `token`
 * (`jobs.enqueueLeased`): the job runs here without being looked for, and, for a new session,
 * without reading again what the caller just wrote. `start` or `release` it, once.
 */
export interface ReservedWorker {
  readonly token: string
  /** Runs the committed job; `known`, when given, is what its turn would otherwise read first. */
  start(lease: JobLease, known?: KnownJob): void
  /** No job for it after all (the transaction failed or enqueued none). */
  release(): void
}

/** What ingest needs of the pool: a worker for the job it stores, or a wake when none was free. */
export interface JobHandOff {
  /** A free worker, kept for the caller; null when every one is busy or the pool is stopping. */
  reserve(): ReservedWorker | null
  wake(): void
}

export interface WorkerPool extends JobHandOff {
  /** Look for work now (new jobs, retries that came due, leases of a process that died). */
  wake(): void
  /** Resolves when no job is running and none can be leased right now. */
  idle(): Promise<void>
  /**
   * Takes no new job (one a lease under way finds is given back, and so is one handed over to a
   * worker reserved before, once its transaction is over: `stop` waits for those transactions);
   * resolves when the running ones finished or `timeoutMs` passed. The leases of jobs still
   * running then are given back, so another process, or this one started again, takes them at
   * once instead of when the lease runs out.
   */
  stop(timeoutMs: number): Promise<void>
}

export function createWorkerPool(
  context: RuntimeContext,
  outgoing: OutgoingServices,
  options: { concurrency: number; pollMs: number },
): WorkerPool {
  const running = new Map<JobLease, Promise<void>>()
  const timers = new Set<() => void>()
  let stopping = false
  let pumping: Promise<void> | null = null
  let pumpAgain = false
  /** The token of a lease that found no job: no job holds it, so the next lease offers it again. */
  let spareToken: string | null = null
  /** Workers kept for jobs about to be enqueued leased to them; they count as busy. */
  let reserved = 0
  /** Told when no worker is reserved any more: `stop` waits for the jobs being handed over. */
  let onNoneReserved: Array<() => void> = []
  const noneReserved = () =>
    reserved === 0 ? Promise.resolve() : new Promise<void>((resolve) => onNoneReserved.push(resolve))
  /**
   * A lease is under way: the job it may find takes a slot the pump saw free, so `reserve` counts
   * it as busy too, or the two together would run more jobs at once than `concurrency`.
   */
  let leasing = false
  /**
   * Whether the last pump stopped before a lease found nothing (every slot busy, or the lease
   * failed), so a job may be waiting that no wake will announce again. Otherwise every job that
   * becomes available later is announced (`onAvailable`, retry timers, the poll), and a finished
   * job need not look for more.
   */
  let workMayBeWaiting = false

  const after = (ms: number, callback: () => void) => {
    const cancel = context.clock.setTimer(() => {
      timers.delete(cancel)
      callback()
    }, ms)
    timers.add(cancel)
  }
  /** At `due` by the clock, which a job's `retryAt` is compared with, not a timer's own measure. */
  const at = (due: Date, callback: () => void) => {
    const cancel = setTimerUntil(context.clock, due, () => {
      timers.delete(cancel)
      callback()
    })
    timers.add(cancel)
  }

  async function fail(lease: JobLease, error: unknown): Promise<void> {
    const text = error instanceof Error ? error.message : String(error)
    const attempts = lease.attempts + 1
    const dead = attempts >= MAX_JOB_ATTEMPTS
    const retryAt = new Date(context.clock.now().getTime() + 1000 * 2 ** (attempts - 1))
    try {
      const failed = await context.storage.jobs.fail({
        jobId: lease.jobId,
        token: lease.token,
        retryAt,
        dead,
        error: text,
      })
      if (!failed) return
      emitSafely(context, 'job-failed', {
        companyId: lease.companyId,
        sessionId: lease.sessionId,
        messageId: lease.messageId,
        error: text,
        dead,
      })
      if (!dead) {
        at(retryAt, () => pool.wake())
        return
      }
      const record = {
        code: 'PROCESSING_FAILED' as const,
        message: `processing the message failed ${attempts} times: ${text}`.slice(0, 500),
        at: context.clock.now().toISOString(),
      }
      await updateSession(context.storage, { sessionId: lease.sessionId }, async (current) => ({
        session: {
          ...current,
          metadata: { ...current.metadata, errors: [...current.metadata.errors, record] },
        },
        value: null,
      }))
      emitSafely(context, 'session-error-recorded', {
        companyId: lease.companyId,
        sessionId: lease.sessionId,
        error: record,
      })
    } catch (failure) {
      // The lease runs out and the job is taken again.
      context.logger.error({ jobId: lease.jobId, error: String(failure) }, 'could not record a job failure')
    }
  }

  function run(lease: JobLease, known?: KnownJob): void {
    running.set(lease, runJob(lease, known))
  }

  async function runJob(lease: JobLease, known: KnownJob | undefined): Promise<void> {
    try {
      await processJob(context, outgoing, lease, known)
    } catch (error) {
      if (!(error instanceof LeaseLost)) {
        context.logger.error(
          { jobId: lease.jobId, sessionId: lease.sessionId, error: String(error) },
          'job failed',
        )
        await fail(lease, error)
      }
    } finally {
      // After an await, so `run` has put the job in `running` by now.
      running.delete(lease)
      if (workMayBeWaiting) pool.wake()
    }
  }

  async function pump(): Promise<void> {
    while (!stopping) {
      if (running.size + reserved >= options.concurrency) {
        workMayBeWaiting = true
        return
      }
      // This lease sees every job a wake so far announced; only a wake after it needs another pass.
      pumpAgain = false
      const token = spareToken ?? context.ids.uuid()
      spareToken = null
      let lease: JobLease | null
      leasing = true
      try {
        lease = await context.storage.jobs.lease({
          now: context.clock.now(),
          leaseMs: context.leaseMs,
          token,
        })
      } catch (error) {
        context.logger.error({ error: String(error) }, 'could not lease a job')
        workMayBeWaiting = true
        return
      } finally {
        // The job found, if any, is in `running` before anything else runs.
        leasing = false
      }
      if (lease === null) {
        spareToken = token
        workMayBeWaiting = false
        return
      }
      if (stopping) {
        // Stopped while this lease was under way: the job is not this process's to start any
        // more, and waiting out its lease would hold the customer's answer back for a minute.
        await giveBack(lease)
        return
      }
      run(lease)
    }
  }

  const pool: WorkerPool = {
    reserve() {
      if (stopping || running.size + reserved + (leasing ? 1 : 0) >= options.concurrency) return null
      reserved += 1
      let kept = true
      const free = () => {
        if (!kept) throw new Error('a reserved worker was started or released already')
        kept = false
        reserved -= 1
        if (reserved > 0) return
        const waiting = onNoneReserved
        onNoneReserved = []
        for (const resolve of waiting) resolve()
      }
      return {
        token: context.ids.uuid(),
        start(lease, known) {
          // Stopped since the reservation: the job is given back like one a lease found then. The
          // worker stays reserved until it is, so `stop` waits for it; among the running jobs, a
          // renewal meanwhile would lease it again.
          if (stopping) {
            void giveBack(lease).then(free)
            return
          }
          free()
          run(lease, known)
        },
        release() {
          free()
          if (workMayBeWaiting) pool.wake()
        },
      }
    },
    wake() {
      if (stopping || options.concurrency <= 0) return
      if (pumping !== null) {
        pumpAgain = true
        return
      }
      // Cleared inside rather than by a `finally()` on the promise, which costs three more. The
      // first `await` comes before it, so `pumping` holds this promise by then.
      pumping = (async () => {
        try {
          do {
            pumpAgain = false
            await pump()
          } while (pumpAgain && !stopping)
        } finally {
          pumping = null
        }
      })()
    },
    async idle() {
      for (;;) {
        pool.wake()
        while (pumping !== null) await pumping
        if (running.size === 0) {
          await Promise.all([outgoing.delivery.settled(), outgoing.transfers.settled()])
          if (pumping === null && running.size === 0) return
          // A wake while the deliveries settled is leasing, or leased, more work: look again. A
          // race of no running jobs would never end.
          continue
        }
        await Promise.race(running.values())
      }
    },
    async stop(timeoutMs) {
      stopping = true
      for (const cancel of timers) cancel()
      timers.clear()
      let timer: ReturnType<typeof setTimeout> | undefined
      await Promise.race([
        // A lease under way ends too: its job, if it found one, is given back; so does a job being
        // enqueued leased to a reserved worker, once its transaction is over.
        noneReserved().then(() => Promise.allSettled([...running.values(), pumping])),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs)
        }),
      ])
      clearTimeout(timer)
      stopRenewing()
      await Promise.all([...running.keys()].map(giveBack))
    },
  }

  /**
   * The job is free for any worker at once. Its turn may still finish here and commit, unless
   * another worker took the job first (the commit is fenced by the token).
   */
  async function giveBack(lease: JobLease): Promise<void> {
    if (!(await giveBackJob(context, lease))) return
    context.logger.warn(
      { jobId: lease.jobId, sessionId: lease.sessionId },
      'stopped before a turn finished; its job is given back',
    )
  }

  /**
   * Every running job's lease is renewed every third of its length, so no other worker takes it.
   * One timer for the pool rather than one per job: a job then costs no timer of its own, and a
   * lease is renewed at most a third of its length after it was taken, as with a timer per job.
   * It keeps renewing while `stop` waits for the running turns.
   */
  const renewEvery = Math.max(10, Math.floor(context.leaseMs / 3))
  let stopRenewal: (() => void) | null = null
  const scheduleRenewal = () => {
    stopRenewal = context.clock.setTimer(() => {
      for (const lease of running.keys()) void renew(lease)
      scheduleRenewal()
    }, renewEvery)
  }
  const stopRenewing = () => {
    stopRenewal?.()
    stopRenewal = null
  }

  async function renew(lease: JobLease): Promise<void> {
    try {
      await context.storage.jobs.renew({
        jobId: lease.jobId,
        token: lease.token,
        now: context.clock.now(),
        leaseMs: context.leaseMs,
      })
    } catch (error) {
      context.logger.warn({ jobId: lease.jobId, error: String(error) }, 'lease renewal failed')
    }
  }

  const unsubscribe = context.storage.jobs.onAvailable(() => pool.wake())
  const poll = () =>
    after(options.pollMs, () => {
      if (stopping) return
      pool.wake()
      poll()
    })
  if (options.concurrency > 0) {
    poll()
    scheduleRenewal()
  }
  timers.add(unsubscribe)
  return pool
}
