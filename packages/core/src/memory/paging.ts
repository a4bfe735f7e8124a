import type { Page } from '../ports/storage.js'

/** Cursors are base64url JSON, so callers treat them as opaque and URLs carry them unescaped. */
export function encodeCursor(position: unknown): string {
  return btoa(JSON.stringify(position)).replaceAll('+', '-').replaceAll('/', '_').replaceAll('=', '')
}

/**
 * Whether `cursor` has the form every storage's cursors have (`Page.nextCursor`): base64url of
 * JSON. A cursor of that form may still name no position of a given list; that list is then empty.
 */
export function isCursor(cursor: string): boolean {
  return /^[A-Za-z0-9_-]+$/.test(cursor) && decodeCursor(cursor) !== undefined
}

/** Undefined when the cursor is not one this store wrote. */
export function decodeCursor(cursor: string): unknown {
  try {
    return JSON.parse(atob(cursor.replaceAll('-', '+').replaceAll('_', '/')))
  } catch {
    return undefined
  }
}

export function isNumberTuple(value: unknown, length: number): value is number[] {
  return (
    Array.isArray(value) &&
    value.length === length &&
    value.every((entry) => typeof entry === 'number' && Number.isFinite(entry))
  )
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
