import type { Agent } from '../domain/agent.js'
import { type AgentPathEntry, pathEntry } from '../domain/agent-path.js'
import type { SessionErrorCode } from '../domain/errors.js'
import type { Message, RoutingOutcome, SessionErrorRecord } from '../domain/session.js'
import { type JourneyStep, type SharedContext, withFact, withJourneyStep } from '../domain/shared-context.js'
import { decideHandoff, handoffAnnouncement } from '../handoff/decide-handoff.js'
import { type HumanTransferTarget, resolveHumanTransferTarget } from '../handoff/human-transfer.js'
import { checkedCompletion } from '../models/model-answer.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import type {
  Completion,
  LlmProvider,
  ModelMessage,
  ToolCall,
  ToolDefinition,
} from '../ports/llm-provider.js'
import { type ModelUsage, routeEntry, routesFirstMessage } from '../routing/entry-routing.js'
import {
  APPEND_JOURNEY,
  appendJourneyArguments,
  HANDOFF_TO_AGENT,
  handoffArguments,
  SAVE_FACT,
  saveFactArguments,
} from '../tools/built-in-tools.js'
import { withHandoffTargets } from '../tools/handoff-targets.js'
import { parseToolArguments } from '../tools/tool.js'
import type { ToolRegistry } from '../tools/tool-registry.js'
import { buildSystemPrompt, historyMessages } from './build-prompt.js'

/** At most this many model calls answer one customer message, across all agents; routing not counted. */
export const MAX_MODEL_CALLS_PER_MESSAGE = 8
const KNOWLEDGE_PASSAGES = 3
/** The largest history window any agent can ask for (`messageHistoryDepth` ≤ 50). */
export const MAX_HISTORY_WINDOW = 50

export interface TurnInput {
  readonly companyId: number
  readonly sessionId: string
  readonly activeAgent: Agent
  readonly sharedContext: SharedContext
  /** The customer message being answered. */
  readonly message: Message
  /** Up to MAX_HISTORY_WINDOW conversational messages before it, oldest first. */
  readonly priorMessages: readonly Message[]
  /** True on the session's first customer message: entry routing may run. */
  readonly firstCustomerMessage: boolean
  readonly humanTransferSupported: boolean
  readonly model: LlmProvider
  readonly tools: ToolRegistry
  readonly knowledge: KnowledgeIndex
  readonly loadAgent: (id: number) => Promise<Agent | null>
  readonly now: () => Date
}

export interface OutgoingMessage {
  readonly role: 'agent' | 'system'
  readonly text: string
  readonly agentId: number
}

export interface RejectedHandoff {
  readonly agentId: number
  readonly targetAgentId: number
  readonly code: SessionErrorCode
  readonly message: string
}

/** Everything a turn decided; the runtime commits it in one transaction. */
export interface TurnOutcome {
  readonly activeAgentId: number
  readonly pathEntries: readonly AgentPathEntry[]
  readonly facts: Readonly<Record<string, string>>
  readonly journey: readonly JourneyStep[]
  readonly routing?: RoutingOutcome
  readonly errors: readonly SessionErrorRecord[]
  readonly outgoing: readonly OutgoingMessage[]
  readonly humanTransfer?: HumanTransferTarget
  readonly rejectedHandoffs: readonly RejectedHandoff[]
  readonly usage: readonly ModelUsage[]
}

function toolResult(call: ToolCall, content: string): ModelMessage {
  return { role: 'tool', toolCallId: call.id, content }
}

function stringify(value: unknown): string {
  if (typeof value === 'string') return value
  if (value === undefined) return 'ok'
  try {
    return JSON.stringify(value) ?? 'ok'
  } catch {
    return String(value)
  }
}

/**
 * One customer message answered: entry routing on the first message, then the active agent's tool
 * loop, following handoffs until an agent replies, a human takes over, or a budget runs out.
 * Pure with respect to storage: it only reads through the given loaders.
 */
export async function runTurn(input: TurnInput): Promise<TurnOutcome> {
  const pathEntries: AgentPathEntry[] = []
  const errors: SessionErrorRecord[] = []
  const outgoing: OutgoingMessage[] = []
  const rejectedHandoffs: RejectedHandoff[] = []
  const usage: ModelUsage[] = []
  let newFacts: Readonly<Record<string, string>> = {}
  const newJourney: JourneyStep[] = []
  let context = input.sharedContext
  let routing: RoutingOutcome | undefined
  let humanTransfer: HumanTransferTarget | undefined

  const recordError = (code: SessionErrorCode, message: string, agentId: number) => {
    errors.push({ code, message, agentId, at: input.now().toISOString() })
  }

  let agent = input.activeAgent
  let historyWindow = agent.handoff.messageHistoryDepth

  if (input.firstCustomerMessage && routesFirstMessage(agent)) {
    const routed = await routeEntry({
      entryAgent: agent,
      text: input.message.text,
      model: input.model,
      loadAgent: input.loadAgent,
      now: input.now,
    })
    pathEntries.push(...routed.pathEntries)
    usage.push(...routed.usage)
    routing = routed.routing
    if (routed.failure !== undefined) {
      const { agentId, reason } = routed.failure
      recordError('MODEL_UNAVAILABLE', `the routing model failed: ${reason}`.slice(0, 500), agentId)
    }
    agent = routed.agent
    historyWindow = agent.handoff.messageHistoryDepth
    if (agent.kind === 'human') {
      if (input.humanTransferSupported) {
        humanTransfer = resolveHumanTransferTarget({ human: agent })
      } else {
        recordError(
          'HUMAN_TRANSFER_UNSUPPORTED',
          'this channel cannot transfer the conversation to a human',
          agent.id,
        )
      }
    }
  }

  // Optional fields set when present rather than spread in: each spread, of an empty object too,
  // is a property copy of its own, and every turn ends here.
  const finish = (): TurnOutcome => {
    const outcome: { -readonly [Key in keyof TurnOutcome]: TurnOutcome[Key] } = {
      activeAgentId: agent.id,
      pathEntries,
      facts: newFacts,
      journey: newJourney,
      errors,
      outgoing,
      rejectedHandoffs,
      usage,
    }
    if (routing !== undefined) outcome.routing = routing
    if (humanTransfer !== undefined) outcome.humanTransfer = humanTransfer
    return outcome
  }

  if (agent.kind === 'human') return finish()

  let modelCalls = 0
  let handoffs = 0

  agentLoop: for (;;) {
    const tools = namesTargets(agent) ? await toolsNamingTargets(input, agent) : input.tools.definitions()
    const passages = await input.knowledge.search({
      companyId: input.companyId,
      agentId: agent.id,
      query: input.message.text,
      limit: KNOWLEDGE_PASSAGES,
    })
    const history = input.priorMessages.slice(Math.max(0, input.priorMessages.length - historyWindow))
    const base: ModelMessage[] = [
      { role: 'system', content: buildSystemPrompt(agent, context, passages) },
      ...historyMessages(history),
      { role: 'user', content: input.message.text },
    ]
    const toolTraffic: ModelMessage[] = []

    for (;;) {
      if (modelCalls >= MAX_MODEL_CALLS_PER_MESSAGE) {
        recordError(
          'TOOL_LOOP_LIMIT',
          `no reply after ${MAX_MODEL_CALLS_PER_MESSAGE} model calls for one customer message`,
          agent.id,
        )
        return finish()
      }
      modelCalls += 1

      let completion: Completion
      try {
        completion = checkedCompletion(
          await input.model.complete({
            model: agent.llmModel,
            messages: toolTraffic.length === 0 ? base : [...base, ...toolTraffic],
            tools,
            knowledge: passages,
            agentId: agent.id,
          }),
        )
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error)
        recordError('MODEL_UNAVAILABLE', `the model failed: ${reason}`.slice(0, 500), agent.id)
        if (agent.fallbackReply !== null)
          outgoing.push({ role: 'agent', text: agent.fallbackReply, agentId: agent.id })
        return finish()
      }
      usage.push({ agentId: agent.id, model: agent.llmModel, usage: completion.usage })

      if (completion.toolCalls.length === 0) {
        if (completion.text.trim() !== '')
          outgoing.push({ role: 'agent', text: completion.text, agentId: agent.id })
        return finish()
      }

      toolTraffic.push({ role: 'assistant', content: completion.text, toolCalls: completion.toolCalls })
      for (const call of completion.toolCalls) {
        if (call.name === SAVE_FACT) {
          const parsed = parseToolArguments(saveFactArguments, call.arguments)
          if (!parsed.ok) {
            toolTraffic.push(toolResult(call, `Error: ${parsed.error}`))
            continue
          }
          context = withFact(context, parsed.value.key, parsed.value.value)
          // A computed key defines the property, so a key like `__proto__` is a fact like any other
          // (an assignment would call Object.prototype's setter and drop it).
          newFacts = { ...newFacts, [parsed.value.key]: parsed.value.value }
          toolTraffic.push(toolResult(call, 'saved'))
        } else if (call.name === APPEND_JOURNEY) {
          const parsed = parseToolArguments(appendJourneyArguments, call.arguments)
          if (!parsed.ok) {
            toolTraffic.push(toolResult(call, `Error: ${parsed.error}`))
            continue
          }
          context = withJourneyStep(context, parsed.value.step, input.now())
          newJourney.push(context.journey[context.journey.length - 1]!)
          toolTraffic.push(toolResult(call, 'appended'))
        } else if (call.name === HANDOFF_TO_AGENT) {
          const parsed = parseToolArguments(handoffArguments, call.arguments)
          if (!parsed.ok) {
            toolTraffic.push(toolResult(call, `Error: ${parsed.error}`))
            continue
          }
          const { targetAgentId, reason } = parsed.value
          const target = agent.handoff.allowedTargets.includes(targetAgentId)
            ? await input.loadAgent(targetAgentId)
            : null
          const decision = decideHandoff({
            caller: agent,
            targetAgentId,
            target,
            handoffsSoFar: handoffs,
            humanTransferSupported: input.humanTransferSupported,
          })
          if (decision.kind === 'rejected') {
            recordError(decision.code, decision.message, agent.id)
            rejectedHandoffs.push({
              agentId: agent.id,
              targetAgentId,
              code: decision.code,
              message: decision.message,
            })
            toolTraffic.push(toolResult(call, `Error: handoff rejected: ${decision.message}`))
            continue
          }
          handoffs += 1
          const announcement = handoffAnnouncement(agent)
          if (announcement !== null) outgoing.push({ role: 'system', text: announcement, agentId: agent.id })
          pathEntries.push(pathEntry(decision.target, 'handoff_tool', input.now(), { reason }))
          const caller = agent
          agent = decision.target
          if (decision.kind === 'human') {
            humanTransfer = resolveHumanTransferTarget({ human: decision.target, caller })
            return finish()
          }
          // The receiving agent sees the caller's window and answers the same customer message.
          historyWindow = caller.handoff.messageHistoryDepth
          continue agentLoop
        } else {
          toolTraffic.push(toolResult(call, await runAppTool(input, agent, context, call)))
        }
      }
    }
  }
}

const namesTargets = (agent: Agent): boolean =>
  agent.handoff.enabled && agent.handoff.allowedTargets.length > 0

/**
 * The tools of the model calls of an agent with handoff targets: they are named in the handoff
 * tool, but for itself and, on a channel that cannot transfer to a human, human agents, as a
 * handoff to those is rejected. The agent loader reads each once per job, so a handoff to one
 * reads it no more.
 */
async function toolsNamingTargets(input: TurnInput, agent: Agent): Promise<readonly ToolDefinition[]> {
  const loaded = await Promise.all(agent.handoff.allowedTargets.map((id) => input.loadAgent(id)))
  const targets = loaded.filter(
    (target): target is Agent =>
      target !== null && target.id !== agent.id && (target.kind !== 'human' || input.humanTransferSupported),
  )
  return withHandoffTargets(input.tools.definitions(), targets)
}

async function runAppTool(
  input: TurnInput,
  agent: Agent,
  context: SharedContext,
  call: ToolCall,
): Promise<string> {
  const prepared = input.tools.get(call.name)
  if (prepared === undefined) return `Error: there is no tool named "${call.name}"`
  const parsed = parseToolArguments(prepared.tool.parameters, call.arguments)
  if (!parsed.ok) return `Error: ${parsed.error}`
  try {
    const result = await prepared.tool.execute(parsed.value, {
      companyId: input.companyId,
      sessionId: input.sessionId,
      agentId: agent.id,
      facts: context.facts,
    })
    return stringify(result)
  } catch (error) {
    return `Error: the tool failed: ${error instanceof Error ? error.message : String(error)}`
  }
}
