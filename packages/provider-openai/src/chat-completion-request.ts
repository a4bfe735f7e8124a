import type { CompletionRequest, ModelMessage, ResponseFormat, ToolDefinition } from '@switchboard/core'
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from 'openai/resources/chat/completions'
import type { ResponseFormatJSONSchema } from 'openai/resources/shared'

/** Core's request as a chat-completions body: the same conversation, only spelled the API's way. */
export function toChatCompletionRequest(request: CompletionRequest): ChatCompletionCreateParamsNonStreaming {
  const tools = request.tools ?? []
  return {
    model: request.model,
    messages: request.messages.map(toChatMessage),
    // The API rejects an empty `tools` array, and a request without tools must not mention them.
    ...(tools.length === 0 ? {} : { tools: tools.map(toFunctionTool) }),
    ...(request.responseFormat === undefined
      ? {}
      : { response_format: toJsonSchemaFormat(request.responseFormat) }),
  }
}

function toChatMessage(message: ModelMessage): ChatCompletionMessageParam {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content }
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content }
    case 'assistant': {
      const toolCalls = message.toolCalls ?? []
      // The API rejects an empty `tool_calls` array; a round with tool calls and no text carries
      // `content: null`, the shape the model itself produced.
      if (toolCalls.length === 0) return { role: 'assistant', content: message.content }
      return {
        role: 'assistant',
        content: message.content === '' ? null : message.content,
        tool_calls: toolCalls.map((call) => ({
          id: call.id,
          type: 'function' as const,
          function: { name: call.name, arguments: call.arguments },
        })),
      }
    }
  }
}

function toFunctionTool(tool: ToolDefinition): ChatCompletionFunctionTool {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: { ...tool.parameters } },
  }
}

function toJsonSchemaFormat(format: ResponseFormat): ResponseFormatJSONSchema {
  return {
    type: 'json_schema',
    json_schema: { name: format.jsonSchema.name, schema: { ...format.jsonSchema.schema } },
  }
}
