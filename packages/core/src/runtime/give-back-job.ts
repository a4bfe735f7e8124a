import type { JobLease } from '../ports/storage.js'
import type { RuntimeContext } from './runtime-context.js'

/**
 * A lease renewed to end now: the job is free for any worker at once, with no attempt counted.
 * False when it could not be given back; its lease runs out then, and the job is taken again.
 */
export async function giveBackJob(context: RuntimeContext, lease: JobLease): Promise<boolean> {
  try {
    await context.storage.jobs.renew({
      jobId: lease.jobId,
      token: lease.token,
      now: context.clock.now(),
      leaseMs: 0,
    })
    return true
  } catch (error) {
    context.logger.error({ jobId: lease.jobId, error: String(error) }, 'could not give back a job')
    return false
  }
}
