import type { Clock, IdGenerator } from '../ports/clock.js'

export function createSystemClock(): Clock {
  return {
    now: () => new Date(),
    setTimer(callback, ms) {
      const timer = setTimeout(callback, ms)
      // Timers only wake the runtime; they must never keep a process alive on their own.
      timer.unref?.()
      return () => clearTimeout(timer)
    },
  }
}

export function createRandomIds(): IdGenerator {
  return { uuid: () => globalThis.crypto.randomUUID() }
}
