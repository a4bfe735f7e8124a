/**
 * PostgreSQL text cannot hold U+0000 and UTF-8 has no bytes for a lone surrogate (half of a UTF-16
 * pair without its other half). A storage may keep them or write U+FFFD in their place, so text
 * core stores for others to read (a message) is made storable first: every storage then answers
 * the same text, and what is sent on a channel is what was stored.
 */
const NUL = '\u0000'
const REPLACEMENT = '\uFFFD'

/** `text` with U+0000 and every lone surrogate replaced by U+FFFD, the replacement character. */
export function storableText(text: string): string {
  return (text.includes(NUL) ? text.replaceAll(NUL, REPLACEMENT) : text).toWellFormed()
}
