import type { Page } from '@switchboard/core'
import { timeParameter } from './sql-values.js'

/** Cursors are base64url JSON, so callers treat them as opaque and URLs carry them unescaped. */
export function encodeCursor(position: unknown): string {
  return Buffer.from(JSON.stringify(position)).toString('base64url')
}

/** Undefined when the cursor is not one this store wrote. */
export function decodeCursor(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString())
  } catch {
    return undefined
  }
}

/**
 * Ids, insertion counters and times since 1970 are non-negative safe integers, as in the memory
 * storage: any other number names no position, and a fraction or a number past 2^53 would fail the
 * cast of its integer parameter.
 */
export function isNumberTuple(value: unknown, length: number): value is number[] {
  return (
    Array.isArray(value) &&
    value.length === length &&
    value.every((entry) => typeof entry === 'number' && Number.isSafeInteger(entry) && entry >= 0)
  )
}

export function assertPageLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`Page limit must be a positive integer, got ${limit}`)
}

/**
 * A page from rows fetched with `LIMIT limit + 1`: the extra row only says that another page
 * follows.
 */
export function takePage<Row, T>(
  rows: readonly Row[],
  limit: number,
  itemOf: (row: Row) => T,
  cursorOf: (row: Row) => string,
): Page<T> {
  const kept = rows.slice(0, limit)
  const last = kept.at(-1)
  return {
    items: kept.map(itemOf),
    nextCursor: rows.length > limit && last !== undefined ? cursorOf(last) : null,
  }
}

export function emptyPage<T>(): Page<T> {
  return { items: [], nextCursor: null }
}

/** The timestamp parameter of a cursor's millisecond time; null when no date has that time. */
export function cursorTime(ms: number): string | null {
  const date = new Date(ms)
  return Number.isNaN(date.getTime()) ? null : timeParameter(date)
}

/**
 * The position after which a newest-first page by (time, insertion) continues: the time as a
 * timestamp parameter and the insertion counter. Null when the cursor is not one this store wrote.
 */
export function timeCursorPosition(cursor: string): [string, number] | null {
  const position = decodeCursor(cursor)
  if (!isNumberTuple(position, 2)) return null
  const time = cursorTime(position[0]!)
  return time === null ? null : [time, position[1]!]
}
