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
      const result = this.tail.then(task)
      // A failed task must not fail the ones queued behind it.
      this.tail = result.then(this.settle, this.settle)
      return result
    }
    // Nobody to wait for: start now rather than a microtask later, behind a settled tail. The tail
    // is this task's before it starts: a task queued during its first synchronous stretch (by the
    // task itself) would otherwise chain on the old, settled tail and run alongside it.
    let release!: () => void
    this.tail = new Promise<void>((resolve) => {
      release = resolve
    })
    const result = start(task)
    result.then(this.settle, this.settle).then(release)
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
