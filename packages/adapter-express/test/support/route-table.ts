import type { TestCompany, TestServer } from './start-test-server.js'

/** One company's resources, made through the API (the session through ingest). */
export interface Fixture {
  readonly company: TestCompany
  readonly agentId: number
  readonly humanAgentId: number
  readonly integrationId: string
  readonly sessionId: string
}

export async function createFixture(server: TestServer, name?: string): Promise<Fixture> {
  const company = await server.registerCompany(name)
  const agentId = await server.createAgent(company.jwt, { name: 'Reception' })
  const humanAgentId = await server.createAgent(company.jwt, { name: 'Humans', kind: 'human' })
  const integrationId = await server.createIntegration(company.jwt, agentId)
  const sessionId = await server.openSession(integrationId, `client-of-${company.id}`)
  return { company, agentId, humanAgentId, integrationId, sessionId }
}

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE'

export interface RouteCase {
  readonly method: Method
  /** With `:agentId`, `:integrationId` or `:sessionId` where the path names a resource. */
  readonly path: string
  /** A body valid for the caller, whose own resources it may name; none for bodiless routes. */
  readonly body?: (own: Fixture) => Record<string, unknown>
  /** Field names of the body, for fuzzing with the right keys and wrong values. */
  readonly fields?: readonly string[]
}

/** Every protected route of the resource API, in one table. */
export const ROUTES: readonly RouteCase[] = [
  {
    method: 'POST',
    path: '/api/agents',
    body: () => ({ name: 'Created in a test' }),
    fields: [
      'name',
      'role',
      'kind',
      'systemPrompt',
      'llmModel',
      'routingModel',
      'routingConfig',
      'maxDepth',
      'handoff',
      'fallbackReply',
    ],
  },
  { method: 'GET', path: '/api/agents' },
  { method: 'GET', path: '/api/agents/:agentId' },
  {
    method: 'PATCH',
    path: '/api/agents/:agentId',
    body: () => ({ name: 'Renamed in a test' }),
    fields: ['name', 'role', 'kind', 'systemPrompt', 'maxDepth', 'handoff', 'routingConfig', 'fallbackReply'],
  },
  { method: 'DELETE', path: '/api/agents/:agentId' },
  {
    method: 'POST',
    path: '/api/agents/:agentId/knowledge',
    body: () => ({ title: 'Created in a test', content: 'Some knowledge.' }),
    fields: ['title', 'content'],
  },
  { method: 'GET', path: '/api/agents/:agentId/knowledge' },
  {
    method: 'POST',
    path: '/api/integrations',
    body: (own) => ({
      type: 'msgplatform',
      name: 'Created in a test',
      entryAgentId: own.agentId,
      config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'token' },
    }),
    fields: ['type', 'name', 'entryAgentId', 'config', 'webhookSecret'],
  },
  { method: 'GET', path: '/api/integrations' },
  { method: 'GET', path: '/api/integrations/:integrationId' },
  {
    method: 'PATCH',
    path: '/api/integrations/:integrationId',
    body: (own) => ({ name: 'Renamed in a test', active: false, entryAgentId: own.agentId }),
    fields: ['name', 'active', 'entryAgentId', 'config'],
  },
  { method: 'DELETE', path: '/api/integrations/:integrationId' },
  { method: 'POST', path: '/api/integrations/:integrationId/rotate-secret' },
  { method: 'POST', path: '/api/integrations/:integrationId/status-hooks' },
  { method: 'GET', path: '/api/integrations/:integrationId/webhook-logs' },
  { method: 'GET', path: '/api/sessions' },
  { method: 'GET', path: '/api/sessions/:sessionId' },
  { method: 'GET', path: '/api/sessions/:sessionId/messages' },
  { method: 'GET', path: '/api/sessions/:sessionId/context' },
  { method: 'GET', path: '/api/sessions/:sessionId/status' },
  {
    method: 'POST',
    path: '/api/sessions/:sessionId/messages',
    body: () => ({ text: 'an operator writes' }),
    fields: ['text'],
  },
  {
    method: 'POST',
    path: '/api/sessions/:sessionId/pause',
    body: () => ({ reason: 'a test', externalReference: 'T-1' }),
    fields: ['reason', 'externalReference'],
  },
  {
    method: 'POST',
    path: '/api/sessions/:sessionId/resume',
    body: () => ({ note: 'a test' }),
    fields: ['note'],
  },
  {
    method: 'POST',
    path: '/api/sessions/:sessionId/close',
    body: () => ({ reason: 'a test' }),
    fields: ['reason'],
  },
  {
    method: 'POST',
    path: '/api/sessions/:sessionId/reassign',
    body: (own) => ({ agentId: own.humanAgentId, operatorId: 1 }),
    fields: ['agentId', 'operatorId', 'groupId'],
  },
  { method: 'GET', path: '/api/billing' },
  { method: 'GET', path: '/api/billing/usage' },
  { method: 'GET', path: '/api/pipelines' },
]

export function hasPathId(route: RouteCase): boolean {
  return route.path.includes('/:')
}

/** The route's path with the ids of `target` filled in. */
export function pathFor(route: RouteCase, target: Fixture): string {
  return route.path
    .replace(':agentId', String(target.agentId))
    .replace(':integrationId', target.integrationId)
    .replace(':sessionId', target.sessionId)
}

/** Everything a company has, straight from storage, to compare before and after an attack. */
export async function snapshotCompany(server: TestServer, companyId: number): Promise<unknown> {
  await server.switchboard.idle()
  const { storage } = server
  const agents = await storage.agents.list({ companyId, limit: 100 })
  const integrations = await storage.integrations.list({ companyId, limit: 100 })
  const sessions = await storage.sessions.list({ companyId, limit: 100 })
  const messages = await Promise.all(
    sessions.items.map((session) => storage.messages.list({ sessionId: session.id, limit: 1000 })),
  )
  const documents = await Promise.all(
    agents.items.map((agent) =>
      storage.knowledgeDocuments.list({ companyId, agentId: agent.id, limit: 100 }),
    ),
  )
  return { agents, integrations, sessions, messages, documents }
}
