import { z } from 'zod'

/** The routing chain never goes deeper than this, whatever `maxDepth` says. */
export const MAX_ROUTING_DEPTH = 5
export const DEFAULT_FALLBACK_REPLY = "Sorry, I can't answer right now. Please try again shortly."
const DEFAULT_LLM_MODEL = 'gpt-4o-mini'

/** Agent ids and `maxDepth` are stored as PostgreSQL integers. */
const INT4_MAX = 2_147_483_647
const agentId = z.number().int().positive().max(INT4_MAX)

const msgplatformHandoffSchema = z.strictObject({
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

const routeSchema = z.strictObject({
  id: z.string().min(1).max(100),
  agentId,
  description: z.string().max(2000),
})

export const routingConfigSchema = z.strictObject({
  enabled: z.boolean(),
  routes: z.array(routeSchema).max(50).default([]),
  confidenceThreshold: z.number().min(0).max(1).default(0.5),
})

const agentKindSchema = z.enum(['ai', 'human'])

/** The body of `POST /api/agents`; parsing fills in the defaults of the fields left out. */
export const agentInputSchema = z.strictObject({
  name: z.string().min(1).max(100),
  role: z.string().max(100).optional(),
  kind: agentKindSchema.default('ai'),
  systemPrompt: z.string().max(20_000).default(''),
  llmModel: z.string().min(1).max(200).default(DEFAULT_LLM_MODEL),
  routingModel: z.string().min(1).max(200).optional(),
  routingConfig: routingConfigSchema.optional(),
  // Stored as given (CONTRACT §4); routing never goes deeper than MAX_ROUTING_DEPTH.
  maxDepth: z.number().int().min(1).max(INT4_MAX).default(3),
  handoff: handoffConfigSchema.default(handoffConfigSchema.parse({})),
  fallbackReply: z.string().max(2000).nullable().default(DEFAULT_FALLBACK_REPLY),
})

/**
 * `handoff` in a PATCH: the fields sent replace theirs and the others are kept, `msgplatform`'s
 * included; a null operator or group id removes it.
 */
const handoffPatchSchema = z.strictObject({
  enabled: z.boolean().optional(),
  allowedTargets: z.array(agentId).max(100).optional(),
  announceHandoff: z.boolean().optional(),
  handoffMessageTemplate: z.string().max(500).optional(),
  messageHistoryDepth: z.number().int().min(5).max(50).optional(),
  msgplatform: z
    .strictObject({
      targetOperatorId: z.number().int().nullable().optional(),
      targetGroupId: z.number().int().nullable().optional(),
      sendSystemMessage: z.boolean().optional(),
    })
    .optional(),
})

/** `routingConfig` in a PATCH: the fields sent replace theirs; null removes the configuration. */
const routingConfigPatchSchema = z.strictObject({
  enabled: z.boolean().optional(),
  routes: z.array(routeSchema).max(50).optional(),
  confidenceThreshold: z.number().min(0).max(1).optional(),
})

/** The body of `PATCH /api/agents/{id}`: every field optional, none defaulted, nested ones merged. */
export const agentPatchSchema = z.strictObject({
  name: z.string().min(1).max(100).optional(),
  role: z.string().max(100).nullable().optional(),
  kind: agentKindSchema.optional(),
  systemPrompt: z.string().max(20_000).optional(),
  llmModel: z.string().min(1).max(200).optional(),
  routingModel: z.string().min(1).max(200).nullable().optional(),
  routingConfig: routingConfigPatchSchema.nullable().optional(),
  maxDepth: z.number().int().min(1).max(INT4_MAX).optional(),
  handoff: handoffPatchSchema.optional(),
  fallbackReply: z.string().max(2000).nullable().optional(),
})

export type AgentKind = z.infer<typeof agentKindSchema>
export type HandoffConfig = z.infer<typeof handoffConfigSchema>
export type RoutingConfig = z.infer<typeof routingConfigSchema>
export type Route = z.infer<typeof routeSchema>
export type AgentInput = z.input<typeof agentInputSchema>
/** A PATCH as its caller sends it: nested objects partial. */
export type AgentUpdate = z.input<typeof agentPatchSchema>

/** The fields an update stores: each one given replaces the stored one whole; null removes it. */
export interface AgentPatch {
  readonly name?: string | undefined
  readonly role?: string | null | undefined
  readonly kind?: AgentKind | undefined
  readonly systemPrompt?: string | undefined
  readonly llmModel?: string | undefined
  readonly routingModel?: string | null | undefined
  readonly routingConfig?: RoutingConfig | null | undefined
  readonly maxDepth?: number | undefined
  readonly handoff?: HandoffConfig | undefined
  readonly fallbackReply?: string | null | undefined
}

/** The stored fields of `agent` after `update`: nested fields not sent keep their values. */
export function agentPatchOf(agent: Agent, update: z.infer<typeof agentPatchSchema>): AgentPatch {
  const { handoff, routingConfig, ...flat } = update
  return {
    ...flat,
    ...(handoff === undefined ? {} : { handoff: mergeHandoff(agent.handoff, handoff) }),
    ...(routingConfig === undefined
      ? {}
      : { routingConfig: routingConfig === null ? null : mergeRouting(agent.routingConfig, routingConfig) }),
  }
}

function mergeHandoff(
  current: HandoffConfig,
  update: NonNullable<z.infer<typeof agentPatchSchema>['handoff']>,
): HandoffConfig {
  const { msgplatform, ...flat } = update
  const merged: HandoffConfig = { ...current, ...definedOnly(flat) }
  if (msgplatform === undefined) return merged
  const platform: Record<string, unknown> = { ...current.msgplatform }
  for (const [key, value] of Object.entries(msgplatform)) {
    if (value === null) delete platform[key]
    else if (value !== undefined) platform[key] = value
  }
  return { ...merged, msgplatform: platform as HandoffConfig['msgplatform'] }
}

function mergeRouting(
  current: RoutingConfig | undefined,
  update: NonNullable<z.infer<typeof agentPatchSchema>['routingConfig']>,
): RoutingConfig {
  return { ...(current ?? routingConfigSchema.parse({ enabled: false })), ...definedOnly(update) }
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>
}

export interface Agent {
  readonly id: number
  readonly companyId: number
  readonly name: string
  readonly role?: string | undefined
  readonly kind: AgentKind
  readonly systemPrompt: string
  readonly llmModel: string
  readonly routingModel?: string | undefined
  readonly routingConfig?: RoutingConfig | undefined
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
