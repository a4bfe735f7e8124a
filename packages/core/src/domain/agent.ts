import { z } from 'zod'

/** The routing chain never goes deeper than this, whatever `maxDepth` says. */
export const MAX_ROUTING_DEPTH = 5
export const DEFAULT_FALLBACK_REPLY = "Sorry, I can't answer right now. Please try again shortly."
export const DEFAULT_LLM_MODEL = 'gpt-4o-mini'

const agentId = z.number().int().positive().max(2_147_483_647)

export const msgplatformHandoffSchema = z.strictObject({
  targetOperatorId: z.number().int().optional(),
  targetGroupId: z.number().int().optional(),
  sendSystemMessage: z.boolean().default(true),
})

export const handoffConfigSchema = z.strictObject({
  enabled: z.boolean().default(false),
  allowedTargets: z.array(agentId).max(100).default([]),
  announceHandoff: z.boolean().default(true),
  handoffMessageTemplate: z.string().max(500).default(''),
  messageHistoryDepth: z.number().int().min(5).max(50).default(15),
  msgplatform: msgplatformHandoffSchema.default({ sendSystemMessage: true }),
})

export const routeSchema = z.strictObject({
  id: z.string().min(1).max(100),
  agentId,
  description: z.string().max(2000),
})

export const routingConfigSchema = z.strictObject({
  enabled: z.boolean(),
  routes: z.array(routeSchema).max(50).default([]),
  confidenceThreshold: z.number().min(0).max(1).default(0.5),
})

export const agentKindSchema = z.enum(['ai', 'human'])

/** The body of `POST /api/agents`, with the defaults of CONTRACT §4. */
export const agentInputSchema = z.strictObject({
  name: z.string().min(1).max(100),
  role: z.string().min(1).max(100).optional(),
  kind: agentKindSchema.default('ai'),
  systemPrompt: z.string().max(20_000).default(''),
  llmModel: z.string().min(1).max(200).default(DEFAULT_LLM_MODEL),
  routingModel: z.string().min(1).max(200).optional(),
  routingConfig: routingConfigSchema.optional(),
  maxDepth: z.number().int().min(1).max(1000).default(3),
  handoff: handoffConfigSchema.default(handoffConfigSchema.parse({})),
  fallbackReply: z.string().max(2000).nullable().default(DEFAULT_FALLBACK_REPLY),
})

/** The body of `PATCH /api/agents/{id}`: every field optional, none defaulted. */
export const agentPatchSchema = z.strictObject({
  name: z.string().min(1).max(100).optional(),
  role: z.string().min(1).max(100).nullable().optional(),
  kind: agentKindSchema.optional(),
  systemPrompt: z.string().max(20_000).optional(),
  llmModel: z.string().min(1).max(200).optional(),
  routingModel: z.string().min(1).max(200).nullable().optional(),
  routingConfig: routingConfigSchema.nullable().optional(),
  maxDepth: z.number().int().min(1).max(1000).optional(),
  handoff: handoffConfigSchema.optional(),
  fallbackReply: z.string().max(2000).nullable().optional(),
})

export type AgentKind = z.infer<typeof agentKindSchema>
export type HandoffConfig = z.infer<typeof handoffConfigSchema>
export type RoutingConfig = z.infer<typeof routingConfigSchema>
export type Route = z.infer<typeof routeSchema>
export type AgentInput = z.input<typeof agentInputSchema>
export type AgentPatch = z.infer<typeof agentPatchSchema>

export interface Agent {
  readonly id: number
  readonly companyId: number
  readonly name: string
  readonly role?: string
  readonly kind: AgentKind
  readonly systemPrompt: string
  readonly llmModel: string
  readonly routingModel?: string
  readonly routingConfig?: RoutingConfig
  readonly maxDepth: number
  readonly handoff: HandoffConfig
  readonly fallbackReply: string | null
  readonly createdAt: string
  readonly updatedAt: string
}

/** The depth budget an entry agent gives its routing chain. */
export function routingDepthCap(agent: Pick<Agent, 'maxDepth'>): number {
  return Math.min(agent.maxDepth, MAX_ROUTING_DEPTH)
}

/** Every agent id the configuration names: handoff targets and routes. */
export function referencedAgentIds(config: {
  handoff?: Pick<HandoffConfig, 'allowedTargets'> | undefined
  routingConfig?: Pick<RoutingConfig, 'routes'> | null | undefined
}): number[] {
  const ids = new Set<number>(config.handoff?.allowedTargets ?? [])
  for (const route of config.routingConfig?.routes ?? []) ids.add(route.agentId)
  return [...ids]
}
