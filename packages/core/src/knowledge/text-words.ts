/**
 * English words that carry no topic, so routing and knowledge search ignore them. Words shorter
 * than three letters never reach this list. The word pattern splits contractions at the
 * apostrophe, so their leftover stems (`don` of don't, `isn` of isn't…) are listed instead.
 */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  [
    // The contract's minimum list.
    'the and for you your with are this that have what how can not but from about please want need',
    // Pronouns and determiners.
    'yours yourself yourselves they them their theirs themselves our ours ourselves its itself his',
    'her hers herself him himself she myself these those who whom whose which all any some more most',
    'other such own same each few both either neither every many much another',
    // Auxiliary and modal verbs.
    'was were will would could should shall might must has had having does did doing done been being may',
    // Prepositions, conjunctions and adverbs.
    'there here when where why into onto upon also just than then too very only out off over under again',
    'once nor yet because while until after before above below between through during against among',
    'within without down further whether though although now still even ever really',
    // Leftovers of contractions.
    'don doesn didn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn let',
  ].flatMap((line) => line.split(' ')),
)

/**
 * Three or more letters, each with the marks written on it: Devanagari's vowel signs, Hebrew's
 * points and an accent typed apart are marks, not letters, and a word is not cut at them.
 */
const WORD = /\p{L}\p{M}*(?:\p{L}\p{M}*){2,}/gu

/**
 * The words of a text that can say what it is about: lowercase runs of three or more Unicode
 * letters, stop words removed, in order and with repeats (search weighs how often a word occurs).
 * The text is read composed (NFC), so a letter typed as a base and an accent is the same word as
 * the one letter that holds both.
 */
export function contentWords(text: string): string[] {
  const words = text.toLowerCase().normalize('NFC').match(WORD) ?? []
  return words.filter((word) => !STOP_WORDS.has(word))
}

/**
 * The query words a passage holds (`queryWords` maps each to its place in the query), in the
 * query's order, so their scores add up alike however found. It walks the smaller of the two, so
 * a long message costs no more than the passages it is searched against.
 */
export function sharedWords(
  wordCounts: ReadonlyMap<string, number>,
  queryWords: ReadonlyMap<string, number>,
): string[] {
  if (wordCounts.size >= queryWords.size) return [...queryWords.keys()].filter((word) => wordCounts.has(word))
  return [...wordCounts.keys()]
    .filter((word) => queryWords.has(word))
    .sort((left, right) => queryWords.get(left)! - queryWords.get(right)!)
}

/**
 * A passage's score for a message: how many of the message's words it shares, plus its BM25
 * relevance squeezed below 1. A passage sharing more of the words always ranks first (BM25 alone
 * put a short passage with one rare word above a long one with that word and another), and BM25
 * orders those that share as many.
 */
export function passageScore(sharedWordCount: number, relevance: number): number {
  return sharedWordCount + relevance / (1 + relevance)
}
