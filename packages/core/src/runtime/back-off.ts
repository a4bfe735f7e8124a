/**
 * A random wait before the next attempt, growing with the attempts: writers racing for one row
 * again at once would meet again. Real time, not the runtime's clock: it only spaces them out.
 */
export function backOff(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(2 ** attempt, 100)
  return new Promise((resolve) => setTimeout(resolve, ms))
}
