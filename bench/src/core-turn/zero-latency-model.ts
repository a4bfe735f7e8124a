import type { Completion, CompletionRequest, LlmProvider } from '@switchboard/core'
import { REPLY_TEXT, SAVE_FACT_ARGUMENTS } from './scenario.js'

export interface ZeroLatencyModelOptions {
  /** The agent that saves a fact and then hands off (scenario B); every other agent replies. */
  readonly delegation?: { readonly fromAgentId: number; readonly toAgentId: number }
}

const usage = { inputTokens: 10, outputTokens: 5 }

/**
 * A model that answers at once, by agent id, from answers built once: it allocates nothing per
 * call, so what the bench measures is the runtime around it. The scripted model of the testing
 * kit records every request, which would grow the heap and the time with every turn. The answers
 * are frozen so a runtime that mutated them would throw instead of skewing later turns.
 */
export function createZeroLatencyModel(options: ZeroLatencyModelOptions = {}): LlmProvider {
  const replying = Promise.resolve<Completion>(freeze({ text: REPLY_TEXT, toolCalls: [], usage }))
  const delegation = options.delegation
  const savingFact = Promise.resolve<Completion>(
    freeze({
      text: '',
      toolCalls: [{ id: 'call_save_fact', name: 'save_fact', arguments: SAVE_FACT_ARGUMENTS }],
      usage,
    }),
  )
  const handingOff = Promise.resolve<Completion>(
    freeze({
      text: '',
      toolCalls: [
        {
          id: 'call_handoff',
          name: 'handoff_to_agent',
          arguments: JSON.stringify({
            targetAgentId: delegation?.toAgentId ?? 0,
            reason: 'pricing question',
          }),
        },
      ],
      usage,
    }),
  )

  return {
    name: 'zero-latency',
    complete(request: CompletionRequest): Promise<Completion> {
      if (delegation === undefined || request.agentId !== delegation.fromAgentId) return replying
      // The first call of the delegating agent sees only the prompt; the second also sees the
      // result of its save_fact call, so the last message tells them apart without any state.
      const last = request.messages[request.messages.length - 1]
      return last?.role === 'tool' ? handingOff : savingFact
    },
  }
}

function freeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const entry of Object.values(value)) freeze(entry)
    Object.freeze(value)
  }
  return value
}
