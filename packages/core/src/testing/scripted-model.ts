import type { Completion, CompletionRequest, LlmProvider, ToolCall } from '../ports/llm-provider.js'

/** One scripted answer of the model. */
export type ScriptedStep =
  | { readonly kind: 'reply'; readonly text: string }
  | { readonly kind: 'tool-calls'; readonly calls: readonly ToolCall[]; readonly text: string }
  | { readonly kind: 'route'; readonly routeId: string | null; readonly confidence: number }
  | { readonly kind: 'raw'; readonly text: string }
  | { readonly kind: 'fail'; readonly message: string }

export interface RecordedRequest extends CompletionRequest {
  /** 'route' for an entry-routing classification, 'turn' for an agent's own call. */
  readonly purpose: 'route' | 'turn'
}

export interface ScriptedModel extends LlmProvider {
  /** Queues steps for the calls made for `agentId`, in order. */
  script(agentId: number, ...steps: ScriptedStep[]): ScriptedModel
  /** Every request the model received, in order. */
  readonly requests: readonly RecordedRequest[]
  requestsFor(agentId: number, purpose?: 'route' | 'turn'): RecordedRequest[]
  /** What went wrong so far: each call that found no step, or a step of the wrong kind. */
  readonly problems: readonly string[]
  /** Throws if a call found no step, or steps are left over. */
  assertDone(): void
}

let nextCallId = 1

export const reply = (text: string): ScriptedStep => ({ kind: 'reply', text })
export const toolCall = (name: string, args: unknown, text = ''): ScriptedStep => ({
  kind: 'tool-calls',
  calls: [
    { id: `call_${nextCallId++}`, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
  ],
  text,
})
export const toolCalls = (...calls: { name: string; args: unknown }[]): ScriptedStep => ({
  kind: 'tool-calls',
  calls: calls.map((call) => ({
    id: `call_${nextCallId++}`,
    name: call.name,
    arguments: typeof call.args === 'string' ? call.args : JSON.stringify(call.args),
  })),
  text: '',
})
export const handoff = (targetAgentId: number, reason?: string): ScriptedStep =>
  toolCall('handoff_to_agent', reason === undefined ? { targetAgentId } : { targetAgentId, reason })
export const route = (routeId: string | null, confidence: number): ScriptedStep => ({
  kind: 'route',
  routeId,
  confidence,
})
/** Content the routing call returns verbatim, e.g. something unparseable. */
export const rawRoute = (text: string): ScriptedStep => ({ kind: 'raw', text })
export const fail = (message = 'scripted model failure'): ScriptedStep => ({ kind: 'fail', message })

const usage = { inputTokens: 10, outputTokens: 5 }

/**
 * A model that answers from a script, per agent, and records every request. A call with no step
 * left, or the wrong kind of step, fails loudly: the turn sees an error, the problem is kept in
 * `problems` (the conversation harness fails the customer's call with it), and `assertDone` throws.
 */
export function createScriptedModel(): ScriptedModel {
  const queues = new Map<number, ScriptedStep[]>()
  const requests: RecordedRequest[] = []
  const problems: string[] = []

  const model: ScriptedModel = {
    name: 'scripted',
    requests,
    problems,
    script(agentId, ...steps) {
      const queue = queues.get(agentId) ?? []
      queue.push(...steps)
      queues.set(agentId, queue)
      return model
    },
    requestsFor: (agentId, purpose) =>
      requests.filter(
        (request) => request.agentId === agentId && (purpose === undefined || request.purpose === purpose),
      ),
    async complete(request): Promise<Completion> {
      const purpose = request.responseFormat === undefined ? 'turn' : 'route'
      requests.push({ ...request, purpose })
      const agentId = request.agentId ?? -1
      const step = queues.get(agentId)?.shift()
      const unexpected = (what: string) => {
        // The agent's own count finds the step in its script; the model's, the request in `requests`.
        const own = requests.filter(
          (made) => made.agentId === request.agentId && made.purpose === purpose,
        ).length
        const problem = `scripted model: ${what} for agent ${agentId} (its ${purpose} call #${own}, the model's request #${requests.length})`
        problems.push(problem)
        return new Error(problem)
      }
      if (step === undefined) throw unexpected('no step scripted')
      if (purpose === 'route' && step.kind !== 'route' && step.kind !== 'raw' && step.kind !== 'fail') {
        throw unexpected(`a ${step.kind} step met a routing call`)
      }
      if (purpose === 'turn' && (step.kind === 'route' || step.kind === 'raw')) {
        throw unexpected('a route step met an agent turn')
      }
      switch (step.kind) {
        case 'fail':
          throw new Error(step.message)
        case 'reply':
          return { text: step.text, toolCalls: [], usage }
        case 'tool-calls':
          return { text: step.text, toolCalls: step.calls, usage }
        case 'route':
          return {
            text: JSON.stringify({ routeId: step.routeId, confidence: step.confidence }),
            toolCalls: [],
            usage,
          }
        case 'raw':
          return { text: step.text, toolCalls: [], usage }
      }
    },
    assertDone() {
      const leftover = [...queues.entries()].filter(([, steps]) => steps.length > 0)
      const messages = [
        ...problems,
        ...leftover.map(
          ([agentId, steps]) => `scripted model: ${steps.length} step(s) left for agent ${agentId}`,
        ),
      ]
      if (messages.length > 0) throw new Error(messages.join('\n'))
    },
  }
  return model
}
