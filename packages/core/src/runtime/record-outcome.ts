import type { RuntimeContext } from './runtime-context.js'

/**
 * Waits before the next try of an outcome's record (a delivery's, a transfer's) that the storage
 * failed, real time: about 13 s in all, well inside the claim's lease, so no other process takes
 * the work meanwhile. A reply the platform accepted is then sent once, not again by the sweep that
 * would find its claim run out (CONTRACT §11), and a failed try keeps its retry time.
 */
const RECORD_RETRY_MS = [50, 100, 200, 400, 800, 1600, 3200, 6400] as const

/**
 * Writes the outcome of a call to the outside, again after a storage failure while the claim
 * lasts: the outcome is known here only, and lost it would be tried again when the claim runs out.
 * `subject` names the work in the log.
 */
export async function recordOutcome<T>(
  context: RuntimeContext,
  subject: { readonly what: string } & Record<string, unknown>,
  write: () => Promise<T>,
): Promise<T> {
  for (let failures = 0; ; failures += 1) {
    try {
      return await write()
    } catch (error) {
      const wait = RECORD_RETRY_MS[failures]
      if (wait === undefined) throw error
      // Taken apart only here: a rest copy is a runtime call, and nearly every write succeeds.
      const { what, ...fields } = subject
      context.logger.warn({ ...fields, error: String(error) }, `could not record ${what}; trying again`)
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  }
}
