/** A message of the conversation sent to a model, in the chat-completions shape. */
export type ModelMessage =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCalls?: readonly ToolCall[] }
  | { readonly role: 'tool'; readonly toolCallId: string; readonly content: string }

export interface ToolCall {
  readonly id: string
  readonly name: string
  /** The raw JSON text the model produced; it may be malformed. */
  readonly arguments: string
}

export interface ToolDefinition {
  readonly name: string
  readonly description: string
  /** JSON Schema of the arguments object. */
  readonly parameters: Readonly<Record<string, unknown>>
}

export interface ResponseFormat {
  readonly type: 'json_schema'
  readonly jsonSchema: { readonly name: string; readonly schema: Readonly<Record<string, unknown>> }
}

export interface KnowledgePassage {
  readonly documentId: string
  readonly text: string
  readonly score: number
}

export interface CompletionRequest {
  readonly model: string
  readonly messages: readonly ModelMessage[]
  readonly tools?: readonly ToolDefinition[]
  readonly responseFormat?: ResponseFormat
  /**
   * The passages already rendered into the system prompt, best first, for providers that
   * answer without a language model (the offline provider). Others ignore it.
   */
  readonly knowledge?: readonly KnowledgePassage[]
  /** The agent the call is made for; informational (scripted models key on it). */
  readonly agentId?: number
  readonly signal?: AbortSignal
}

export interface TokenUsage {
  readonly inputTokens: number
  readonly outputTokens: number
}

export interface Completion {
  readonly text: string
  readonly toolCalls: readonly ToolCall[]
  readonly usage: TokenUsage
}

export interface ClassifyRequest {
  readonly model: string
  readonly text: string
  readonly routes: readonly { readonly id: string; readonly description: string }[]
  readonly agentId?: number
}

export interface Classification {
  readonly routeId: string | null
  readonly confidence: number
  readonly usage?: TokenUsage
}

/**
 * A language model. `complete` throws when the model cannot answer after the provider's own
 * retries; core turns that into `MODEL_UNAVAILABLE`. A provider that classifies without a model
 * call (the offline one) implements `classify`; others get a `route_decision` json_schema call.
 */
export interface LlmProvider {
  readonly name: string
  complete(request: CompletionRequest): Promise<Completion>
  classify?(request: ClassifyRequest): Promise<Classification>
}

export function supportsClassify(
  provider: LlmProvider,
): provider is LlmProvider & Required<Pick<LlmProvider, 'classify'>> {
  return typeof provider.classify === 'function'
}
