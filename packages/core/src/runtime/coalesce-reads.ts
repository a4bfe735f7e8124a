interface Caller<T> {
  resolve(value: T | null): void
  reject(error: unknown): void
}

/**
 * Reads by key where concurrent reads share one query: the first key is read at once, alone; keys
 * asked for while a read is under way wait for it and are then read together with `readMany`.
 * Under load one statement answers many callers, and nobody ever gets a value read before they
 * asked, as a cache would give.
 */
export function coalesceReads<T>(
  readMany: (keys: string[]) => Promise<readonly T[]>,
  keyOf: (value: T) => string,
): (key: string) => Promise<T | null> {
  let waiting = new Map<string, Caller<T>[]>()
  let reading = false

  const readWaiting = async (): Promise<void> => {
    reading = true
    while (waiting.size > 0) {
      const batch = waiting
      waiting = new Map()
      try {
        const found = new Map<string, T>()
        for (const value of await readMany([...batch.keys()])) found.set(keyOf(value), value)
        for (const [key, callers] of batch)
          for (const caller of callers) caller.resolve(found.get(key) ?? null)
      } catch (error) {
        for (const callers of batch.values()) for (const caller of callers) caller.reject(error)
      }
    }
    reading = false
  }

  return (key) =>
    new Promise<T | null>((resolve, reject) => {
      const callers = waiting.get(key)
      if (callers === undefined) waiting.set(key, [{ resolve, reject }])
      else callers.push({ resolve, reject })
      if (!reading) void readWaiting()
    })
}
