import { type Agent, routingDepthCap } from '../domain/agent.js'
import { type AgentPathEntry, pathEntry } from '../domain/agent-path.js'
import type { RoutingOutcome, RoutingReason } from '../domain/session.js'
import type { LlmProvider, TokenUsage } from '../ports/llm-provider.js'
import { classifyMessage } from './classify.js'

export interface EntryRoutingInput {
  readonly entryAgent: Agent
  readonly text: string
  readonly model: LlmProvider
  /** Loads an agent of the session's company; null when it no longer exists. */
  readonly loadAgent: (id: number) => Promise<Agent | null>
  readonly now: () => Date
}

export interface ModelUsage {
  readonly agentId: number
  readonly model: string
  readonly usage: TokenUsage
}

export interface EntryRoutingResult {
  readonly agent: Agent
  readonly pathEntries: AgentPathEntry[]
  readonly routing: RoutingOutcome
  readonly usage: ModelUsage[]
  /** The classifier call that failed (after the provider's retries), which ended in a fallback. */
  readonly failure?: { readonly agentId: number; readonly reason: string }
}

export function routesFirstMessage(agent: Agent): boolean {
  return agent.routingConfig?.enabled === true
}

/**
 * Entry routing (CONTRACT §10): classify on the entry agent, follow the chosen agent while it
 * routes too, and stop on the first of: a final agent (`resolved`), the entry agent's depth
 * budget (`max_depth`), an agent already on the path (`cycle`), or an unsure classifier
 * (`fallback`). The agent reached last stays active. The recorded depth is that of the last
 * classification: the entry agent classifies at depth 1 (so its unsure classifier is a fallback
 * at depth 1, as CONTRACT §10 words it), the agent of hop n at depth n + 1.
 */
export async function routeEntry(input: EntryRoutingInput): Promise<EntryRoutingResult> {
  const cap = routingDepthCap(input.entryAgent)
  const visited = new Set<number>([input.entryAgent.id])
  const pathEntries: AgentPathEntry[] = []
  const usage: ModelUsage[] = []
  let current = input.entryAgent
  let depth = 0

  let failure: EntryRoutingResult['failure']
  const finish = (reason: RoutingReason, reached = depth): EntryRoutingResult => ({
    agent: current,
    pathEntries,
    routing: { reason, depth: reached, at: input.now().toISOString() },
    usage,
    ...(failure === undefined ? {} : { failure }),
  })
  /** The classification that just ran, one deeper than the hops made so far, ended the chain. */
  const stopHere = (reason: 'fallback' | 'cycle') => finish(reason, depth + 1)

  for (;;) {
    const config = current.routingConfig
    if (config === undefined || !config.enabled) return finish('resolved')
    if (depth >= cap) return finish('max_depth')

    let routeId: string | null
    let confidence: number
    try {
      const decision = await classifyMessage(input.model, current, config.routes, input.text)
      if (decision.usage !== undefined) {
        usage.push({
          agentId: current.id,
          model: current.routingModel ?? current.llmModel,
          usage: decision.usage,
        })
      }
      routeId = decision.routeId
      confidence = decision.confidence
    } catch (error) {
      // As unsure as a classifier can be, and a model failure the operators need to hear about.
      failure = { agentId: current.id, reason: error instanceof Error ? error.message : String(error) }
      return stopHere('fallback')
    }
    const route = routeId === null ? undefined : config.routes.find((candidate) => candidate.id === routeId)
    if (route === undefined || !(confidence >= config.confidenceThreshold)) return stopHere('fallback')
    if (visited.has(route.agentId)) return stopHere('cycle')
    const next = await input.loadAgent(route.agentId)
    if (next === null) return stopHere('fallback')

    depth += 1
    visited.add(next.id)
    pathEntries.push(pathEntry(next, 'entry_routing', input.now(), { confidence, routeId: route.id, depth }))
    current = next
  }
}
