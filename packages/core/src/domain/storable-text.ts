/**
 * PostgreSQL text cannot hold U+0000 and UTF-8 has no bytes for a lone surrogate (half of a UTF-16
 * pair without its other half). Every storage writes U+FFFD in their place, except in the keys it
 * keeps exact (a customer's ids, a message's external id, a delivery id), so all answer the same
 * text. A message's text is made storable before it is stored, so that what is sent on a channel
 * is what was stored.
 */
const NUL = '\u0000'
const REPLACEMENT = '\uFFFD'

/** `text` with U+0000 and every lone surrogate replaced by U+FFFD, the replacement character. */
export function storableText(text: string): string {
  return (text.includes(NUL) ? text.replaceAll(NUL, REPLACEMENT) : text).toWellFormed()
}
