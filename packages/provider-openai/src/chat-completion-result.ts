import type { Completion, ToolCall } from '@switchboard/core'
import type { ChatCompletion } from 'openai/resources/chat/completions'

/**
 * The first choice as core's completion. Only function tool calls are kept: Switchboard declares
 * no other kind of tool, so any other call has nothing to run. A call without a `type` (or a null
 * one), as some compatible servers (vLLM, Ollama) send, is a function call all the same.
 */
export function fromChatCompletion(completion: ChatCompletion): Completion {
  // Checked by core as it receives it (text, tool calls, usage): this only maps the shape.
  const choice = (completion.choices as ChatCompletion['choices'] | undefined)?.[0]
  if (choice === undefined) throw new Error(`the model answered with no choice${serverSaid(completion)}`)
  if ((choice.message as typeof choice.message | undefined) === undefined) {
    throw new Error('the model answered with no message')
  }
  const toolCalls: ToolCall[] = []
  for (const call of choice.message.tool_calls ?? []) {
    const type: unknown = call.type
    if ('function' in call && (type === 'function' || type === undefined || type === null)) {
      toolCalls.push({ id: call.id, name: call.function.name, arguments: call.function.arguments })
    }
  }
  return {
    text: textOf(choice.message.content as unknown) as string,
    toolCalls,
    // Some OpenAI-compatible servers leave usage out; nothing used is then what is metered.
    usage: {
      inputTokens: completion.usage?.prompt_tokens ?? 0,
      outputTokens: completion.usage?.completion_tokens ?? 0,
    },
  }
}

/**
 * The message's text. OpenAI sends a string or null; some compatible servers send an array of
 * parts, whose text parts make the text. Anything else is handed on for core to refuse.
 */
function textOf(content: unknown): unknown {
  if (content === null || content === undefined) return ''
  if (!Array.isArray(content)) return content
  let text = ''
  for (const part of content) {
    if (typeof part !== 'object' || part === null) return content
    const { type, text: partText } = part as { type?: unknown; text?: unknown }
    if (type === 'text' && typeof partText === 'string') text += partText
  }
  return text
}

/** What a compatible server that answers an error with a 200 said, as ` (message)`, or nothing. */
function serverSaid(completion: unknown): string {
  const error = (completion as { error?: { message?: unknown } } | null)?.error
  const message = typeof error?.message === 'string' ? error.message.slice(0, 300) : ''
  return message === '' ? '' : ` (${message})`
}
