import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestServer, type TestCompany, type TestServer } from './support/start-test-server.js'

let server: TestServer
let company: TestCompany
let other: TestCompany
let agentId: number

beforeAll(async () => {
  server = await startTestServer()
  company = await server.registerCompany()
  other = await server.registerCompany()
  const agent = await server.request('POST', '/api/agents', { token: company.jwt, body: { name: 'Support' } })
  agentId = (agent.body as { id: number }).id
})
afterAll(async () => {
  await server.close()
})

const errorCode = (body: unknown) => (body as { error: { code: string } }).error.code

describe('knowledge over HTTP', () => {
  it('adds, lists and deletes documents, and search finds their passages', async () => {
    // An agent of its own: the list must hold this document alone, whatever ran before.
    const agent = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: 'Returns' },
    })
    const ownAgentId = (agent.body as { id: number }).id
    const added = await server.request('POST', `/api/agents/${ownAgentId}/knowledge`, {
      token: company.jwt,
      body: { title: 'Returns', content: 'Returns are free within 30 days.\n\nShipping takes three days.' },
    })
    expect(added.status).toBe(201)
    expect(added.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      title: 'Returns',
      content: 'Returns are free within 30 days.\n\nShipping takes three days.',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    })
    const documentId = (added.body as { id: string }).id

    const listed = await server.request('GET', `/api/agents/${ownAgentId}/knowledge`, {
      token: company.apiToken,
    })
    expect(listed).toMatchObject({ status: 200, body: { documents: [added.body], nextCursor: null } })

    const passages = await server.switchboard.knowledge.search({
      companyId: company.id,
      agentId: ownAgentId,
      query: 'how long does shipping take?',
      limit: 3,
    })
    expect(passages.map((passage) => passage.text)).toEqual(['Shipping takes three days.'])

    const deleted = await server.request('DELETE', `/api/agents/${ownAgentId}/knowledge/${documentId}`, {
      token: company.jwt,
    })
    expect(deleted.status).toBe(204)
    const again = await server.request('DELETE', `/api/agents/${ownAgentId}/knowledge/${documentId}`, {
      token: company.jwt,
    })
    expect(again.status).toBe(404)
    const searchAfter = await server.switchboard.knowledge.search({
      companyId: company.id,
      agentId: ownAgentId,
      query: 'shipping',
      limit: 3,
    })
    expect(searchAfter).toEqual([])
  })

  it("deletes an agent's knowledge base with the agent: its documents and their passages", async () => {
    const agent = await server.request('POST', '/api/agents', {
      token: company.jwt,
      body: { name: 'Leaving' },
    })
    const leavingId = (agent.body as { id: number }).id
    for (const title of ['Returns', 'Shipping']) {
      const added = await server.request('POST', `/api/agents/${leavingId}/knowledge`, {
        token: company.jwt,
        body: { title, content: 'Returns are free within 30 days.' },
      })
      expect(added.status).toBe(201)
    }

    const deleted = await server.request('DELETE', `/api/agents/${leavingId}`, { token: company.jwt })

    expect(deleted.status).toBe(204)
    const storage = server.switchboard.storage
    const documents = await storage.knowledgeDocuments.list({
      companyId: company.id,
      agentId: leavingId,
      limit: 10,
    })
    expect(documents.items).toEqual([])
    const passages = await server.switchboard.knowledge.search({
      companyId: company.id,
      agentId: leavingId,
      query: 'returns',
      limit: 3,
    })
    expect(passages).toEqual([])
  })

  it('validates title (1..200) and content (1..100,000)', async () => {
    for (const body of [
      { title: '', content: 'x' },
      { title: 'x'.repeat(201), content: 'x' },
      { title: 'x', content: '' },
      { title: 'x', content: 'x'.repeat(100_001) },
      { content: 'x' },
    ]) {
      const answer = await server.request('POST', `/api/agents/${agentId}/knowledge`, {
        token: company.jwt,
        body,
      })
      expect(answer.status).toBe(400)
      expect(errorCode(answer.body)).toBe('VALIDATION_ERROR')
    }
  })

  it('answers 404 for another company, an unknown agent or a malformed id', async () => {
    const added = await server.request('POST', `/api/agents/${agentId}/knowledge`, {
      token: company.jwt,
      body: { title: 'Secret', content: 'Only for us.' },
    })
    const documentId = (added.body as { id: string }).id
    const attempts = [
      server.request('GET', `/api/agents/${agentId}/knowledge`, { token: other.jwt }),
      server.request('POST', `/api/agents/${agentId}/knowledge`, {
        token: other.apiToken,
        body: { title: 'x', content: 'y' },
      }),
      server.request('DELETE', `/api/agents/${agentId}/knowledge/${documentId}`, { token: other.jwt }),
      server.request('GET', '/api/agents/999999/knowledge', { token: company.jwt }),
      server.request('GET', '/api/agents/abc/knowledge', { token: company.jwt }),
      server.request('DELETE', `/api/agents/${agentId}/knowledge/not-a-uuid`, { token: company.jwt }),
    ]
    for (const answer of await Promise.all(attempts)) {
      expect(answer.status).toBe(404)
      expect(errorCode(answer.body)).toBe('NOT_FOUND')
    }
    const listed = await server.request('GET', `/api/agents/${agentId}/knowledge`, { token: company.jwt })
    expect(
      (listed.body as { documents: { id: string }[] }).documents.map((document) => document.id),
    ).toContain(documentId)
  })
})
