import type { Clock } from '../ports/clock.js'

/**
 * Calls `callback` once `clock` reads `due` or later, for work that will look for what is due
 * then. Node's timers run on a monotonic clock in whole milliseconds, and about one in five fires
 * a millisecond before `Date.now()` reaches the time it was set for (measured on Node 20); a
 * timer that fires early is set again for the rest. Returns the cancel of the timer waiting now.
 */
export function setTimerUntil(clock: Clock, due: Date, callback: () => void): () => void {
  let cancel: () => void
  const arm = () => {
    cancel = clock.setTimer(
      () => {
        if (clock.now().getTime() < due.getTime()) arm()
        else callback()
      },
      Math.max(0, due.getTime() - clock.now().getTime()),
    )
  }
  arm()
  return () => cancel()
}
