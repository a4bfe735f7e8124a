import type { JobLease } from '../ports/storage.js'
import { giveBackJob } from './give-back-job.js'
import type { KnownJob } from './process-job.js'
import type { RuntimeContext } from './runtime-context.js'
import type { JobHandOff, ReservedWorker } from './worker-pool.js'

/**
 * The workers one ingest (a message, or a batch of them) keeps for the jobs it stores. A job whose
 * session has no earlier one unfinished is enqueued leased to a kept worker, which runs it once
 * the transaction committed: no lease to look for it, no wake. Workers are reserved when an
 * attempt first asks for them and kept across attempts; those no job used are released at the end.
 */
export interface HandOff {
  /** A new attempt of the transaction: its tokens are the kept workers', in the same order. */
  attempt(): void
  /** The token of a worker for the attempt's next job to lease; undefined when none is free. */
  token(): string | undefined
  /** A job the attempt enqueued leased to one of its tokens, and what its turn needs, when known. */
  leased(lease: JobLease, known?: KnownJob): void
  /** The attempt committed: each of its leased jobs starts on its worker. Answers how many did. */
  committed(): number
  /**
   * The attempt's commit answered with an error. It may have committed all the same, so its
   * leased jobs are given back at the end: the server may still be committing when its answer is
   * lost (a standby confirming it), and a give-back that came first would find nothing. A later
   * attempt writes to the same sessions, so it waits until that commit is done.
   */
  failed(): void
  /**
   * After the last attempt: gives back the jobs of failed commits, then releases the workers no
   * job used; `stop` waits for those, so for the give-back too. Undefined when there was nothing
   * to give back and the workers are released already: the caller answers without waiting.
   */
  finish(): Promise<void> | undefined
}

export function createHandOff(context: RuntimeContext, workers: JobHandOff): HandOff {
  return new KeptWorkers(context, workers)
}

/** A class rather than closures: one is made for every message stored. */
class KeptWorkers implements HandOff {
  private readonly kept: ReservedWorker[] = []
  private used = 0
  /** None was free when last asked: the attempt asks no more. */
  private exhausted = false
  private leasedJobs: Array<{ lease: JobLease; known: KnownJob | undefined }> = []
  private readonly unanswered: JobLease[] = []

  constructor(
    private readonly context: RuntimeContext,
    private readonly workers: JobHandOff,
  ) {}

  attempt(): void {
    this.used = 0
    this.exhausted = false
    this.leasedJobs = []
  }

  token(): string | undefined {
    if (this.used < this.kept.length) return this.kept[this.used++]!.token
    if (this.exhausted) return undefined
    const worker = this.workers.reserve()
    if (worker === null) {
      this.exhausted = true
      return undefined
    }
    this.kept.push(worker)
    this.used += 1
    return worker.token
  }

  leased(lease: JobLease, known?: KnownJob): void {
    this.leasedJobs.push({ lease, known })
  }

  committed(): number {
    const started = this.leasedJobs.length
    for (const { lease, known } of this.leasedJobs) {
      const index = this.kept.findIndex((worker) => worker.token === lease.token)
      const [worker] = this.kept.splice(index, 1)
      worker!.start(lease, known)
    }
    this.leasedJobs = []
    return started
  }

  failed(): void {
    for (const { lease } of this.leasedJobs) this.unanswered.push(lease)
    this.leasedJobs = []
  }

  finish(): Promise<void> | undefined {
    if (this.unanswered.length === 0) {
      this.release()
      return undefined
    }
    return Promise.all(this.unanswered.map((lease) => giveBackJob(this.context, lease))).then((given) => {
      if (given.includes(true)) this.workers.wake()
      this.release()
    })
  }

  private release(): void {
    for (const worker of this.kept.splice(0)) worker.release()
  }
}
