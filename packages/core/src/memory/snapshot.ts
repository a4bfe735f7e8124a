/**
 * A deep, frozen copy of plain data, without the keys whose value is undefined (as a database
 * round trip would drop them). Stored records are snapshots, so neither the caller who wrote one
 * nor a caller who read one can change what is stored.
 */
export function snapshot<T>(value: T): T {
  return copy(value) as T
}

function copy(value: unknown): unknown {
  if (Array.isArray(value)) return Object.freeze(value.map(copy))
  if (value instanceof Date) return new Date(value.getTime())
  if (value !== null && typeof value === 'object') {
    const result: Record<string, unknown> = {}
    for (const [key, entry] of Object.entries(value)) {
      if (entry !== undefined) result[key] = copy(entry)
    }
    return Object.freeze(result)
  }
  return value
}
