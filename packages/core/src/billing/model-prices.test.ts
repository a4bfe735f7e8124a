import { describe, expect, it } from 'vitest'
import { createPriceTable } from './model-prices.js'

describe('model prices', () => {
  it('prices input and output tokens per model, per million', () => {
    const table = createPriceTable()
    expect(table.cost('gpt-4o-mini', { inputTokens: 1_000_000, outputTokens: 0 })).toBe(0.15)
    expect(table.cost('gpt-4o-mini', { inputTokens: 1000, outputTokens: 500 })).toBe(0.00045)
    expect(table.cost('gpt-4o', { inputTokens: 0, outputTokens: 1_000_000 })).toBe(10)
  })

  it('prices unknown models with the default, never zero', () => {
    const table = createPriceTable()
    expect(table.cost('my-local-llama', { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBe(5)
    expect(
      createPriceTable({ unknownModel: { inputPerMillion: 3, outputPerMillion: 0 } }).cost('x', {
        inputTokens: 1_000_000,
        outputTokens: 9,
      }),
    ).toBe(3)
  })

  it('prices a model named like an Object.prototype member as an unknown model', () => {
    const table = createPriceTable()
    for (const model of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      expect(table.cost(model, { inputTokens: 1_000_000, outputTokens: 1_000_000 })).toBe(5)
    }
  })

  it('rounds to the ledger precision of 9 decimal places', () => {
    expect(createPriceTable().cost('gpt-4o-mini', { inputTokens: 1, outputTokens: 1 })).toBe(0.00000075)
  })
})
