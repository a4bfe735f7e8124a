export type AgentPathVia = 'initial' | 'entry_routing' | 'handoff_tool' | 'manual'

/** One transition of the active agent, as kept in `metadata.agentPath`. */
export interface AgentPathEntry {
  readonly agentId: number
  /** Snapshot of the agent's name at transition time. */
  readonly agentName: string
  readonly role?: string
  /** Classifier confidence; entry routing only. */
  readonly confidence?: number
  /** The routing rule that matched; entry routing only. */
  readonly routeId?: string
  readonly timestamp: string
  readonly via: AgentPathVia
  /** Position in the routing chain; entry routing only. */
  readonly depth?: number
  /** The `reason` argument of `handoff_to_agent`; handoffs only. */
  readonly reason?: string
}

export interface AgentSnapshot {
  readonly id: number
  readonly name: string
  readonly role?: string | undefined
}

export function pathEntry(
  agent: AgentSnapshot,
  via: AgentPathVia,
  at: Date,
  extra: { confidence?: number; routeId?: string; depth?: number; reason?: string | undefined } = {},
): AgentPathEntry {
  return {
    agentId: agent.id,
    agentName: agent.name,
    ...(agent.role === undefined ? {} : { role: agent.role }),
    ...(extra.confidence === undefined ? {} : { confidence: extra.confidence }),
    ...(extra.routeId === undefined ? {} : { routeId: extra.routeId }),
    timestamp: at.toISOString(),
    via,
    ...(extra.depth === undefined ? {} : { depth: extra.depth }),
    ...(extra.reason === undefined ? {} : { reason: extra.reason }),
  }
}
