import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestCompany, type TestServer } from './support/start-test-server.js'

let server: TestServer
let company: TestCompany
let agentId: number
let integrationId: string

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
  agentId = await server.createAgent(company.jwt, { name: 'Reception' })
  integrationId = await server.createIntegration(company.jwt, agentId)
})
afterAll(async () => {
  await server.close()
})

const lists = () => [
  '/api/agents',
  `/api/agents/${agentId}/knowledge`,
  '/api/integrations',
  `/api/integrations/${integrationId}/webhook-logs`,
  '/api/sessions',
  '/api/api-tokens',
  '/api/billing/usage',
]

describe('paging every list', () => {
  it('answers 400 VALIDATION_ERROR to a cursor the API never handed out, rather than an empty last page', async () => {
    for (const path of lists()) {
      for (const cursor of ['garbage', 'abc', 'zzz', '%25%25', 'eyJ']) {
        const answer = await server.request('GET', `${path}?cursor=${cursor}`, { token: company.jwt })
        expect(answer.status, `${path}?cursor=${cursor}`).toBe(400)
        expect(answer.body).toMatchObject({
          error: {
            code: 'VALIDATION_ERROR',
            details: [{ path: 'cursor', message: 'not a cursor this API handed out' }],
          },
        })
      }
    }
  })

  it('answers 400 VALIDATION_ERROR to a JSON cursor holding a number no storage writes', async () => {
    // Every storage writes positions of non-negative safe integers (and, for API tokens, a
    // UUID); a fraction, a negative or a number JSON rounds cannot have come from this API.
    const bodies = [
      '[1.5]',
      '[-1]',
      '[9007199254740993]',
      '[1,1.5]',
      '[1,99999999999999999999]',
      '[1e400]',
      '{"a":1}',
      'null',
      '[]',
    ]
    for (const path of lists()) {
      for (const json of bodies) {
        const cursor = Buffer.from(json).toString('base64url')
        const answer = await server.request('GET', `${path}?cursor=${cursor}`, { token: company.jwt })
        expect(answer.status, `${path}?cursor=${json}`).toBe(400)
        expect(answer.body).toMatchObject({
          error: { code: 'VALIDATION_ERROR', details: [{ path: 'cursor' }] },
        })
      }
    }
  })

  it('answers an empty page to a cursor of the written form that names no position of the list', async () => {
    for (const path of lists()) {
      for (const json of ['[2147483648]', '[9007199254740991]', '[1,2,3]', '["x"]']) {
        const cursor = Buffer.from(json).toString('base64url')
        const answer = await server.request('GET', `${path}?cursor=${cursor}`, { token: company.jwt })
        expect(answer.status, `${path}?cursor=${json}`).toBe(200)
        expect(answer.body).toMatchObject({ nextCursor: null })
      }
    }
  })

  it('never answers a 500 to any cursor a client can send', async () => {
    const entry = fc.oneof(
      fc.integer(),
      fc.double(),
      fc.maxSafeInteger(),
      fc.bigInt().map((value) => ({ json: value.toString() })),
      fc.string(),
      fc.uuid(),
      fc.constant(null),
      fc.boolean(),
    )
    const json = fc
      .array(entry, { maxLength: 4 })
      .map(
        (entries) =>
          `[${entries.map((value) => (typeof value === 'object' && value !== null ? value.json : JSON.stringify(value))).join(',')}]`,
      )
    const cursor = fc.oneof(
      json.map((text) => Buffer.from(text).toString('base64url')),
      fc.string({ minLength: 1 }),
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...lists()), cursor, async (path, value) => {
        const answer = await server.request('GET', `${path}?cursor=${encodeURIComponent(value)}`, {
          token: company.jwt,
        })
        expect([200, 400], `${path}?cursor=${value} → ${answer.text}`).toContain(answer.status)
      }),
      { numRuns: 100 },
    )
  })

  it('follows the cursors it hands out to the last page', async () => {
    for (let index = 0; index < 3; index += 1)
      await server.createAgent(company.jwt, { name: `Agent ${index}` })
    const names: string[] = []
    let cursor: string | null = null
    do {
      const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${cursor}`
      const answer = await server.request('GET', `/api/agents${query}`, { token: company.jwt })
      expect(answer.status).toBe(200)
      const page = answer.body as { agents: { name: string }[]; nextCursor: string | null }
      names.push(...page.agents.map((agent) => agent.name))
      cursor = page.nextCursor
    } while (cursor !== null)
    expect(names).toEqual(['Reception', 'Agent 0', 'Agent 1', 'Agent 2'])
  })
})
