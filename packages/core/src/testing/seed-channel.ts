import { type Agent, type AgentInput, agentInputSchema } from '../domain/agent.js'
import type { Integration, Storage } from '../ports/storage.js'

export interface SeededChannel {
  readonly companyId: number
  readonly agent: Agent
  readonly integration: Integration
}

/**
 * A company with one agent (the contract's defaults unless `agent` says otherwise) and an active
 * integration entering through it: the smallest world a message can arrive in. For tests and
 * benchmarks that work on storage directly.
 */
export async function seedChannel(
  storage: Storage,
  options: { type?: string; companyId?: number; agent?: Partial<AgentInput>; at?: Date } = {},
): Promise<SeededChannel> {
  const at = options.at ?? new Date()
  const companyId =
    options.companyId ??
    (await storage.companies.create({ companyName: 'Seeded', publicId: globalThis.crypto.randomUUID(), at }))
      .id
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Seeded agent', fallbackReply: null, ...options.agent }),
    companyId,
    at,
  })
  const integration = await storage.integrations.create({
    companyId,
    type: options.type ?? 'recording',
    name: 'seeded channel',
    active: true,
    entryAgentId: agent.id,
    config: {},
    webhookSecret: null,
    at,
  })
  return { companyId, agent, integration }
}
