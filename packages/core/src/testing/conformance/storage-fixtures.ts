import { randomUUID } from 'node:crypto'
import type { Agent } from '../../domain/agent.js'
import type { Message, MessageRole, Session } from '../../domain/session.js'
import type { Integration, NewAgent, NewMessage, Repositories, Storage } from '../../ports/storage.js'

export interface StorageConformanceOptions {
  /** Runs after each test; closes the storage when not given. */
  cleanup?: (storage: Storage) => Promise<void>
  /**
   * A company id no other test uses. By default a counter from a random large number; an
   * adapter whose tables reference a companies table creates the company here.
   */
  newCompanyId?: (storage: Storage) => Promise<number> | number
}

// Random so that runs against a shared database never meet an earlier run's rows.
let lastCompanyId = 1_000_000_000 + Math.floor(Math.random() * 1_000_000_000)

export function companyIdSource(
  options: StorageConformanceOptions | undefined,
): (storage: Storage) => Promise<number> {
  return async (storage) => {
    if (options?.newCompanyId !== undefined) return options.newCompanyId(storage)
    lastCompanyId += 1
    return lastCompanyId
  }
}

export async function cleanUp(
  storage: Storage | undefined,
  options: StorageConformanceOptions | undefined,
): Promise<void> {
  if (storage === undefined) return
  if (options?.cleanup !== undefined) await options.cleanup(storage)
  else await storage.close()
}

/** Far enough from the real clock that no leftover row of another run is due by accident. */
const BASE_TIME = Date.parse('2030-01-01T00:00:00.000Z')

export function at(offsetMs = 0): Date {
  return new Date(BASE_TIME + offsetMs)
}

export function newAgentInput(companyId: number, overrides: Partial<NewAgent> = {}): NewAgent & { at: Date } {
  return {
    companyId,
    name: `Agent ${randomUUID().slice(0, 8)}`,
    kind: 'ai',
    systemPrompt: 'You help customers.',
    llmModel: 'gpt-4o-mini',
    maxDepth: 3,
    handoff: {
      enabled: false,
      allowedTargets: [],
      announceHandoff: true,
      handoffMessageTemplate: '',
      messageHistoryDepth: 15,
      msgplatform: { sendSystemMessage: true },
    },
    fallbackReply: 'Sorry, try again later.',
    ...overrides,
    at: at(),
  }
}

export async function createAgent(
  repositories: Repositories,
  companyId: number,
  overrides: Partial<NewAgent> = {},
): Promise<Agent> {
  return repositories.agents.create(newAgentInput(companyId, overrides))
}

export async function createIntegration(
  repositories: Repositories,
  companyId: number,
  entryAgentId: number,
): Promise<Integration> {
  return repositories.integrations.create({
    companyId,
    type: 'webchat',
    name: 'Website chat',
    active: true,
    entryAgentId,
    config: { greeting: 'Hello' },
    webhookSecret: null,
    at: at(),
  })
}

export function newSessionInput(options: {
  companyId: number
  integrationId: string
  agentId: number
  clientId?: string
  state?: Session['state']
  createdAt?: Date
}): Omit<Session, 'version'> {
  const createdAt = (options.createdAt ?? at()).toISOString()
  return {
    id: randomUUID(),
    companyId: options.companyId,
    integrationId: options.integrationId,
    customer: { clientId: options.clientId ?? randomUUID(), transport: 'websocket' },
    state: options.state ?? 'ongoing',
    activeAgentId: options.agentId,
    entryAgentId: options.agentId,
    metadata: { agentPath: [], sharedContext: { facts: {}, journey: [] }, errors: [] },
    createdAt,
    updatedAt: createdAt,
  }
}

/** An agent and an integration of the company, so sessions have real rows to point at. */
export interface Channel {
  readonly companyId: number
  readonly agent: Agent
  readonly integration: Integration
}

export async function createChannel(repositories: Repositories, companyId: number): Promise<Channel> {
  const agent = await createAgent(repositories, companyId)
  const integration = await createIntegration(repositories, companyId, agent.id)
  return { companyId, agent, integration }
}

export async function createSession(
  repositories: Repositories,
  channel: Channel,
  overrides: { clientId?: string; state?: Session['state']; createdAt?: Date } = {},
): Promise<Session> {
  return repositories.sessions.create(
    newSessionInput({
      companyId: channel.companyId,
      integrationId: channel.integration.id,
      agentId: channel.agent.id,
      ...overrides,
    }),
  )
}

export function newMessageInput(
  session: Session,
  overrides: Partial<Omit<NewMessage, 'sessionId' | 'companyId' | 'integrationId'>> & {
    role?: MessageRole
  } = {},
): NewMessage {
  return {
    id: randomUUID(),
    companyId: session.companyId,
    sessionId: session.id,
    integrationId: session.integrationId,
    role: 'customer',
    text: 'Hello',
    at: at(),
    ...overrides,
  }
}

export async function insertMessage(
  repositories: Repositories,
  session: Session,
  overrides: Parameters<typeof newMessageInput>[1] = {},
): Promise<Message> {
  return repositories.messages.insert(newMessageInput(session, overrides))
}

/** Tries to change a returned object; a frozen one throws, a fresh copy just changes. */
export function tryToMutate(target: object, key: string, value: unknown): void {
  try {
    ;(target as Record<string, unknown>)[key] = value
  } catch {
    // Frozen: the point is made.
  }
}

export function expectedError(): Error {
  return new Error(`rolled back on purpose ${randomUUID()}`)
}
