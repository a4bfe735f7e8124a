/** A line break, then one or more lines holding nothing but spaces or tabs, each with its break. */
const BLANK_LINES = /(?:\r\n|\r|\n)(?:[^\S\r\n]*(?:\r\n|\r|\n))+/

/**
 * The passages of a knowledge document: its paragraphs, separated by blank lines, trimmed, empty
 * ones dropped. A passage is what the offline provider answers verbatim, so lines inside one are
 * kept as written.
 */
export function splitPassages(content: string): string[] {
  return content
    .split(BLANK_LINES)
    .map((passage) => passage.trim())
    .filter((passage) => passage.length > 0)
}
