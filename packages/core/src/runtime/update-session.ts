import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import type { Session } from '../domain/session.js'
import { type Repositories, type Storage, TransactionConflictError } from '../ports/storage.js'
import { backOff } from './back-off.js'

export const MAX_ATTEMPTS = 20

class VersionConflict extends Error {}

/**
 * Whether a transaction that failed so should run again: another writer got there first, or the
 * storage gave up on it for a concurrent one (a deadlock).
 */
function lostToAnotherWriter(error: unknown): boolean {
  return error instanceof VersionConflict || TransactionConflictError.isInstance(error)
}

export type SessionChange<T> =
  | {
      readonly session: Session
      readonly value: T
      /**
       * Writes `apply` started and did not wait for. The session's save and `beforeCommit` start
       * behind them at once and all are awaited together, so a storage that pipelines statements
       * sends them in one round trip; the transaction fails, and is taken back, when one rejects.
       */
      readonly pending?: readonly Promise<unknown>[]
      /**
       * Sees what `pending` resolved to, in its order, once every write is done and before the
       * commit; throwing takes the transaction back (a write that found its precondition gone).
       */
      readonly written?: (results: readonly unknown[]) => void
      /**
       * Writes started after the session's save, the last before COMMIT: a row that many
       * transactions update (a company's balance) then stays locked for the least time.
       */
      readonly beforeCommit?: (tx: Repositories) => readonly Promise<unknown>[]
    }
  | { readonly error: SwitchboardError }

/**
 * Read-modify-write of one session in a transaction, with compare-and-set on its version: when
 * another writer got there first (or the storage gave the transaction up for a concurrent one)
 * the whole transaction is rolled back and `apply` runs again on the fresh session, after a
 * random wait from the third attempt on. `apply` must validate before it writes anything else.
 *
 * `target.known` is the session as the caller read it already: the first attempt starts from it
 * instead of reading it again. Its version fences the save as a fresh read's would, so a session
 * that changed since fails that attempt, and the next one reads it.
 */
export async function updateSession<T>(
  storage: Storage,
  target: { sessionId: string; companyId?: number | undefined; known?: Session | undefined },
  apply: (session: Session, tx: Repositories) => SessionChange<T> | Promise<SessionChange<T>>,
): Promise<Result<{ session: Session; previous: Session; value: T }, SwitchboardError>> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const outcome = await storage.transaction(async (tx) => {
        const current =
          attempt === 1 && target.known !== undefined
            ? target.known
            : await tx.sessions.get({
                id: target.sessionId,
                ...(target.companyId === undefined ? {} : { companyId: target.companyId }),
              })
        if (current === null) return err(switchboardError('NOT_FOUND', 'session not found'))
        // Not awaited when it need not be: the writes `apply` started then leave with the save.
        const applied = apply(current, tx)
        const change = applied instanceof Promise ? await applied : applied
        if ('error' in change) return err(change.error)
        const saving = change.session === current ? current : tx.sessions.save(change.session)
        let saved: Session | null
        if (change.pending === undefined && change.beforeCommit === undefined) {
          saved = await saving
        } else {
          // One flat list, one Promise.all: the writes `apply` started, the save, the last writes.
          const pending = change.pending ?? []
          const last = change.beforeCommit?.(tx) ?? []
          const results = await Promise.all([...pending, saving, ...last])
          change.written?.(results)
          saved = results[pending.length] as Session | null
        }
        if (saved === null) throw new VersionConflict()
        return ok({ session: saved, previous: current, value: change.value })
      })
      return outcome
    } catch (error) {
      if (!lostToAnotherWriter(error) || attempt >= MAX_ATTEMPTS) throw error
      // The first retry at once: the usual loser of a race wins the next round.
      if (attempt > 1) await backOff(attempt)
    }
  }
}
