import type { Page } from '../ports/storage.js'

/** Cursors are base64url JSON, so callers treat them as opaque and URLs carry them unescaped. */
export function encodeCursor(position: unknown): string {
  return btoa(JSON.stringify(position)).replaceAll('+', '-').replaceAll('/', '_').replaceAll('=', '')
}

/**
 * Whether `cursor` has the form every storage's cursors have (`Page.nextCursor`): base64url of a
 * JSON array of positions, each a non-negative safe integer or a string. Anything else, a fraction
 * or a number JSON rounds included, cannot have been handed out. A cursor of that form may still
 * name no position of a given list; that list is then empty.
 */
export function isCursor(cursor: string): boolean {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return false
  const position = decodeCursor(cursor)
  return (
    Array.isArray(position) &&
    position.length > 0 &&
    position.every((entry) => typeof entry === 'string' || isPositionNumber(entry))
  )
}

/** Undefined when the cursor is not one this store wrote. */
export function decodeCursor(cursor: string): unknown {
  try {
    return JSON.parse(atob(cursor.replaceAll('-', '+').replaceAll('_', '/')))
  } catch {
    return undefined
  }
}

/**
 * Ids, insertion counters and times since 1970 are non-negative safe integers; a storage given any
 * other number treats the cursor as naming no position, so every storage answers it alike.
 */
function isPositionNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}

export function isNumberTuple(value: unknown, length: number): value is number[] {
  return Array.isArray(value) && value.length === length && value.every(isPositionNumber)
}

/**
 * Whether a cursor's millisecond time is one a Date can hold: a later one names no position, as in
 * the SQL storages, which cannot send it as a timestamp.
 */
export function isCursorTime(ms: number): boolean {
  return !Number.isNaN(new Date(ms).getTime())
}

/** A newest-first position: a time and an insertion counter. */
export function isTimePosition(value: unknown): value is [number, number] {
  return isNumberTuple(value, 2) && isCursorTime(value[0]!)
}

/** The first `limit` of `remaining` (the items after the cursor, in page order). */
export function takePage<T>(remaining: readonly T[], limit: number, cursorOf: (item: T) => string): Page<T> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`Page limit must be a positive integer, got ${limit}`)
  const items = remaining.slice(0, limit)
  const last = items.at(-1)
  return {
    items,
    nextCursor: remaining.length > limit && last !== undefined ? cursorOf(last) : null,
  }
}

export function emptyPage<T>(): Page<T> {
  return { items: [], nextCursor: null }
}
