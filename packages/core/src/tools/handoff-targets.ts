import type { Agent } from '../domain/agent.js'
import type { ToolDefinition } from '../ports/llm-provider.js'
import { HANDOFF_TO_AGENT } from './built-in-tools.js'

/**
 * The tool definitions of one agent's model calls: `definitions` with the handoff tool naming the
 * agents it may hand off to. A model knows no agent ids; without them it could hand off only to
 * ids the operator wrote into the system prompt, whose layout CONTRACT §10 fixes. With no targets
 * the definitions are returned as they are.
 */
export function withHandoffTargets(
  definitions: readonly ToolDefinition[],
  targets: readonly Agent[],
): readonly ToolDefinition[] {
  if (targets.length === 0) return definitions
  const named = `targetAgentId is one of: ${targets.map(describeTarget).join('; ')}.`
  return definitions.map((definition) =>
    definition.name === HANDOFF_TO_AGENT
      ? { ...definition, description: `${definition.description} ${named}` }
      : definition,
  )
}

function describeTarget(agent: Agent): string {
  const details = [agent.name]
  if (agent.role !== undefined && agent.role !== '') details.push(agent.role)
  if (agent.kind === 'human') details.push('a human operator')
  return `${agent.id} (${details.join(', ')})`
}
