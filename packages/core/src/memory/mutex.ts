export interface Mutex {
  /** Whether no task is queued or running, so a caller may act now without waiting its turn. */
  isFree(): boolean
  /** Runs `task` once every task queued before it has settled, in arrival order. */
  run<T>(task: () => Promise<T>): Promise<T>
}

class QueueMutex implements Mutex {
  private tail: Promise<unknown> = Promise.resolve()
  /** Tasks queued or running; counted from `run`, so a task not started yet already holds it. */
  private pending = 0
  /** Whether a task that found the mutex free is in its first synchronous stretch. */
  private starting = false
  /**
   * Opens the tail of the tasks queued during that stretch (by the task itself), once the task
   * settles: its own tail does not exist yet, and chained on the old, settled one they would run
   * alongside it. Made only when that happens, so the usual call allocates nothing more.
   */
  private gate: (() => void) | null = null
  private readonly settle = (): void => {
    this.pending -= 1
  }

  isFree(): boolean {
    return this.pending === 0
  }

  run<T>(task: () => Promise<T>): Promise<T> {
    const free = this.pending === 0
    this.pending += 1
    if (!free) {
      if (this.starting && this.gate === null) {
        this.tail = new Promise<void>((resolve) => {
          this.gate = resolve
        })
      }
      const result = this.tail.then(task)
      // A failed task must not fail the ones queued behind it.
      this.tail = result.then(this.settle, this.settle)
      return result
    }
    // Nobody to wait for: start now rather than a microtask later, behind a settled tail.
    this.starting = true
    let result: Promise<T>
    try {
      result = start(task)
    } finally {
      this.starting = false
    }
    const settled = result.then(this.settle, this.settle)
    const gate = this.gate
    if (gate === null) {
      this.tail = settled
    } else {
      this.gate = null
      void settled.then(gate)
    }
    return result
  }
}

function start<T>(task: () => Promise<T>): Promise<T> {
  try {
    return task()
  } catch (error) {
    return Promise.reject(error)
  }
}

export function createMutex(): Mutex {
  return new QueueMutex()
}
