import type { Agent } from '../domain/agent.js'
import type { Message } from '../domain/session.js'
import type { SharedContext } from '../domain/shared-context.js'
import type { KnowledgePassage, ModelMessage } from '../ports/llm-provider.js'

/**
 * The system message of an agent's turn: the agent's own prompt, then `## Shared context` (facts as
 * `key: value` lines, the journey as `- <at> <step>` lines), then `## Knowledge` when any passage
 * matched.
 */
export function buildSystemPrompt(
  agent: Agent,
  context: SharedContext,
  passages: readonly KnowledgePassage[],
): string {
  const parts: string[] = []
  if (agent.systemPrompt !== '') parts.push(agent.systemPrompt)

  const contextLines: string[] = []
  for (const [key, value] of Object.entries(context.facts)) contextLines.push(`${key}: ${value}`)
  for (const step of context.journey) contextLines.push(`- ${step.at} ${step.step}`)
  parts.push(`## Shared context\n${contextLines.length === 0 ? '(empty)' : contextLines.join('\n')}`)

  if (passages.length > 0) parts.push(`## Knowledge\n${passages.map((passage) => passage.text).join('\n\n')}`)
  return parts.join('\n\n')
}

/** Customer messages are the user's; agent and operator messages are the assistant's. */
export function historyMessages(history: readonly Message[]): ModelMessage[] {
  return history.map((message) =>
    message.role === 'customer'
      ? { role: 'user' as const, content: message.text }
      : { role: 'assistant' as const, content: message.text },
  )
}
