import { storableText } from '@switchboard/core'
import { storableJson } from './storable-text.js'

/**
 * Marks a key stored as JSON. A control character first, which no platform's id starts with; a key
 * that does start with the marker is stored as JSON too, so no stored key is ever ambiguous.
 */
const MARK = '\u0001json:'

/**
 * U+FEFF, a byte order mark. PGlite decodes every text value it reads with a TextDecoder, which
 * drops one at the start: a key starting with it came back without it (a reply went to another
 * channel than the message came from), where PostgreSQL and the memory storage keep it.
 */
const BYTE_ORDER_MARK = '\uFEFF'

/**
 * A key from outside (a message's external id, a customer's client id, channel or transport, a
 * webhook delivery id) as a text column can hold it, exactly and told apart from every other: the
 * U+FFFD that `storableJson` puts in place of U+0000 would make `k\u0000` and `k\uFFFD` one key,
 * and the second message a "duplicate" of the first. Almost every key is stored as it is; any
 * other is stored as the marker followed by its JSON, which escapes those characters in ASCII (and
 * puts a leading U+FEFF after the marker and a quote, where every driver reads it back).
 */
export function storableKey(key: string): string {
  // Unchanged by storableText: nothing in it a text column cannot hold.
  const exact = storableText(key) === key && !key.startsWith(MARK) && !key.startsWith(BYTE_ORDER_MARK)
  return exact ? key : MARK + JSON.stringify(key)
}

/**
 * The key `storableKey` stored. A row written before keys were encoded holds its key as it came,
 * which may even start with the marker: what is not the JSON of a string is read as it is.
 */
export function keyFromStorage(stored: string): string {
  if (!stored.startsWith(MARK)) return stored
  try {
    const key: unknown = JSON.parse(stored.slice(MARK.length))
    return typeof key === 'string' ? key : stored
  } catch {
    return stored
  }
}

/** A JSON array parameter of keys, each as `storableKey` stores it. */
export function storableKeys(keys: readonly string[]): string {
  return storableJson(keys.map(storableKey))
}
