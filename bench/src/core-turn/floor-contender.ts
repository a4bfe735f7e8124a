import type { LlmProvider, ModelMessage, ToolDefinition } from '@switchboard/core'
import { type Contender, expectEqual } from './contender.js'
import {
  CUSTOMER_TEXT,
  FACT_KEY,
  FACT_VALUE,
  RECEPTION_PROMPT,
  REPLY_TEXT,
  SALES_PROMPT,
  type Scenario,
  SUPPORT_PROMPT,
} from './scenario.js'
import { createZeroLatencyModel } from './zero-latency-model.js'

interface FloorAgent {
  readonly id: number
  readonly systemPrompt: string
  readonly handoffTargets: readonly number[]
}

interface FloorSession {
  readonly clientId: string
  activeAgentId: number
  readonly facts: Record<string, string>
  readonly messages: { role: string; text: string }[]
}

const MAX_MODEL_CALLS = 8

// The model gets tool definitions on every call, as it does from Switchboard.
const TOOL_DEFINITIONS: readonly ToolDefinition[] = [
  { name: 'save_fact', description: 'Remember a fact.', parameters: { type: 'object' } },
  { name: 'handoff_to_agent', description: 'Transfer the conversation.', parameters: { type: 'object' } },
]

/**
 * The least work a turn can be: plain objects and arrays, no storage, no queue, no events. It
 * builds the messages, calls the same zero-latency model, runs the tool, switches agent and keeps
 * the reply, so the distance between it and a real runtime is what the runtime itself costs.
 */
export function createFloorContender(scenario: Scenario): Contender {
  const receptionId = 1
  const salesId = 2
  const agents = new Map<number, FloorAgent>(
    scenario.delegates
      ? [
          [receptionId, { id: receptionId, systemPrompt: RECEPTION_PROMPT, handoffTargets: [salesId] }],
          [salesId, { id: salesId, systemPrompt: SALES_PROMPT, handoffTargets: [] }],
        ]
      : [[receptionId, { id: receptionId, systemPrompt: SUPPORT_PROMPT, handoffTargets: [] }]],
  )
  const model = createZeroLatencyModel(
    scenario.delegates ? { delegation: { fromAgentId: receptionId, toAgentId: salesId } } : {},
  )

  return {
    label: 'floor (plain objects, no storage)',
    scenario: scenario.name,
    role: 'floor',
    async open() {
      const sent: { clientId: string; text: string }[] = []
      let lastSession: FloorSession | null = null
      return {
        async run(first, count) {
          for (let index = first; index < first + count; index++) {
            const session: FloorSession = {
              clientId: `customer-${index}`,
              activeAgentId: receptionId,
              facts: {},
              messages: [],
            }
            await answer(model, agents, session, CUSTOMER_TEXT, sent)
            lastSession = session
          }
        },
        async verify(turns) {
          expectEqual('replies sent', sent.length, turns)
          expectEqual('last reply', sent[sent.length - 1]?.text, REPLY_TEXT)
          if (scenario.delegates) {
            expectEqual('active agent', lastSession?.activeAgentId, salesId)
            expectEqual('saved fact', lastSession?.facts[FACT_KEY], FACT_VALUE)
          }
        },
        async close() {},
      }
    },
  }
}

async function answer(
  model: LlmProvider,
  agents: ReadonlyMap<number, FloorAgent>,
  session: FloorSession,
  text: string,
  sent: { clientId: string; text: string }[],
): Promise<void> {
  session.messages.push({ role: 'customer', text })
  let agent = agents.get(session.activeAgentId)!
  let toolTraffic: ModelMessage[] = []
  for (let calls = 0; calls < MAX_MODEL_CALLS; calls++) {
    const messages: ModelMessage[] = [
      { role: 'system', content: systemPrompt(agent, session.facts) },
      { role: 'user', content: text },
      ...toolTraffic,
    ]
    const completion = await model.complete({
      model: 'zero-latency',
      messages,
      tools: TOOL_DEFINITIONS,
      agentId: agent.id,
    })
    if (completion.toolCalls.length === 0) {
      session.messages.push({ role: 'agent', text: completion.text })
      sent.push({ clientId: session.clientId, text: completion.text })
      return
    }
    toolTraffic.push({ role: 'assistant', content: completion.text, toolCalls: completion.toolCalls })
    for (const call of completion.toolCalls) {
      const parsed = JSON.parse(call.arguments) as Record<string, unknown>
      if (call.name === 'save_fact') {
        session.facts[String(parsed.key)] = String(parsed.value)
        toolTraffic.push({ role: 'tool', toolCallId: call.id, content: 'saved' })
      } else if (call.name === 'handoff_to_agent') {
        const target = agents.get(Number(parsed.targetAgentId))
        if (target === undefined || !agent.handoffTargets.includes(target.id)) {
          toolTraffic.push({ role: 'tool', toolCallId: call.id, content: 'Error: handoff rejected' })
          continue
        }
        // The receiving agent answers the same customer message without the caller's tool traffic.
        agent = target
        session.activeAgentId = target.id
        toolTraffic = []
        break
      }
    }
  }
}

function systemPrompt(agent: FloorAgent, facts: Readonly<Record<string, string>>): string {
  let prompt = agent.systemPrompt
  for (const key in facts) prompt += `\n${key}: ${facts[key]}`
  return prompt
}
