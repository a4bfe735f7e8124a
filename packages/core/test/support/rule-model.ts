import type { Completion, CompletionRequest, LlmProvider } from '../../src/ports/llm-provider.js'

/** What a customer message asks of the rule model; it is the word after the message's number. */
export type MessageTag = 'plain' | 'fact' | 'quiet' | 'toA' | 'toB' | 'human' | 'fail'

export const MESSAGE_TAGS: readonly MessageTag[] = ['plain', 'fact', 'quiet', 'toA', 'toB', 'human', 'fail']

/** `m<number> <tag>`: every message of a run has its own number, so its text names it. */
export function messageText(number: number, tag: MessageTag): string {
  return `m${number} ${tag}`
}

export function parseMessageText(text: string): { number: number; tag: MessageTag } | null {
  const match = /^m(\d+) (\w+)$/.exec(text)
  if (match === null || !MESSAGE_TAGS.includes(match[2] as MessageTag)) return null
  return { number: Number(match[1]), tag: match[2] as MessageTag }
}

export const replyTo = (text: string): string => `reply to ${text}`
export const factKey = (number: number): string => `k${number}`
export const factValue = (number: number): string => `v${number}`
/** The handoff tool's `reason`: the path entry it leaves names the message that caused it. */
export const handoffReason = (number: number): string => `m${number}`
/** Why the model fails for a `fail` message: the session's error names the message. */
export const failure = (number: number): string => `no answer for m${number}`

export interface RuleModelCall {
  readonly agentId: number
  readonly text: string
  /** How many tool results the call saw: 0 for an agent's first call on a message. */
  readonly step: number
  /** The history before the message: how many messages, and the customer's among them. */
  readonly historyLength: number
  readonly customerHistory: readonly string[]
}

export interface RuleModel extends LlmProvider {
  readonly calls: readonly RuleModelCall[]
  /** Calls the rules did not expect: the same step asked twice, or a message they cannot read. */
  readonly problems: readonly string[]
}

export interface RuleModelOptions {
  /** The AI agents `toA` and `toB` messages send the conversation to. */
  readonly aiAgents: { readonly A: number; readonly B: number }
  /** The human agent a `human` message transfers to. */
  readonly humanAgent: number
  /** Holds an answer back until the test lets it go (a scheduler), so turns overlap other work. */
  readonly hold?: (label: string) => Promise<unknown>
}

const usage = { inputTokens: 1, outputTokens: 1 }
const answer = (text: string): Completion => ({ text, toolCalls: [], usage })
let nextCallId = 1
const callTool = (name: string, args: unknown): Completion => ({
  text: '',
  toolCalls: [{ id: `rule_${nextCallId++}`, name, arguments: JSON.stringify(args) }],
  usage,
})

/**
 * A model that answers by rule rather than by script, so any sequence of messages gets an answer:
 * `plain` is answered `reply to <text>`, `fact` saves a fact first, `quiet` answers nothing,
 * `toA` and `toB` hand the conversation to that AI agent (which then answers as to `plain`),
 * `human` hands it to the human agent, `fail` makes the call fail. The rules keep no state: a turn
 * redone after a process stopped gets the same answers.
 */
export function createRuleModel(options: RuleModelOptions): RuleModel {
  const calls: RuleModelCall[] = []
  const problems: string[] = []
  const seen = new Set<string>()

  const decide = (request: CompletionRequest): Completion | Error => {
    const agentId = request.agentId ?? -1
    const userIndex = lastIndexOf(request.messages, (message) => message.role === 'user')
    const text = userIndex === -1 ? '' : request.messages[userIndex]!.content
    const step = request.messages.slice(userIndex + 1).filter((message) => message.role === 'tool').length
    const history = request.messages.slice(1, Math.max(1, userIndex))
    calls.push({
      agentId,
      text,
      step,
      historyLength: history.length,
      customerHistory: history.filter((message) => message.role === 'user').map((message) => message.content),
    })
    const key = `${agentId}|${text}|${step}`
    if (seen.has(key)) problems.push(`agent ${agentId} was asked twice about "${text}" at step ${step}`)
    seen.add(key)
    const parsed = parseMessageText(text)
    if (parsed === null) {
      problems.push(`agent ${agentId} was asked about "${text}", which no rule reads`)
      return answer('')
    }
    if (step > 0) return answer(replyTo(text))
    switch (parsed.tag) {
      case 'plain':
        return answer(replyTo(text))
      case 'quiet':
        return answer('')
      case 'fact':
        return callTool('save_fact', { key: factKey(parsed.number), value: factValue(parsed.number) })
      case 'toA':
      case 'toB': {
        const target = parsed.tag === 'toA' ? options.aiAgents.A : options.aiAgents.B
        if (agentId === target) return answer(replyTo(text))
        return callTool('handoff_to_agent', { targetAgentId: target, reason: handoffReason(parsed.number) })
      }
      case 'human':
        return callTool('handoff_to_agent', {
          targetAgentId: options.humanAgent,
          reason: handoffReason(parsed.number),
        })
      case 'fail':
        return new Error(failure(parsed.number))
    }
  }

  return {
    name: 'rule-model',
    calls,
    problems,
    complete(request) {
      const completion = decide(request)
      const call = calls[calls.length - 1]!
      const held = options.hold?.(`model agent ${call.agentId} "${call.text}" step ${call.step}`)
      return Promise.resolve(held).then(() => {
        if (completion instanceof Error) throw completion
        return completion
      })
    },
  }
}

function lastIndexOf<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let index = items.length - 1; index >= 0; index -= 1) if (predicate(items[index]!)) return index
  return -1
}
