import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createFixture,
  type Fixture,
  hasPathId,
  pathFor,
  ROUTES,
  type RouteCase,
  snapshotCompany,
} from './support/route-table.js'
import { startTestServer, type TestServer } from './support/start-test-server.js'

let server: TestServer
let a: Fixture
let b: Fixture

beforeAll(async () => {
  server = await startTestServer()
  a = await createFixture(server, 'Company A')
  b = await createFixture(server, 'Company B')
})
afterAll(async () => {
  await server.close()
})

const call = (route: RouteCase, token: string, target: Fixture, own: Fixture) =>
  server.request(route.method, pathFor(route, target), {
    token,
    ...(route.body === undefined ? {} : { body: route.body(own) }),
  })

// Deletions last, so that in the control run every other route still finds its resource.
const idRoutes = [
  ...ROUTES.filter((route) => hasPathId(route) && route.method !== 'DELETE'),
  ...ROUTES.filter((route) => hasPathId(route) && route.method === 'DELETE'),
]

describe('tenant isolation', () => {
  it('routes every id route of the table (a control: the owner is not answered 404)', async () => {
    // A third company that nobody attacks, so destructive routes cannot spoil the matrix below.
    const control = await createFixture(server, 'Control')
    for (const route of idRoutes) {
      const answer = await call(route, control.company.jwt, control, control)
      expect(answer.status, `${route.method} ${route.path}: ${answer.text}`).not.toBe(404)
      expect(answer.status, `${route.method} ${route.path}: ${answer.text}`).toBeLessThan(500)
    }
  })

  it("answers 404 to company B's JWT and API token on every route with company A's ids, and changes nothing", async () => {
    const before = await snapshotCompany(server, a.company.id)
    for (const [kind, token] of [
      ['JWT', b.company.jwt],
      ['API token', b.company.apiToken],
    ] as const) {
      for (const route of idRoutes) {
        const answer = await call(route, token, a, b)
        expect(answer.status, `${kind} ${route.method} ${route.path}: ${answer.text}`).toBe(404)
        expect(answer.body).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } })
      }
    }
    expect(await snapshotCompany(server, a.company.id)).toEqual(before)
  })

  it('answers a foreign id exactly as a missing one', async () => {
    const missing: Fixture = {
      ...a,
      agentId: 2_000_000_000,
      integrationId: '2000000000',
      sessionId: '00000000-0000-4000-8000-000000000000',
    }
    for (const route of idRoutes) {
      const foreign = await call(route, b.company.jwt, a, b)
      const absent = await call(route, b.company.jwt, missing, b)
      expect(foreign.status, route.path).toBe(absent.status)
      expect(foreign.body, route.path).toEqual(absent.body)
    }
  })

  it('never mixes tenants in lists', async () => {
    const lists: [string, string, (body: unknown) => unknown[]][] = [
      [
        '/api/agents',
        'agents',
        (body) => (body as { agents: { id: number }[] }).agents.map((agent) => agent.id),
      ],
      [
        '/api/integrations',
        'integrations',
        (body) =>
          (body as { integrations: { id: string }[] }).integrations.map((integration) => integration.id),
      ],
      [
        '/api/sessions',
        'sessions',
        (body) => (body as { sessions: { id: string }[] }).sessions.map((session) => session.id),
      ],
    ]
    for (const [path, name, idsOf] of lists) {
      for (const [own, other] of [
        [a, b],
        [b, a],
      ] as const) {
        for (const token of [own.company.jwt, own.company.apiToken]) {
          const answer = await server.request('GET', path, { token })
          expect(answer.status).toBe(200)
          const ids = idsOf(answer.body)
          expect(ids.length, name).toBeGreaterThan(0)
          const otherIds = idsOf((await server.request('GET', path, { token: other.company.jwt })).body)
          for (const id of ids) expect(otherIds, `${name} ${String(id)}`).not.toContain(id)
        }
      }
    }
    const usage = await server.request('GET', '/api/billing/usage', { token: b.company.jwt })
    expect(usage.text).not.toContain(a.sessionId)
  })

  it('ignores a companyId in query strings', async () => {
    for (const path of ['/api/agents', '/api/integrations', '/api/sessions', '/api/billing/usage']) {
      const plain = await server.request('GET', path, { token: b.company.jwt })
      const smuggled = await server.request('GET', `${path}?companyId=${a.company.id}`, {
        token: b.company.jwt,
      })
      expect(smuggled.status, path).toBe(200)
      expect(smuggled.body, path).toEqual(plain.body)
    }
    const session = await server.request('GET', `/api/sessions/${a.sessionId}?companyId=${a.company.id}`, {
      token: b.company.jwt,
    })
    expect(session.status).toBe(404)
  })

  it('ignores a companyId in bodies', async () => {
    const before = await snapshotCompany(server, a.company.id)
    const agent = await server.request('POST', '/api/agents', {
      token: b.company.apiToken,
      body: { name: 'Smuggled', companyId: a.company.id },
    })
    expect(agent.status).toBe(201)
    const agentId = (agent.body as { id: number }).id
    expect((await server.request('GET', `/api/agents/${agentId}`, { token: b.company.jwt })).status).toBe(200)
    expect((await server.request('GET', `/api/agents/${agentId}`, { token: a.company.jwt })).status).toBe(404)

    const integration = await server.request('POST', '/api/integrations', {
      token: b.company.jwt,
      body: {
        type: 'webchat',
        name: 'Smuggled',
        entryAgentId: b.agentId,
        companyId: a.company.id,
      },
    })
    expect(integration.status).toBe(201)
    const patched = await server.request('PATCH', `/api/agents/${b.agentId}`, {
      token: b.company.jwt,
      body: { companyId: a.company.id, name: 'Still mine' },
    })
    expect(patched.status).toBe(200)
    // A's agent id in a body of B's is an unknown agent to B: 400, never a way into A.
    const foreignTarget = await server.request('POST', `/api/sessions/${b.sessionId}/reassign`, {
      token: b.company.jwt,
      body: { agentId: a.agentId, companyId: a.company.id },
    })
    expect(foreignTarget.status).toBe(400)
    expect(foreignTarget.body).toMatchObject({ error: { code: 'VALIDATION_ERROR' } })
    const foreignEntry = await server.request('POST', '/api/integrations', {
      token: b.company.jwt,
      body: { type: 'webchat', name: 'x', entryAgentId: a.agentId, companyId: a.company.id },
    })
    expect(foreignEntry.status).toBe(400)
    expect(await snapshotCompany(server, a.company.id)).toEqual(before)
  })
})
