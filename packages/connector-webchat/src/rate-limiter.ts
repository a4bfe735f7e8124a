/** A sliding window: at most `limit` events in any `windowMs`. */
export interface RateLimiter {
  /** Counts one event now; false (and not counted) when the window is already full. */
  take(now: number): boolean
}

export function createRateLimiter(options: { limit: number; windowMs: number }): RateLimiter {
  const times: number[] = []
  return {
    take(now) {
      while (times.length > 0 && times[0]! <= now - options.windowMs) times.shift()
      if (times.length >= options.limit) return false
      times.push(now)
      return true
    },
  }
}
