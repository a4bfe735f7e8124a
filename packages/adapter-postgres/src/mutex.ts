export interface Mutex {
  /** Runs `task` once every task queued before it has settled, in arrival order. */
  run<T>(task: () => Promise<T>): Promise<T>
}

export function createMutex(): Mutex {
  let tail: Promise<unknown> = Promise.resolve()
  return {
    run(task) {
      const result = tail.then(task)
      // A failed task must not fail the ones queued behind it.
      tail = result.then(ignore, ignore)
      return result
    },
  }
}

function ignore(): void {}
