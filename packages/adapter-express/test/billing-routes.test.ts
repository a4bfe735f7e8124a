import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestCompany, type TestServer } from './support/start-test-server.js'

let server: TestServer
let company: TestCompany

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
})
afterAll(async () => {
  await server.close()
})

describe('billing and pipelines over HTTP', () => {
  it('answers the balance of a new company: 5 USD', async () => {
    for (const token of [company.jwt, company.apiToken]) {
      const answer = await server.request('GET', '/api/billing', { token })
      expect(answer.status).toBe(200)
      expect(answer.body).toEqual({ balanceUsd: 5, currency: 'USD' })
    }
  })

  it('lists usage newest first, page by page', async () => {
    const owner = await server.registerCompany()
    const sessionId = randomUUID()
    for (const [index, model] of ['gpt-4o-mini', 'gpt-4o', 'unknown-model'].entries()) {
      await server.storage.billing.recordUsage({
        id: randomUUID(),
        companyId: owner.id,
        sessionId,
        model,
        inputTokens: 100 * (index + 1),
        outputTokens: 10,
        costUsd: 0.001,
        at: new Date(Date.parse('2026-04-01T00:00:00.000Z') + index * 1000),
      })
    }
    const first = await server.request('GET', '/api/billing/usage?limit=2', { token: owner.jwt })
    expect(first.status).toBe(200)
    const page = first.body as { usage: unknown[]; nextCursor: string }
    expect(page.usage).toEqual([
      {
        id: expect.any(String),
        at: '2026-04-01T00:00:02.000Z',
        model: 'unknown-model',
        inputTokens: 300,
        outputTokens: 10,
        costUsd: 0.001,
        sessionId,
      },
      expect.objectContaining({ model: 'gpt-4o' }),
    ])
    const second = await server.request('GET', `/api/billing/usage?limit=2&cursor=${page.nextCursor}`, {
      token: owner.jwt,
    })
    expect(second.body).toMatchObject({ usage: [{ model: 'gpt-4o-mini' }], nextCursor: null })
    const balance = await server.request('GET', '/api/billing', { token: owner.jwt })
    expect((balance.body as { balanceUsd: number }).balanceUsd).toBeCloseTo(4.997, 9)
    const none = await server.request('GET', '/api/billing/usage', { token: company.jwt })
    expect(none.body).toEqual({ usage: [], nextCursor: null })
    for (const limit of ['0', '101', 'x']) {
      const bad = await server.request('GET', `/api/billing/usage?limit=${limit}`, { token: owner.jwt })
      expect(bad.status).toBe(400)
    }
  })

  it('answers the default Sales pipeline with its 6 stages', async () => {
    const answer = await server.request('GET', '/api/pipelines', { token: company.apiToken })
    expect(answer.status).toBe(200)
    expect(answer.body).toEqual({
      pipelines: [
        {
          id: expect.any(String),
          name: 'Sales',
          isDefault: true,
          stages: ['New', 'Qualified', 'Proposal', 'Negotiation', 'Won', 'Lost'].map((name, position) => ({
            id: expect.any(String),
            name,
            position,
          })),
        },
      ],
    })
  })

  it('answers 401 without a bearer', async () => {
    for (const path of ['/api/billing', '/api/billing/usage', '/api/pipelines']) {
      const answer = await server.request('GET', path)
      expect(answer.status).toBe(401)
      expect(answer.body).toMatchObject({ error: { code: 'UNAUTHORIZED' } })
    }
  })
})
