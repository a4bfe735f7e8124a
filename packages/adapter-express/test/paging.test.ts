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
