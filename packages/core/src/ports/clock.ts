/** Time, injected so tests can drive it. The system clock is the only `Date.now()` in core. */
export interface Clock {
  now(): Date
  /** Call `callback` after `ms` of this clock's time; returns a function that cancels it. */
  setTimer(callback: () => void, ms: number): () => void
}

export interface IdGenerator {
  /** A new random UUID. */
  uuid(): string
}
