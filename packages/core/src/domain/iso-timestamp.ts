let lastTime = Number.NaN
let lastText = ''

/**
 * `at.toISOString()`, remembering the last answer: one turn writes the same instant into several
 * records (a message, its session, usage), and formatting it costs about as much as such a write.
 */
export function isoTimestamp(at: Date): string {
  const time = at.getTime()
  if (time !== lastTime) {
    // Formats (or throws on an invalid date) before remembering, so a throw leaves the memo as it was.
    lastText = at.toISOString()
    lastTime = time
  }
  return lastText
}

/**
 * `Date.parse(text)`, answered from the memo of `isoTimestamp` when `text` is its last answer: a
 * store that keeps a record's time as a number beside its text (to sort by it) reads back the text
 * it was just given, and parsing it costs more than the rest of storing a session.
 */
export function timeOfIsoTimestamp(text: string): number {
  return text === lastText ? lastTime : Date.parse(text)
}
