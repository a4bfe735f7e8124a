import { DEFAULT_MODEL_PRICES, DEFAULT_UNKNOWN_MODEL_PRICE } from '../../src/billing/model-prices.js'
import type { AgentUpdate } from '../../src/domain/agent.js'
import type { ToolCall } from '../../src/ports/llm-provider.js'
import type { ScriptedStep } from '../../src/testing/index.js'
import type {
  AgentEdit,
  ClassifierAnswer,
  ConfidenceChoice,
  HandoffTarget,
  OperatorChoice,
  Round,
  Team,
  TeamAgent,
  TeamScript,
  TokenCount,
  ToolCallChoice,
  TopUp,
} from './team-script.js'

/**
 * What CONTRACT §4, §8, §9 and §10 say a team does with a customer's messages, written from their
 * words and not from the implementation: entry routing on the first message, then each message's
 * tool loop with its handoffs, budgets, announcements and transfers to a human, what an operator's
 * reassign, resume, message or agent edit changes for the messages after it, and what every call
 * costs, with agents silent once the company's credits are used up. It also
 * says what each model call is answered, so the scripted model can be given exactly the steps the
 * contract makes the runtime ask for.
 *
 * Where the words leave a choice, the reading taken (each one the implementation shares):
 * - `metadata.routing.depth` is the depth of the classification that ended the chain for
 *   `fallback` and `cycle` ("at depth 1 that is the session's entry agent"), the last hop's for
 *   `resolved` and `max_depth`;
 * - the history window counts the messages the history may hold (system messages are left out
 *   before counting);
 * - a handoff to the caller itself is rejected (the tool transfers "to another agent");
 * - a successful handoff ends the caller's turn there: calls after it in the same round do not run;
 * - the SCC is checked in the system prompt of each agent's first call for a message, where the
 *   contract says the new agent receives it, not again within one agent's tool loop.
 * Credits (§9 says when agents stop, not when the balance is looked at):
 * - the balance is read once per message, as its handling starts: a message that finds it above 0
 *   is handled to its end (routing, handoffs, tool calls within the budgets), every call charged,
 *   even past 0; the next message finds it used up;
 * - a message no agent would answer anyway (paused session, human active agent) records nothing;
 * - each message that finds the balance used up records one CREDITS_EXHAUSTED, with the active
 *   agent's id;
 * - entry routing belongs to the session's first customer message: when credits silenced that one,
 *   no later message of the session is routed;
 * - a call that failed reports no usage and costs nothing.
 * Left out of the scripts, as the contract does not say what they do: whitespace-only templates and
 * replies, confidences outside 0..1, a failing classifier, malformed handoff arguments, a human
 * entry agent; and after routing ends on a human, whether it pauses and transfers.
 */

/** CONTRACT §4: `fallbackReply` when not given. */
const DEFAULT_FALLBACK_REPLY = "Sorry, I can't answer right now. Please try again shortly."
/** CONTRACT §10. */
const MODEL_CALLS_PER_MESSAGE = 8
const HANDOFFS_PER_MESSAGE = 5
/** Spec, routing rule 2. */
const ROUTING_DEPTH_HARD_CAP = 5
export const APP_TOOL = 'lookup_order'
const UNKNOWN_TOOL = 'no_such_tool'
const TOOL_NAMES = ['append_journey', 'handoff_to_agent', APP_TOOL, 'save_fact'].sort()

export interface ExpectedPathEntry {
  readonly via: 'initial' | 'entry_routing' | 'handoff_tool' | 'manual'
  readonly agentId: number
  readonly agentName: string
  /** §8: when the transition was recorded. */
  readonly timestamp: string
  readonly role?: string
  readonly depth?: number
  readonly confidence?: number
  readonly routeId?: string
  readonly reason?: string
}

/** A message of a turn request after the system prompt, as the test compares it. */
export type ExpectedConversationMessage =
  | { readonly role: 'user' | 'assistant'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCallIds: readonly string[] }
  /** `handoffRejected` only on the results of handoff calls: each one seen is a rejection. */
  | { readonly role: 'tool'; readonly toolCallId: string; readonly handoffRejected?: true }

export type ExpectedRequest =
  | {
      readonly purpose: 'route'
      readonly agentId: number
      readonly model: string
      readonly format: 'route_decision'
      /** The customer message classified, as a user message of the request. */
      readonly classifies: string
    }
  | {
      readonly purpose: 'turn'
      readonly agentId: number
      readonly model: string
      readonly conversation: readonly ExpectedConversationMessage[]
      /** §10: the three built-in tools and the app's, by name. */
      readonly tools: readonly string[]
      /** The SCC in the system prompt; checked on an agent's first call of a message. */
      readonly sharedContext?: ExpectedSharedContext
    }

export interface ExpectedTransfer {
  readonly operatorId?: number
  readonly groupId?: number
  /** Only when a configuration named an operator or a group: the default queue's is not said. */
  readonly systemMessage?: boolean
  readonly sentBefore: number
  /** The index of the session transferred. */
  readonly session: number
}

/** The SCC's facts, and its journey's steps in order. */
export interface ExpectedSharedContext {
  readonly facts: Readonly<Record<string, string>>
  /** `<at> <step>`, as the prompt's journey lines show them. */
  readonly journey: readonly string[]
}

export interface ExpectedSession {
  readonly stored: readonly {
    readonly role: 'customer' | 'agent' | 'system' | 'operator'
    readonly text: string
    readonly agentId?: number
    readonly at: string
    /** Outgoing messages only: every one reaches the channel. */
    readonly delivery?: 'sent'
  }[]
  readonly agentPath: readonly ExpectedPathEntry[]
  readonly routing?: {
    readonly reason: 'resolved' | 'max_depth' | 'cycle' | 'fallback'
    readonly depth: number
    readonly at: string
  }
  readonly activeAgentId: number
  readonly errors: readonly { readonly code: string; readonly agentId: number; readonly at: string }[]
  readonly sharedContext: ExpectedSharedContext
  /**
   * Entry routing ended on a human agent. The contract says only that no agent then runs (§8);
   * whether routing transfers to the human queue (state, transfer call, an error on a channel
   * without transfer) it leaves open, so those are not compared then, and no operator acts on
   * the session but to close it.
   */
  readonly routedToHuman: boolean
  readonly state: 'ongoing' | 'paused' | 'closed'
  /** §8: a transfer call that failed still pauses, and its failure is the pause's reason. */
  readonly pauseReason?: 'names the transfer failure'
}

export interface ExpectedOutcome {
  readonly requests: readonly ExpectedRequest[]
  /** What the channel delivered, in order, whichever session it was for. */
  readonly sent: readonly { readonly role: 'agent' | 'system' | 'operator'; readonly text: string }[]
  readonly transfers: readonly ExpectedTransfer[]
  /**
   * §9: every model call that answered is charged, classifier calls included, at its model's
   * price: `<session> <model> <input tokens> <output tokens> <cost in USD>` for each, sorted (the
   * records of one turn share a time, so their order is not compared).
   */
  readonly usage: readonly string[]
  /** §9: the balance in USD after each customer message was handled, before its operator's turn. */
  readonly balances: readonly number[]
  /** §9: the balance in USD once the last message's operator and top-up are done. */
  readonly balance: number
  /** The customer's sessions, oldest first. */
  readonly sessions: readonly ExpectedSession[]
}

interface SessionModel {
  customerMessages: number
  stored: ExpectedSession['stored'][number][]
  agentPath: ExpectedPathEntry[]
  routing?: ExpectedSession['routing']
  /** The index of the active agent. */
  active: number
  errors: { code: string; agentId: number; at: string }[]
  facts: Record<string, string>
  journey: string[]
  routedToHuman: boolean
  state: 'ongoing' | 'paused' | 'closed'
  pausedByFailedTransfer: boolean
}

/** An operator's action for the runner to take through the session operations. */
export type OperatorAction =
  | { readonly kind: 'reassign'; readonly agentId: number; readonly operatorId?: number }
  | { readonly kind: 'resume'; readonly note?: string }
  | { readonly kind: 'operator-message'; readonly text: string }
  | { readonly kind: 'close' }
  /** A PATCH of the agent, in the agent service's words. */
  | { readonly kind: 'edit'; readonly agentId: number; readonly patch: AgentUpdate }

export interface OracleRun {
  readonly expected: ExpectedOutcome
  /** For each customer message, the model steps to script, in call order, by agent id. */
  readonly steps: readonly (readonly { readonly agentId: number; readonly step: ScriptedStep }[])[]
  readonly texts: readonly string[]
  /** For each customer message, what an operator does once it was answered. */
  readonly actions: readonly (OperatorAction | null)[]
  /** For each customer message, what is added to the balance after its operator's action, in USD. */
  readonly topUps: readonly (number | null)[]
}

export const customerText = (message: number): string => `customer message ${message}`

/**
 * The clock moves on a second before each customer message and before each operator's turn after
 * it: message `i` is handled at `start` + 2i + 1 seconds, its operator's action at + 2i + 2.
 */
export const CLOCK_STEP_MS = 1000

export function runOracle(team: Team, script: TeamScript, ids: readonly number[], start: Date): OracleRun {
  // Operators edit agents between messages: what the team is now.
  const agents: TeamAgent[] = [...team.agents]
  const idOf = (index: number) => ids[index]!
  const indexOf = (id: number) => ids.indexOf(id)
  const unknownId = Math.max(...ids) + 1000

  const requests: ExpectedRequest[] = []
  const sent: { role: 'agent' | 'system' | 'operator'; text: string }[] = []
  const transfers: ExpectedTransfer[] = []
  const usage: string[] = []
  const sessions: SessionModel[] = []
  const steps: { agentId: number; step: ScriptedStep }[][] = []
  const texts: string[] = []
  const actions: (OperatorAction | null)[] = []
  const classifierAnswers = [...script.classifier]
  const balances: number[] = []
  const topUps: (number | null)[] = []
  const enforceCredits = team.creditsNanos !== undefined
  let balanceNanos = team.creditsNanos ?? 0
  /**
   * Whether the next transfer call fails: the channel fails the first one when the team says so.
   * Unknown once routing may have made a call of its own (routing to a human, left open).
   */
  let transferFailure: boolean | 'unknown' = team.transferFails
  const snapshot = (index: number) => {
    const agent = agents[index]!
    return {
      agentId: idOf(index),
      agentName: agent.name,
      ...(agent.role === undefined ? {} : { role: agent.role }),
      timestamp: now,
    }
  }
  // The customer's session: a message after a close opens a new one (§6).
  const at = (step: number) => new Date(start.getTime() + step * CLOCK_STEP_MS).toISOString()
  let now = at(1)
  let session = openSession()

  for (const [messageIndex, message] of script.messages.entries()) {
    now = at(2 * messageIndex + 1)
    customerWrites(messageIndex, message.rounds)
    balances.push(usdOf(balanceNanos))
    now = at(2 * messageIndex + 2)
    actions.push(operate(message.operator, messageIndex))
    topUps.push(topUp(message.topUp))
  }

  return {
    expected: {
      requests,
      sent,
      transfers,
      usage: usage.sort(),
      balances,
      balance: usdOf(balanceNanos),
      sessions: sessions.map((model) => ({
        stored: model.stored,
        agentPath: model.agentPath,
        ...(model.routing === undefined ? {} : { routing: model.routing }),
        activeAgentId: idOf(model.active),
        errors: model.errors,
        sharedContext: { facts: model.facts, journey: model.journey },
        routedToHuman: model.routedToHuman,
        state: model.state,
        ...(model.state === 'paused' && model.pausedByFailedTransfer
          ? { pauseReason: 'names the transfer failure' as const }
          : {}),
      })),
    },
    steps,
    texts,
    actions,
    topUps,
  }

  function openSession(): SessionModel {
    const opened: SessionModel = {
      customerMessages: 0,
      stored: [],
      // Spec, agent path rule 1: the entry agent before any routing decision.
      agentPath: [{ via: 'initial', ...snapshot(0) }],
      active: 0,
      errors: [],
      facts: {},
      journey: [],
      routedToHuman: false,
      state: 'ongoing',
      pausedByFailedTransfer: false,
    }
    sessions.push(opened)
    return opened
  }

  function send(role: 'agent' | 'system' | 'operator', text: string, agentIndex: number): void {
    session.stored.push({
      role,
      text,
      ...(role === 'agent' ? { agentId: idOf(agentIndex) } : {}),
      at: now,
      delivery: 'sent',
    })
    sent.push({ role, text })
  }

  function recordError(code: string, agentIndex: number): void {
    session.errors.push({ code, agentId: idOf(agentIndex), at: now })
  }

  function customerWrites(messageIndex: number, rounds: readonly Round[]): void {
    if (session.state === 'closed') session = openSession()
    const text = customerText(messageIndex)
    texts.push(text)
    const messageSteps: { agentId: number; step: ScriptedStep }[] = []
    steps.push(messageSteps)
    // The history of this message's calls: what was stored before it, conversational and unblocked.
    const prior = session.stored.filter((storedMessage) => storedMessage.role !== 'system')
    session.stored.push({ role: 'customer', text, at: now })
    const first = session.customerMessages === 0
    session.customerMessages += 1
    // §8: while paused, or while the active agent is human, the message is stored and no agent runs.
    if (session.state === 'paused' || agents[session.active]!.kind === 'human') return
    // §9: at 0 or below, no agent replies, not even with a fallback, and the session says why.
    if (enforceCredits && balanceNanos <= 0) {
      recordError('CREDITS_EXHAUSTED', session.active)
      return
    }

    // §10: routing on the session's first customer message only.
    if (first && agents[0]!.routing?.enabled === true) {
      session.active = routeEntry(text, messageSteps)
      if (agents[session.active]!.kind === 'human') {
        session.routedToHuman = true
        if (team.humanTransfer && transferFailure === true) transferFailure = 'unknown'
        return
      }
    }
    answer(rounds, prior, text, messageIndex, messageSteps)
  }

  /** §9: every call that answered is priced by its model and charged, the classifier's included. */
  function charge(model: string): void {
    // The model's calls are numbered in the order it receives them, failed ones included.
    const tokens = script.tokens[(requests.length - 1) % script.tokens.length]!
    const cost = costNanos(model, tokens)
    balanceNanos -= cost
    usage.push(`${sessions.length - 1} ${model} ${tokens.inputTokens} ${tokens.outputTokens} ${usdOf(cost)}`)
  }

  /** An operator's change of the balance between messages; null when there is none. */
  function topUp(choice: TopUp | undefined): number | null {
    if (choice === undefined) return null
    const nanos = choice.kind === 'amount' ? choice.nanos : choice.balanceNanos - balanceNanos
    balanceNanos += nanos
    return usdOf(nanos)
  }

  /** §8: an operator's reassign, resume, message, close or agent edit; null when there is nothing to do. */
  function operate(choice: OperatorChoice, messageIndex: number): OperatorAction | null {
    if (choice.kind === 'none') return null
    if (choice.kind === 'close') {
      if (session.state === 'closed') return null
      session.state = 'closed'
      return { kind: 'close' }
    }
    // What routing to a human left (paused or not) is open: nothing else until the session closes,
    // not even an edit that could make the human agent an AI one.
    if (session.routedToHuman || session.state === 'closed') return null
    if (choice.kind === 'edit') return edit(choice.index % agents.length, choice.patch)
    switch (choice.kind) {
      case 'reassign': {
        const target = choice.index % agents.length
        const human = agents[target]!.kind === 'human'
        // Whether a paused session is transferred again is not said.
        if (human && session.state === 'paused') return null
        session.agentPath.push({ via: 'manual', ...snapshot(target) })
        session.active = target
        if (human) {
          // On a channel without human transfer the reassign pauses with no call (§8).
          if (team.humanTransfer) transferToHuman(reassignTransferTarget(choice.operatorId, agents[target]!))
          else session.pausedByFailedTransfer = false
          session.state = 'paused'
        }
        return {
          kind: 'reassign',
          agentId: idOf(target),
          ...(choice.operatorId === undefined ? {} : { operatorId: choice.operatorId }),
        }
      }
      case 'resume':
        if (session.state !== 'paused') return null
        session.state = 'ongoing'
        session.pausedByFailedTransfer = false
        if (choice.note !== undefined) session.journey.push(`${now} Operator note: ${choice.note}`)
        return { kind: 'resume', ...(choice.note === undefined ? {} : { note: choice.note }) }
      case 'operator-message': {
        const text = `operator writes after customer message ${messageIndex}`
        session.stored.push({ role: 'operator', text, at: now, delivery: 'sent' })
        sent.push({ role: 'operator', text })
        return { kind: 'operator-message', text }
      }
    }
  }

  function edit(index: number, patch: AgentEdit): OperatorAction {
    const { handoff, kind, ...rest } = patch
    const flat = index === 0 || kind === undefined ? rest : { ...rest, kind }
    const allowedTargets = handoff?.allowedTargets.filter((target) => target < agents.length) ?? []
    const current = agents[index]!
    agents[index] = {
      ...current,
      ...flat,
      ...(handoff === undefined ? {} : { handoff: { ...current.handoff, ...handoff, allowedTargets } }),
    }
    return {
      kind: 'edit',
      agentId: idOf(index),
      patch: {
        ...flat,
        ...(handoff === undefined
          ? {}
          : {
              handoff: {
                enabled: handoff.enabled,
                allowedTargets: allowedTargets.map(idOf),
                announceHandoff: handoff.announceHandoff,
                handoffMessageTemplate: handoff.template,
                messageHistoryDepth: handoff.messageHistoryDepth,
              },
            }),
      },
    }
  }

  /** The connector's transfer, after what was sent so far. */
  function transferToHuman(target: Omit<ExpectedTransfer, 'sentBefore' | 'session'>): void {
    session.pausedByFailedTransfer = transferFailure === true
    if (transferFailure === true) transferFailure = false
    transfers.push({ ...target, sentBefore: sent.length, session: sessions.length - 1 })
  }

  /**
   * §10 entry routing: classify on the entry agent and on every agent it leads to that routes too,
   * within the entry agent's min(maxDepth, 5). Routing hops have depth 1, 2, …; the classification
   * by the agent of hop n is at depth n + 1, so an unsure entry agent is a fallback at depth 1.
   */
  function routeEntry(text: string, messageSteps: { agentId: number; step: ScriptedStep }[]): number {
    const cap = Math.min(agents[0]!.maxDepth, ROUTING_DEPTH_HARD_CAP)
    const onPath = new Set<number>([0])
    let current = 0
    let hops = 0
    for (;;) {
      const config = agents[current]!.routing
      if (config === undefined || !config.enabled) {
        session.routing = { reason: 'resolved', depth: hops, at: now }
        return current
      }
      if (hops >= cap) {
        session.routing = { reason: 'max_depth', depth: hops, at: now }
        return current
      }
      const agent = agents[current]!
      requests.push({
        purpose: 'route',
        agentId: idOf(current),
        model: agent.routingModel ?? agent.llmModel,
        format: 'route_decision',
        classifies: text,
      })
      const answer: ClassifierAnswer = classifierAnswers.shift() ?? {
        kind: 'decision',
        route: { kind: 'null' },
        confidence: { kind: 'value', value: 0 },
      }
      charge(agent.routingModel ?? agent.llmModel)
      const decision = resolveClassifierAnswer(answer, config)
      messageSteps.push({ agentId: idOf(current), step: decision.step })
      const route =
        decision.routeId === null
          ? undefined
          : config.routes.find((candidate) => candidate.id === decision.routeId)
      if (decision.unparseable || route === undefined || decision.confidence < config.threshold) {
        session.routing = { reason: 'fallback', depth: hops + 1, at: now }
        return current
      }
      if (onPath.has(route.target)) {
        session.routing = { reason: 'cycle', depth: hops + 1, at: now }
        return current
      }
      hops += 1
      onPath.add(route.target)
      session.agentPath.push({
        via: 'entry_routing',
        ...snapshot(route.target),
        depth: hops,
        confidence: decision.confidence,
        routeId: route.id,
      })
      current = route.target
    }
  }

  /** §10 tool loop, handoffs and budgets for one customer message, starting with the active agent. */
  function answer(
    rounds: readonly Round[],
    prior: readonly { role: 'customer' | 'agent' | 'system' | 'operator'; text: string }[],
    text: string,
    messageIndex: number,
    messageSteps: { agentId: number; step: ScriptedStep }[],
  ): void {
    const pending = [...rounds]
    let calls = 0
    let handoffs = 0
    let historyWindow = agents[session.active]!.handoff.messageHistoryDepth
    let roundNumber = 0

    for (;;) {
      const history = prior.slice(Math.max(0, prior.length - historyWindow))
      const base: ExpectedConversationMessage[] = [
        ...history.map((entry) => ({
          role: entry.role === 'customer' ? ('user' as const) : ('assistant' as const),
          content: entry.text,
        })),
        { role: 'user', content: text },
      ]
      const toolTraffic: ExpectedConversationMessage[] = []
      let handedOffTo: number | null = null

      while (handedOffTo === null) {
        if (calls >= MODEL_CALLS_PER_MESSAGE) {
          recordError('TOOL_LOOP_LIMIT', session.active)
          return
        }
        calls += 1
        const agent = agents[session.active]!
        requests.push({
          purpose: 'turn',
          agentId: idOf(session.active),
          model: agent.llmModel,
          conversation: [...base, ...toolTraffic],
          tools: TOOL_NAMES,
          ...(toolTraffic.length === 0
            ? { sharedContext: { facts: { ...session.facts }, journey: [...session.journey] } }
            : {}),
        })
        const round: Round = pending.shift() ?? { kind: 'text', empty: false }
        const label = `m${messageIndex} r${roundNumber++}`
        if (round.kind !== 'fail') charge(agent.llmModel)
        if (round.kind === 'fail') {
          messageSteps.push({
            agentId: idOf(session.active),
            step: { kind: 'fail', message: `${label} fails` },
          })
          recordError('MODEL_UNAVAILABLE', session.active)
          const fallback = agent.fallbackReply === undefined ? DEFAULT_FALLBACK_REPLY : agent.fallbackReply
          if (fallback !== null) send('agent', fallback, session.active)
          return
        }
        if (round.kind === 'text') {
          const reply = round.empty ? '' : `${label}: agent ${session.active} answers`
          messageSteps.push({ agentId: idOf(session.active), step: { kind: 'reply', text: reply } })
          if (reply !== '') send('agent', reply, session.active)
          return
        }
        const roundText = round.withText ? `${label}: agent ${session.active} thinks aloud` : ''
        const toolCalls = round.calls.map((call, callIndex) =>
          toolCallOf(call, `${call.kind === 'handoff' ? 'h' : 't'}-${label}-c${callIndex}`, agent),
        )
        messageSteps.push({
          agentId: idOf(session.active),
          step: { kind: 'tool-calls', calls: toolCalls, text: roundText },
        })
        const results: ExpectedConversationMessage[] = []

        for (const [callIndex, call] of round.calls.entries()) {
          const toolCall = toolCalls[callIndex]!
          if (call.kind === 'save-fact') {
            session.facts = { ...session.facts, [call.key]: call.value }
            results.push({ role: 'tool', toolCallId: toolCall.id })
            continue
          }
          if (call.kind === 'append-journey') {
            session.journey.push(`${now} ${call.step}`)
            results.push({ role: 'tool', toolCallId: toolCall.id })
            continue
          }
          if (call.kind !== 'handoff') {
            results.push({ role: 'tool', toolCallId: toolCall.id })
            continue
          }
          const targetId = (JSON.parse(toolCall.arguments) as { targetAgentId: number }).targetAgentId
          const target = indexOf(targetId)
          const rejection = handoffRejection(agent, session.active, target, handoffs)
          if (rejection !== null) {
            // Spec, routing rule 3: rejected at runtime, the caller keeps the turn, an error is recorded.
            recordError(rejection, session.active)
            results.push({ role: 'tool', toolCallId: toolCall.id, handoffRejected: true })
            continue
          }
          handoffs += 1
          // §10: announced by the caller's configuration, stored as `system` and sent.
          if (agent.handoff.announceHandoff && agent.handoff.template !== '')
            send('system', agent.handoff.template, session.active)
          session.agentPath.push({
            via: 'handoff_tool',
            ...snapshot(target),
            ...(call.reason === undefined ? {} : { reason: call.reason }),
          })
          const caller = session.active
          session.active = target
          if (agents[target]!.kind === 'human') {
            // §8: active, on the path, the connector's transfer after the announcement, paused.
            transferToHuman(transferTarget(agents[caller]!, agents[target]!))
            session.state = 'paused'
            return
          }
          // §10: the caller's turn ends, the rest of its round included; the new agent answers
          // the same message with the caller's history window.
          historyWindow = agents[caller]!.handoff.messageHistoryDepth
          handedOffTo = target
          break
        }
        if (handedOffTo === null) {
          toolTraffic.push({
            role: 'assistant',
            content: roundText,
            toolCallIds: toolCalls.map((call) => call.id),
          })
          toolTraffic.push(...results)
        }
      }
    }
  }

  function toolCallOf(call: ToolCallChoice, id: string, caller: TeamAgent): ToolCall {
    switch (call.kind) {
      case 'handoff': {
        const targetAgentId = resolveTarget(call.target, caller)
        const args = call.reason === undefined ? { targetAgentId } : { targetAgentId, reason: call.reason }
        return { id, name: 'handoff_to_agent', arguments: JSON.stringify(args) }
      }
      case 'save-fact':
        return { id, name: 'save_fact', arguments: JSON.stringify({ key: call.key, value: call.value }) }
      case 'append-journey':
        return { id, name: 'append_journey', arguments: JSON.stringify({ step: call.step }) }
      case 'app-tool':
        return { id, name: APP_TOOL, arguments: JSON.stringify({ orderNumber: '123' }) }
      case 'unknown-tool':
        return { id, name: UNKNOWN_TOOL, arguments: '{}' }
    }
  }

  function resolveTarget(target: HandoffTarget, caller: TeamAgent): number {
    switch (target.kind) {
      case 'allowed': {
        const allowed = caller.handoff.allowedTargets
        return idOf(allowed.length === 0 ? 0 : allowed[target.index % allowed.length]!)
      }
      case 'agent':
        return idOf(target.index % agents.length)
      case 'unknown':
        return unknownId
    }
  }

  /**
   * Why a handoff is rejected, or null when it goes ahead: past 5 handoffs for this message
   * (§10), handoff off, a target outside allowedTargets (spec, routing rule 3), the caller itself
   * (the tool "transfers control of the session to another agent"), or a human target on a
   * channel without human transfer (§7).
   */
  function handoffRejection(caller: TeamAgent, callerIndex: number, target: number, handoffsSoFar: number) {
    if (handoffsSoFar >= HANDOFFS_PER_MESSAGE) return 'HANDOFF_NOT_ALLOWED'
    if (!caller.handoff.enabled) return 'HANDOFF_NOT_ALLOWED'
    if (target === -1 || !caller.handoff.allowedTargets.includes(target)) return 'HANDOFF_NOT_ALLOWED'
    if (target === callerIndex) return 'HANDOFF_NOT_ALLOWED'
    if (agents[target]!.kind === 'human' && !team.humanTransfer) return 'HUMAN_TRANSFER_UNSUPPORTED'
    return null
  }
}

/**
 * §9: "a table per model, a default for unknown models". The table's prices are USD per million
 * tokens, each a whole number of nano-dollars per token, so a call's cost is exact in nano-dollars
 * and the ledger (exact to 9 decimal places) needs no rounding.
 */
function costNanos(model: string, tokens: TokenCount): number {
  const price = Object.hasOwn(DEFAULT_MODEL_PRICES, model)
    ? DEFAULT_MODEL_PRICES[model]!
    : DEFAULT_UNKNOWN_MODEL_PRICE
  return (
    tokens.inputTokens * nanosPerToken(price.inputPerMillion) +
    tokens.outputTokens * nanosPerToken(price.outputPerMillion)
  )
}

function nanosPerToken(usdPerMillion: number): number {
  const nanos = Math.round(usdPerMillion * 1000)
  if (Math.abs(nanos - usdPerMillion * 1000) > 1e-6) {
    throw new Error(
      `team oracle: ${usdPerMillion} USD per million tokens is not whole nano-dollars per token`,
    )
  }
  return nanos
}

/**
 * Nano-dollars as USD: the double nearest the exact decimal (an integer divided by 1e9 rounds
 * once), which is what reading a NUMERIC amount back gives.
 */
const usdOf = (nanos: number): number => nanos / 1e9

/** §8: a reassign's operator (with a system message), else the human agent's own configuration. */
function reassignTransferTarget(
  operatorId: number | undefined,
  human: TeamAgent,
): Omit<ExpectedTransfer, 'sentBefore' | 'session'> {
  return operatorId === undefined ? transferTarget(human, human) : { operatorId, systemMessage: true }
}

/** §8: operator, group and system message as one set from the caller's, else the human's configuration. */
function transferTarget(
  caller: TeamAgent,
  human: TeamAgent,
): Omit<ExpectedTransfer, 'sentBefore' | 'session'> {
  for (const agent of [caller, human]) {
    const { operatorId, groupId, sendSystemMessage } = agent.handoff
    if (operatorId !== undefined || groupId !== undefined) {
      return {
        ...(operatorId === undefined ? {} : { operatorId }),
        ...(groupId === undefined ? {} : { groupId }),
        systemMessage: sendSystemMessage,
      }
    }
  }
  return {}
}

interface ResolvedDecision {
  readonly step: ScriptedStep
  readonly unparseable: boolean
  readonly routeId: string | null
  readonly confidence: number
}

function resolveClassifierAnswer(
  answer: ClassifierAnswer,
  config: NonNullable<TeamAgent['routing']>,
): ResolvedDecision {
  if (answer.kind === 'malformed') {
    return { step: { kind: 'raw', text: answer.text }, unparseable: true, routeId: null, confidence: 0 }
  }
  const routeId =
    answer.route.kind === 'null'
      ? null
      : answer.route.kind === 'unknown' || config.routes.length === 0
        ? 'no-such-route'
        : config.routes[answer.route.index % config.routes.length]!.id
  const confidence = resolveConfidence(answer.confidence, config.threshold)
  return { step: { kind: 'route', routeId, confidence }, unparseable: false, routeId, confidence }
}

/** Next to the threshold by the smallest step a double takes there, within 0..1. */
function resolveConfidence(choice: ConfidenceChoice, threshold: number): number {
  switch (choice.kind) {
    case 'at-threshold':
      return threshold
    case 'just-below':
      return threshold > 0 ? nextDouble(threshold, -1) : threshold
    case 'just-above':
      return threshold < 1 ? nextDouble(threshold, 1) : threshold
    case 'value':
      return choice.value
  }
}

function nextDouble(value: number, direction: 1 | -1): number {
  const view = new DataView(new ArrayBuffer(8))
  view.setFloat64(0, value)
  const bits = view.getBigUint64(0)
  // Positive doubles order like their bit patterns; 0 has no smaller positive neighbour.
  view.setBigUint64(0, direction === 1 ? bits + 1n : bits - 1n)
  return view.getFloat64(0)
}
