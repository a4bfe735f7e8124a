import { storableText } from '@switchboard/core'

/**
 * PostgreSQL text and jsonb cannot hold U+0000, and refuse the whole statement when a value has
 * one; jsonb refuses a lone surrogate too. Text from outside (a customer's message, a model's
 * reply, a name typed into the API) may hold either, so every value is made storable on its way
 * in: each becomes U+FFFD, the replacement character, as UTF-8 encoding does with a lone surrogate
 * in a text column. Keys that must stay exact and distinct are written with `storableKey` instead.
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

/** How `JSON.stringify` writes U+0000 and lone surrogates: the escapes jsonb refuses. */
const UNSTORABLE_ESCAPE = /\\u(?:0000|d[89a-f])/i

/**
 * `JSON.stringify` for a jsonb parameter. JSON writes U+0000 and lone surrogates as escapes, which
 * jsonb refuses; only when the text has one (or a backslash followed by what looks like one, which
 * is harmless) is the value written again with those characters replaced inside its strings, as a
 * text column would store them.
 */
export function storableJson(value: unknown): string {
  const text = JSON.stringify(value)
  return UNSTORABLE_ESCAPE.test(text) ? JSON.stringify(value, storableStrings) : text
}

/** A replacer: strings, and the keys of objects (facts are keyed by what a model chose), made storable. */
function storableStrings(_key: string, value: unknown): unknown {
  if (typeof value === 'string') return storableText(value)
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  const keys = Object.keys(value)
  if (keys.every((key) => storableText(key) === key)) return value
  return Object.fromEntries(keys.map((key) => [storableText(key), (value as Record<string, unknown>)[key]]))
}
