/**
 * The statements a transaction's function started, so the transaction waits for the ones it did
 * not wait for itself: one that fails after the function returned aborts the transaction, and its
 * COMMIT would then answer ROLLBACK without an error, as if all went well.
 */
export interface StatementsUnderWay {
  track<T>(statement: Promise<T>): Promise<T>
  /**
   * Resolves once no tracked statement is under way, whatever their outcomes: a statement started
   * as another settled (a repository call's second statement) is waited for too.
   */
  settled(): Promise<void>
}

export function statementsUnderWay(): StatementsUnderWay {
  let pending = 0
  let whenSettled: (() => void) | null = null
  const done = () => {
    pending -= 1
    if (pending === 0 && whenSettled !== null) {
      whenSettled()
      whenSettled = null
    }
  }
  return {
    track(statement) {
      pending += 1
      statement.then(done, done)
      return statement
    },
    async settled() {
      // Checked again after each wake: the callers of the statement that settled last run first.
      while (pending > 0) {
        await new Promise<void>((resolve) => {
          whenSettled = resolve
        })
      }
    },
  }
}
