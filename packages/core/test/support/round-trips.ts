import type { Storage } from '../../src/index.js'

/**
 * The calls each transaction made, grouped in round trips: calls started before any earlier call
 * of the transaction answered leave together on a storage that pipelines statements.
 */
export function recordRoundTrips(storage: Storage): string[][][] {
  const transactions: string[][][] = []
  const transaction = storage.transaction.bind(storage)
  ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) =>
    transaction(async (tx) => {
      const trips: string[][] = []
      let answered = true
      const watched = Object.fromEntries(
        Object.entries(tx).map(([name, repository]) => [
          name,
          new Proxy(repository as object, {
            get(target, method) {
              const value = Reflect.get(target, method)
              if (typeof value !== 'function') return value
              return (...args: unknown[]) => {
                if (answered) trips.push([])
                answered = false
                trips[trips.length - 1]!.push(`${name}.${String(method)}`)
                return (value as (...args: unknown[]) => Promise<unknown>).apply(target, args).finally(() => {
                  answered = true
                })
              }
            },
          }),
        ]),
      ) as unknown as typeof tx
      const result = await fn(watched)
      transactions.push(trips)
      return result
    })
  return transactions
}

/**
 * The calls made on the storage itself (outside transactions) from now on, grouped the same way:
 * calls started before any earlier one answered share a round trip.
 */
export function recordStorageTrips(storage: Storage): string[][] {
  const trips: string[][] = []
  let answered = true
  for (const [name, repository] of Object.entries(storage)) {
    if (typeof repository !== 'object' || repository === null) continue
    const watched = new Proxy(repository as object, {
      get(target, method) {
        const value = Reflect.get(target, method)
        if (typeof value !== 'function' || method === 'onAvailable') return value
        return (...args: unknown[]) => {
          if (answered) trips.push([])
          answered = false
          trips[trips.length - 1]!.push(`${name}.${String(method)}`)
          return (value as (...args: unknown[]) => Promise<unknown>).apply(target, args).finally(() => {
            answered = true
          })
        }
      },
    })
    ;(storage as unknown as Record<string, unknown>)[name] = watched
  }
  return trips
}
