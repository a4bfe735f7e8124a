/**
 * The statements a transaction's function started, so the transaction waits for the ones it did
 * not wait for itself: one that fails after the function returned aborts the transaction, and its
 * COMMIT would then answer ROLLBACK without an error, as if all went well.
 */
export interface StatementsUnderWay {
  track<T>(statement: Promise<T>): Promise<T>
  /** Resolves once every statement tracked so far has settled, whatever its outcome. */
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
    settled() {
      if (pending === 0) return Promise.resolve()
      return new Promise((resolve) => {
        whenSettled = resolve
      })
    },
  }
}
