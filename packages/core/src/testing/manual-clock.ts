import type { Clock } from '../ports/clock.js'

export interface ManualClock extends Clock {
  /** Moves time forward, firing every timer that comes due on the way, in order. */
  advance(ms: number): Promise<void>
  set(at: Date | string): void
  /** Timers waiting to fire. */
  pendingTimers(): number
}

interface Timer {
  readonly id: number
  readonly dueAt: number
  readonly callback: () => void
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

/** A clock that moves only when the test says so. */
export function createManualClock(start: Date | string = '2026-01-01T00:00:00.000Z'): ManualClock {
  let current = new Date(start).getTime()
  let nextId = 1
  const timers = new Map<number, Timer>()

  return {
    now: () => new Date(current),
    setTimer(callback, ms) {
      const id = nextId++
      timers.set(id, { id, dueAt: current + Math.max(0, ms), callback })
      return () => {
        timers.delete(id)
      }
    },
    async advance(ms) {
      const target = current + ms
      for (;;) {
        const due = [...timers.values()]
          .filter((timer) => timer.dueAt <= target)
          .sort((a, b) => a.dueAt - b.dueAt || a.id - b.id)[0]
        if (due === undefined) break
        timers.delete(due.id)
        current = Math.max(current, due.dueAt)
        due.callback()
        // Let the work the timer started run before the next one fires.
        await settle()
      }
      current = target
      await settle()
    },
    set(at) {
      current = new Date(at).getTime()
    },
    pendingTimers: () => timers.size,
  }
}
