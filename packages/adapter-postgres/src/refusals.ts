import { SessionClosedError } from '@switchboard/core'

/** Raised by `switchboard_refuse_messages()` (migration 9), the closed session's id as DETAIL. */
const SESSION_CLOSED = 'SBC01'

/**
 * A refusal that SQL raised (a message into a closed session) as the error core knows it;
 * anything else as it is. Applied where the driver hands over a statement's failure, so that the
 * transaction it dooms rejects with it too.
 */
export function refusalOf(error: unknown): unknown {
  if (typeof error !== 'object' || error === null) return error
  const { code, detail } = error as { code?: unknown; detail?: unknown }
  if (code === SESSION_CLOSED && typeof detail === 'string') return new SessionClosedError(detail)
  return error
}
