import type { Repositories, Storage } from '../../src/index.js'

/**
 * Groups calls in round trips: a call started before any earlier one answered leaves with it on a
 * storage that pipelines statements.
 */
class TripRecorder {
  readonly trips: string[][] = []
  private answered = true

  /** `repositories` with every method call recorded under `name.method`. */
  watch<T extends object>(repositories: T): T {
    const watched: Record<string, unknown> = {}
    for (const [name, repository] of Object.entries(repositories)) {
      watched[name] =
        typeof repository === 'object' && repository !== null ? this.watchOne(name, repository) : repository
    }
    return watched as T
  }

  private watchOne(name: string, repository: object): object {
    return new Proxy(repository, {
      get: (target, method) => {
        const value = Reflect.get(target, method)
        // Subscribing to job availability is no statement.
        if (typeof value !== 'function' || method === 'onAvailable') return value
        return (...args: unknown[]) => {
          if (this.answered) this.trips.push([])
          this.answered = false
          this.trips[this.trips.length - 1]!.push(`${name}.${String(method)}`)
          return (value as (...args: unknown[]) => Promise<unknown>).apply(target, args).finally(() => {
            this.answered = true
          })
        }
      },
    })
  }
}

/** The calls each transaction from now on made, grouped in round trips. */
export function recordRoundTrips(storage: Storage): string[][][] {
  const transactions: string[][][] = []
  const transaction = storage.transaction.bind(storage)
  ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) =>
    transaction(async (tx) => {
      const recorder = new TripRecorder()
      const result = await fn(recorder.watch<Repositories>(tx))
      transactions.push(recorder.trips)
      return result
    })
  return transactions
}

/** The calls made on the storage itself (outside transactions) from now on, grouped in round trips. */
export function recordStorageTrips(storage: Storage): string[][] {
  const recorder = new TripRecorder()
  Object.assign(storage, recorder.watch({ ...storage }))
  return recorder.trips
}
