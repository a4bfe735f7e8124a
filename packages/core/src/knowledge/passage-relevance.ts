/** Okapi BM25's usual constants: how fast repeats stop adding, and how much length matters. */
const TERM_SATURATION = 1.2
const LENGTH_NORMALISATION = 0.75

/** What BM25 needs of the searched agent's knowledge as a whole. */
export interface KnowledgeStatistics {
  /** The agent's passages. */
  readonly passageCount: number
  /** Their average number of content words, repeats included. */
  readonly averageLength: number
}

/** One of the message's words in a passage. */
export interface WordMatch {
  /** How often the passage holds the word. */
  readonly occurrences: number
  /** How many of the agent's passages hold it. */
  readonly passagesHolding: number
}

/**
 * A passage's BM25 relevance to a message: the sum over the message's words it holds (`matches`,
 * in the message's order, so the sum is the same however the words were found), each weighed by
 * how rare it is among the agent's passages. `passageScore` turns it into the passage's score.
 */
export function passageRelevance(
  matches: readonly WordMatch[],
  passageLength: number,
  statistics: KnowledgeStatistics,
): number {
  const { passageCount, averageLength } = statistics
  const lengthFactor = 1 - LENGTH_NORMALISATION + (LENGTH_NORMALISATION * passageLength) / averageLength
  let relevance = 0
  for (const { occurrences, passagesHolding } of matches) {
    // The "+ 1" form of BM25 keeps the weight positive even for a word in every passage, so any
    // passage sharing a word with the message scores above zero.
    const weight = Math.log(1 + (passageCount - passagesHolding + 0.5) / (passagesHolding + 0.5))
    relevance +=
      (weight * occurrences * (TERM_SATURATION + 1)) / (occurrences + TERM_SATURATION * lengthFactor)
  }
  return relevance
}
