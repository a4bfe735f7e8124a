import { storableJson } from './storable-text.js'
/** A timestamp column as the ISO 8601 UTC text with milliseconds that the ports speak. */
export function toIso(value: unknown): string {
  if (value instanceof Date) return value.toISOString()
  if (typeof value === 'string' || typeof value === 'number') return new Date(value).toISOString()
  throw new TypeError(`Expected a timestamp, got ${typeof value}`)
}

/** The ISO text of a time for a `$n::timestamptz` parameter, so both drivers send the same. */
export function timeParameter(date: Date): string {
  return isoTimeParameter(date.toISOString())
}

/** `timeParameter` of a time the port hands over as ISO text (a session's creation and update). */
export function isoTimeParameter(iso: string): string {
  // PostgreSQL reads the `+` of a six-digit ISO year (after 9999) as a time zone and fails.
  return iso.replace(/^\+/, '')
}

/**
 * An integer column as a number. `pg` hands `bigint` (int8) columns over as strings and PGlite
 * as numbers; either way the value is a database sequence, far below 2^53.
 */
export function toInteger(value: unknown): number {
  const number = Number(value)
  if (!Number.isSafeInteger(number)) throw new TypeError(`Expected an integer, got ${String(value)}`)
  return number
}

/** A `NUMERIC` column: `pg` hands it over as exact text; the port speaks numbers. */
export function toAmount(value: unknown): number {
  const number = Number(value)
  if (!Number.isFinite(number)) throw new TypeError(`Expected an amount, got ${String(value)}`)
  return number
}

const NANOS_PER_DOLLAR = 1_000_000_000

/**
 * A dollar amount rounded to whole nano-dollars, as integer text: `$n::numeric / 1000000000` then
 * stores exactly what the memory storage keeps (it counts in nano-dollars too).
 */
export function nanosParameter(amountUsd: number): string {
  if (!Number.isFinite(amountUsd)) throw new RangeError(`An amount must be a finite number, got ${amountUsd}`)
  return Math.round(amountUsd * NANOS_PER_DOLLAR).toFixed(0)
}

/** Optional fields are absent rather than undefined or null, as the memory storage returns them. */
export function present<K extends string, V>(key: K, value: V | null | undefined): { [P in K]?: V } {
  return (value === null || value === undefined ? {} : { [key]: value }) as { [P in K]?: V }
}

/**
 * A JSON column value: fields that are undefined dropped, as a snapshot of the memory storage
 * drops them; a missing or null value is SQL NULL.
 */
export function jsonParameter(value: unknown): string | null {
  return value === undefined || value === null ? null : storableJson(value)
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * Ids held in `uuid`, `integer` and `bigint` columns: a value that does not fit the column cannot
 * name a row, so lookups answer "not found" instead of sending SQL that fails on the cast.
 */
export function isUuid(value: string): boolean {
  return UUID.test(value)
}

const INT4_MAX = 2_147_483_647

export function isIntegerId(value: number): boolean {
  return Number.isInteger(value) && value >= -INT4_MAX - 1 && value <= INT4_MAX
}

/** No leading zero: `007` casts to the row `7`, which the memory storage's `007` does not name. */
const BIGINT_DIGITS = /^[1-9]\d{0,17}$/

/** Integration and job ids: strings of digits from a `bigserial`. */
export function isBigintId(value: string): boolean {
  return BIGINT_DIGITS.test(value)
}
