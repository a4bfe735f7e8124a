import { z } from 'zod'
import { prepareTool } from './tool.js'

export const SAVE_FACT = 'save_fact'
export const APPEND_JOURNEY = 'append_journey'
export const HANDOFF_TO_AGENT = 'handoff_to_agent'

export const saveFactArguments = z.object({
  key: z.string().min(1).max(200).describe('name of the fact, e.g. "customer_name"'),
  value: z.string().max(2000).describe('the fact itself'),
})

export const appendJourneyArguments = z.object({
  step: z.string().min(1).max(500).describe('short description of what just happened'),
})

export const handoffArguments = z.object({
  targetAgentId: z.number().int().describe('id of the agent to transfer the conversation to'),
  reason: z.string().max(500).optional().describe('why the conversation is handed off'),
})

const noop = () => undefined

/** The three tools every agent has, whatever its configuration; the turn runs them itself. */
export const BUILT_IN_TOOLS = [
  prepareTool({
    name: SAVE_FACT,
    description: 'Remember a fact about the customer or the conversation for every agent of this session.',
    parameters: saveFactArguments,
    execute: noop,
  }),
  prepareTool({
    name: APPEND_JOURNEY,
    description: 'Add a timestamped step to the journey log of this conversation.',
    parameters: appendJourneyArguments,
    execute: noop,
  }),
  prepareTool({
    name: HANDOFF_TO_AGENT,
    description:
      'Transfer the conversation to another agent that is better suited to answer. The other agent answers the customer right away.',
    parameters: handoffArguments,
    execute: noop,
  }),
] as const

export const BUILT_IN_TOOL_NAMES: ReadonlySet<string> = new Set(
  BUILT_IN_TOOLS.map((tool) => tool.definition.name),
)
