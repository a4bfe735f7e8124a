import type { TokenUsage } from '../ports/llm-provider.js'

/** USD per million tokens. */
export interface ModelPrice {
  readonly inputPerMillion: number
  readonly outputPerMillion: number
}

/** List prices of common models; an app passes its own table for others or for its contract rates. */
export const DEFAULT_MODEL_PRICES: Readonly<Record<string, ModelPrice>> = {
  'gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6 },
  'gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 },
  'gpt-4.1': { inputPerMillion: 2, outputPerMillion: 8 },
  'gpt-4.1-mini': { inputPerMillion: 0.4, outputPerMillion: 1.6 },
  'gpt-4.1-nano': { inputPerMillion: 0.1, outputPerMillion: 0.4 },
  'o4-mini': { inputPerMillion: 1.1, outputPerMillion: 4.4 },
}

/** What an unknown model costs: priced like a mid-range model, so metering never reads zero. */
export const DEFAULT_UNKNOWN_MODEL_PRICE: ModelPrice = { inputPerMillion: 1, outputPerMillion: 4 }

export interface PriceTable {
  /** The cost of one call in USD, rounded to 9 decimal places like the ledger. */
  cost(model: string, usage: TokenUsage): number
}

export function createPriceTable(
  options: { prices?: Readonly<Record<string, ModelPrice>>; unknownModel?: ModelPrice } = {},
): PriceTable {
  const prices = options.prices ?? DEFAULT_MODEL_PRICES
  const fallback = options.unknownModel ?? DEFAULT_UNKNOWN_MODEL_PRICE
  return {
    cost(model, usage) {
      // Own keys only: a model named `constructor` or `toString` would otherwise find a function of
      // Object.prototype, priced NaN, and every turn with it would fail to record its usage.
      const price = Object.hasOwn(prices, model) ? (prices[model] ?? fallback) : fallback
      const raw =
        (usage.inputTokens * price.inputPerMillion + usage.outputTokens * price.outputPerMillion) / 1_000_000
      return Math.round(raw * 1e9) / 1e9
    },
  }
}
