import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { Principal } from '../accounts/principal.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import { createBilling } from './create-billing.js'
import { DEFAULT_PIPELINE_STAGES, FREE_CREDITS_USD } from './new-company-defaults.js'

function principalOf(companyId: number): Principal {
  return { kind: 'api-token', userId: randomUUID(), companyId, apiTokenId: randomUUID() }
}

async function setup() {
  const storage = createMemoryStorage()
  const billing = createBilling({ storage })
  const company = await storage.companies.create({
    companyName: 'Acme',
    publicId: randomUUID(),
    at: new Date(),
  })
  const other = await storage.companies.create({
    companyName: 'Other',
    publicId: randomUUID(),
    at: new Date(),
  })
  return { storage, billing, company: principalOf(company.id), other: principalOf(other.id) }
}

describe('new company defaults', () => {
  it('are 5 USD and the six Sales stages', () => {
    expect(FREE_CREDITS_USD).toBe(5)
    expect(DEFAULT_PIPELINE_STAGES).toEqual(['New', 'Qualified', 'Proposal', 'Negotiation', 'Won', 'Lost'])
    expect(Object.isFrozen(DEFAULT_PIPELINE_STAGES)).toBe(true)
  })
})

describe('createBilling', () => {
  it("answers the principal's company balance in USD", async () => {
    const { storage, billing, company, other } = await setup()
    await storage.billing.adjust({ companyId: company.companyId, amountUsd: 5, at: new Date() })
    await storage.billing.adjust({ companyId: company.companyId, amountUsd: -0.35, at: new Date() })

    expect(await billing.balance(company)).toEqual({ balanceUsd: 4.65, currency: 'USD' })
    expect(await billing.balance(other)).toEqual({ balanceUsd: 0, currency: 'USD' })
  })

  it("answers the company's usage newest first, page by page", async () => {
    const { storage, billing, company, other } = await setup()
    const record = (minute: number, companyId = company.companyId) =>
      storage.billing.recordUsage({
        id: randomUUID(),
        companyId,
        sessionId: randomUUID(),
        model: 'gpt-4o-mini',
        inputTokens: 100,
        outputTokens: 20,
        costUsd: 0.001,
        at: new Date(Date.UTC(2026, 0, 1, 0, minute)),
      })
    const first = await record(1)
    const second = await record(2)
    const third = await record(3)
    await record(4, other.companyId)

    const page = await billing.usage(company, { limit: 2 })
    expect(page.items).toEqual([third, second])
    expect(await billing.usage(company, { limit: 2, cursor: page.nextCursor! })).toEqual({
      items: [first],
      nextCursor: null,
    })
    expect(await billing.balance(company)).toEqual({ balanceUsd: -0.003, currency: 'USD' })
  })

  it("answers the company's pipelines", async () => {
    const { storage, billing, company, other } = await setup()
    const pipeline = await storage.pipelines.create({
      companyId: company.companyId,
      name: 'Sales',
      isDefault: true,
      stages: DEFAULT_PIPELINE_STAGES,
      at: new Date(),
    })

    expect(await billing.pipelines(company)).toEqual({ pipelines: [pipeline] })
    expect(pipeline.stages.map((stage) => stage.position)).toEqual([0, 1, 2, 3, 4, 5])
    expect(await billing.pipelines(other)).toEqual({ pipelines: [] })
  })
})
