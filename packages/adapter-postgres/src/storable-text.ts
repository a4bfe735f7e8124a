/**
 * PostgreSQL text and jsonb cannot hold U+0000, and refuse the whole statement when a value has
 * one. Text from outside (a customer's message, a model's reply, a name typed into the API) may,
 * so every value is made storable on its way in: U+0000 becomes U+FFFD, the replacement
 * character, as the server itself does with other characters it cannot keep.
 */
const NUL = '\u0000'
const REPLACEMENT = '\uFFFD'

/** The statement's parameters with U+0000 replaced in every string. */
export function storableParameters(params: readonly unknown[]): unknown[] {
  const storable = [...params]
  for (let index = 0; index < storable.length; index++) {
    const value = storable[index]
    if (typeof value === 'string' && value.includes(NUL)) storable[index] = value.replaceAll(NUL, REPLACEMENT)
  }
  return storable
}

/**
 * `JSON.stringify` for a jsonb parameter. JSON writes U+0000 as the escape `\u0000`, which jsonb
 * refuses; only when the text has one (or a backslash followed by "u0000", which is harmless) is
 * the value written again with the character replaced inside its strings.
 */
export function storableJson(value: unknown): string {
  const text = JSON.stringify(value)
  return text.includes('\\u0000') ? JSON.stringify(value, withoutNul) : text
}

/** A replacer: strings, and the keys of objects (facts are keyed by what a model chose), made storable. */
function withoutNul(_key: string, value: unknown): unknown {
  if (typeof value === 'string') return value.includes(NUL) ? value.replaceAll(NUL, REPLACEMENT) : value
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  const keys = Object.keys(value)
  if (!keys.some((key) => key.includes(NUL))) return value
  return Object.fromEntries(
    keys.map((key) => [key.replaceAll(NUL, REPLACEMENT), (value as Record<string, unknown>)[key]]),
  )
}
