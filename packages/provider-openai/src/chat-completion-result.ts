import type { Completion, ToolCall } from '@switchboard/core'
import type { ChatCompletion } from 'openai/resources/chat/completions'

/**
 * The first choice as core's completion. Only function tool calls are kept: Switchboard declares
 * no other kind of tool, so any other call has nothing to run.
 */
export function fromChatCompletion(completion: ChatCompletion): Completion {
  const choice = completion.choices[0]
  if (choice === undefined) throw new Error('the model answered with no choice')
  const toolCalls: ToolCall[] = []
  for (const call of choice.message.tool_calls ?? []) {
    if (call.type === 'function') {
      toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments })
    }
  }
  return {
    text: choice.message.content ?? '',
    toolCalls,
    // Some OpenAI-compatible servers leave usage out; nothing used is then what is metered.
    usage: {
      inputTokens: completion.usage?.prompt_tokens ?? 0,
      outputTokens: completion.usage?.completion_tokens ?? 0,
    },
  }
}
