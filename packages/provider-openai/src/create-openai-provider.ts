import { type Completion, type CompletionRequest, ConfigError, type LlmProvider } from '@switchboard/core'
import { OpenAI } from 'openai'
import { toChatCompletionRequest } from './chat-completion-request.js'
import { fromChatCompletion } from './chat-completion-result.js'

/** How long each attempt may take by default, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 30_000
/** Attempts after the first, on 429 and 5xx, by default. */
export const DEFAULT_MAX_RETRIES = 2
/**
 * The longest wait between attempts a server may ask for (`retry-after`, `retry-after-ms`). The
 * openai package honours any wait; one of an hour would hold the session's turn, and every
 * message after it, that long. Asked for more, the package's own backoff applies instead.
 */
const MAX_RETRY_AFTER_MS = 10_000

interface AttemptOptions {
  /** How long one attempt may take, in milliseconds. Default 30 s. */
  readonly timeoutMs?: number
  /**
   * Attempts after the first, on 429, 5xx (and 408, 409, timeouts and lost connections), waiting
   * as the server's `retry-after(-ms)` says or with exponential backoff. Default 2.
   */
  readonly maxRetries?: number
}

interface ConnectionOptions {
  readonly apiKey: string
  /**
   * Any OpenAI-compatible server, e.g. `http://localhost:11434/v1`. Default: `OPENAI_BASE_URL`,
   * else OpenAI's API, as the openai package decides.
   */
  readonly baseURL?: string | undefined
  readonly client?: undefined
}

interface ClientOptions {
  /**
   * A client you built yourself (a proxy, custom headers, Azure); timeout and retries still apply
   * per call. Its waits between retries are its own, and so is the time an answer's body may take
   * after its headers: give it a `fetch` with bounds if you need them.
   */
  readonly client: OpenAI
  readonly apiKey?: undefined
  readonly baseURL?: undefined
}

export type OpenAiProviderOptions = AttemptOptions & (ConnectionOptions | ClientOptions)

/**
 * Core's `LlmProvider` on OpenAI's chat completions (or any compatible server). It has no
 * `classify`: core routes with a `route_decision` json_schema completion on the routing model.
 * A call that still fails after the retries rejects, and core records `MODEL_UNAVAILABLE`.
 */
export function createOpenAiProvider(options: OpenAiProviderOptions): LlmProvider {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES
  if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
    throw new ConfigError(`timeoutMs must be a positive whole number of milliseconds, got ${timeoutMs}`)
  }
  if (!Number.isInteger(maxRetries) || maxRetries < 0) {
    throw new ConfigError(`maxRetries must be a whole number of at least 0, got ${maxRetries}`)
  }
  const client = options.client ?? createClient(options, timeoutMs, maxRetries)

  return {
    name: 'openai',
    async complete(request: CompletionRequest): Promise<Completion> {
      const completion = await client.chat.completions.create(toChatCompletionRequest(request), {
        timeout: timeoutMs,
        maxRetries,
        ...(request.signal === undefined ? {} : { signal: request.signal }),
      })
      return fromChatCompletion(completion)
    },
  }
}

function createClient(options: ConnectionOptions, timeoutMs: number, maxRetries: number): OpenAI {
  if (typeof options.apiKey !== 'string' || options.apiKey.trim() === '') {
    throw new ConfigError('createOpenAiProvider needs an apiKey (or a client of your own)')
  }
  return new OpenAI({
    apiKey: options.apiKey,
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
    timeout: timeoutMs,
    maxRetries,
    fetch: boundedFetch(timeoutMs),
  })
}

/**
 * `fetch` for one attempt, bounded as a whole. The openai package's timeout ends with the answer's
 * headers: a server that sends them and then stalls would hold the session's turn, and every
 * message after it, for ever. The body is read here, within `timeoutMs` of the attempt's start, so
 * a stall is a timed-out attempt, retried like one. A `retry-after(-ms)` asking for more than
 * MAX_RETRY_AFTER_MS is taken off the answer.
 */
function boundedFetch(timeoutMs: number) {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const attempt = new AbortController()
    const timer = setTimeout(() => attempt.abort(), timeoutMs)
    const signal = init?.signal ? AbortSignal.any([init.signal, attempt.signal]) : attempt.signal
    try {
      const response = await fetch(input, { ...init, signal })
      const body = response.body === null ? null : await response.arrayBuffer()
      const headers = new Headers(response.headers)
      if (asksForLongWait(headers)) {
        headers.delete('retry-after')
        headers.delete('retry-after-ms')
      }
      return new Response(body, { status: response.status, statusText: response.statusText, headers })
    } finally {
      clearTimeout(timer)
    }
  }
}

function asksForLongWait(headers: Headers): boolean {
  const milliseconds = headers.get('retry-after-ms')
  if (milliseconds !== null && Number.parseFloat(milliseconds) > MAX_RETRY_AFTER_MS) return true
  const after = headers.get('retry-after')
  if (after === null) return false
  const seconds = Number.parseFloat(after)
  const wait = Number.isNaN(seconds) ? Date.parse(after) - Date.now() : seconds * 1000
  return wait > MAX_RETRY_AFTER_MS
}
