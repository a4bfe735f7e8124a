const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const DIGITS = /^[1-9][0-9]{0,17}$/
/** The largest integer id (agents, companies): PostgreSQL's `integer`. */
export const MAX_INTEGER_ID = 2_147_483_647

/** Path ids: anything malformed is simply not found (CONTRACT §2), so these return null. */
export function integerId(value: string | undefined): number | null {
  if (value === undefined || !/^[1-9][0-9]{0,9}$/.test(value)) return null
  const id = Number(value)
  return id <= MAX_INTEGER_ID ? id : null
}

export function uuidId(value: string | undefined): string | null {
  return value !== undefined && UUID.test(value) ? value.toLowerCase() : null
}

export function digitsId(value: string | undefined): string | null {
  return value !== undefined && DIGITS.test(value) ? value : null
}
