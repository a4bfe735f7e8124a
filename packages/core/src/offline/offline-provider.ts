import { contentWords } from '../knowledge/text-words.js'
import type {
  Classification,
  ClassifyRequest,
  Completion,
  CompletionRequest,
  LlmProvider,
  ModelMessage,
} from '../ports/llm-provider.js'

export const OFFLINE_NO_KNOWLEDGE_REPLY = "I don't have information about that yet."

/** What a routing call answers when it cannot decide; the caller then falls back. */
const UNDECIDED_ROUTE_DECISION = JSON.stringify({ routeId: null, confidence: 0 })

/**
 * A provider that answers without a language model, so Switchboard runs with no API key: routing
 * by shared words, replies from the best knowledge passage (contract §10, "Offline provider").
 */
export function createOfflineProvider(): LlmProvider {
  return {
    name: 'offline',

    async classify(request: ClassifyRequest): Promise<Classification> {
      const messageWords = new Set(contentWords(request.text))
      let best: Classification = { routeId: null, confidence: 0 }
      for (const [position, route] of request.routes.entries()) {
        const confidence = shareFound(contentWords(route.description), messageWords)
        // Strictly greater, so a tie goes to the route listed first.
        if (position === 0 || confidence > best.confidence) best = { routeId: route.id, confidence }
      }
      return { ...best, usage: { inputTokens: 0, outputTokens: 0 } }
    },

    async complete(request: CompletionRequest): Promise<Completion> {
      request.signal?.throwIfAborted()
      const text =
        request.responseFormat !== undefined
          ? UNDECIDED_ROUTE_DECISION
          : (request.knowledge?.[0]?.text ?? OFFLINE_NO_KNOWLEDGE_REPLY)
      // Estimated like a model's tokens, so credits are metered the same way online and offline.
      return {
        text,
        toolCalls: [],
        usage: {
          inputTokens: estimateTokens(
            request.messages.reduce((sum, message) => sum + messageLength(message), 0),
          ),
          outputTokens: estimateTokens(text.length),
        },
      }
    },
  }
}

/** The share of the description's distinct words that the message contains. */
function shareFound(descriptionWords: readonly string[], messageWords: ReadonlySet<string>): number {
  const distinct = new Set(descriptionWords)
  if (distinct.size === 0) return 0
  let found = 0
  for (const word of distinct) if (messageWords.has(word)) found += 1
  return found / distinct.size
}

/** About four characters to a token, the usual rule of thumb for English text. */
function estimateTokens(characters: number): number {
  return Math.ceil(characters / 4)
}

function messageLength(message: ModelMessage): number {
  if (message.role !== 'assistant' || message.toolCalls === undefined) return message.content.length
  return message.toolCalls.reduce(
    (sum, call) => sum + call.name.length + call.arguments.length,
    message.content.length,
  )
}
