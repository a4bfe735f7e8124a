import { describe, expect, it } from 'vitest'
import { createRateLimiter } from './rate-limiter.js'

describe('the rate limiter', () => {
  it('allows `limit` events in any window and counts no refused one', () => {
    const limiter = createRateLimiter({ limit: 3, windowMs: 1000 })
    expect([0, 100, 200, 300].map((at) => limiter.take(at))).toEqual([true, true, true, false])
    expect(limiter.take(999)).toBe(false)
    // The first event leaves the window at 1000.
    expect(limiter.take(1000)).toBe(true)
    expect(limiter.take(1001)).toBe(false)
    expect(limiter.take(1100)).toBe(true)
  })
})
