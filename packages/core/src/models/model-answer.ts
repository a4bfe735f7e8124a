import type { Completion, TokenUsage, ToolCall } from '../ports/llm-provider.js'

/**
 * The most tokens of each kind one model call is charged for: beyond any model's window, so an
 * honest count is never cut, while a server reporting 1e300 cannot sink a company's balance.
 */
export const MAX_TOKENS_PER_CALL = 10_000_000

/** A provider's answer that breaks the `Completion` contract: the call counts as failed. */
class MalformedModelAnswer extends Error {
  override readonly name = 'MalformedModelAnswer'
}

function isTokenCount(value: unknown): value is number {
  return (
    typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= MAX_TOKENS_PER_CALL
  )
}

/** A reported count as one to charge: whole, at least 0, at most the cap; nothing for garbage. */
function tokenCount(value: unknown): number {
  if (isTokenCount(value)) return value
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return 0
  return Math.min(Math.round(value), MAX_TOKENS_PER_CALL)
}

/**
 * Usage as a model reported it, made safe to charge: a server may send negative, fractional,
 * huge or missing counts, and a negative one would otherwise credit the company.
 */
export function chargeableUsage(usage: TokenUsage | undefined): TokenUsage {
  if (usage !== undefined && isTokenCount(usage.inputTokens) && isTokenCount(usage.outputTokens)) return usage
  return { inputTokens: tokenCount(usage?.inputTokens), outputTokens: tokenCount(usage?.outputTokens) }
}

function isToolCall(call: unknown): call is ToolCall {
  if (typeof call !== 'object' || call === null) return false
  const { id, name, arguments: args } = call as Record<string, unknown>
  return typeof id === 'string' && typeof name === 'string' && typeof args === 'string'
}

/**
 * A provider's answer checked at the edge of core: text a string and tool calls well formed, or
 * `MalformedModelAnswer` (the caller treats it as a failed call), with usage made chargeable. The
 * answer itself comes back when it was fine, which it nearly always is.
 */
export function checkedCompletion(answer: Completion): Completion {
  const { text, toolCalls } = answer as { text: unknown; toolCalls: unknown }
  if (typeof text !== 'string') throw new MalformedModelAnswer(`the model answered with ${typeof text} text`)
  if (!Array.isArray(toolCalls) || !toolCalls.every(isToolCall)) {
    throw new MalformedModelAnswer('the model answered with malformed tool calls')
  }
  const usage = chargeableUsage(answer.usage)
  return usage === answer.usage ? answer : { ...answer, usage }
}
