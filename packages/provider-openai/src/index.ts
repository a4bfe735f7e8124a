export type { OpenAiProviderOptions } from './create-openai-provider.js'
export { createOpenAiProvider, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS } from './create-openai-provider.js'
