import { isoTimestamp } from './iso-timestamp.js'

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
  // Assigned one by one in the stored key order: every turn makes one, and spreading an object
  // literal per optional key cost more than the rest of it.
  const entry = { agentId: agent.id, agentName: agent.name } as {
    -readonly [Key in keyof AgentPathEntry]: AgentPathEntry[Key]
  }
  if (agent.role !== undefined) entry.role = agent.role
  if (extra.confidence !== undefined) entry.confidence = extra.confidence
  if (extra.routeId !== undefined) entry.routeId = extra.routeId
  entry.timestamp = isoTimestamp(at)
  entry.via = via
  if (extra.depth !== undefined) entry.depth = extra.depth
  if (extra.reason !== undefined) entry.reason = extra.reason
  return entry
}
