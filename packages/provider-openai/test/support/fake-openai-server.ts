import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions'

export interface FakeToolCall {
  /** Generated (`call_1`, `call_2`, …) when left out, so a repeated answer still has unique ids. */
  readonly id?: string
  readonly name: string
  /** Sent as given, so a test can send malformed JSON. */
  readonly arguments: string
  /** The call's `type`, `function` unless given; `null` sends null and `absent` leaves it out, as some compatible servers do. */
  readonly type?: string | null | 'absent'
}

export interface FakeUsage {
  readonly promptTokens: number
  readonly completionTokens: number
}

export type FakeAnswer =
  | {
      readonly kind: 'completion'
      /** Some compatible servers send content as an array of parts. */
      readonly content: string | null | readonly { readonly type: 'text'; readonly text: string }[]
      readonly toolCalls: readonly FakeToolCall[]
      /** `null` leaves `usage` out, as some compatible servers do. */
      readonly usage: FakeUsage | null
      readonly delayMs: number
    }
  | {
      /** A 200 whose body is sent as it is, for servers that answer in their own shape. */
      readonly kind: 'raw'
      readonly body: unknown
      readonly delayMs: number
    }
  | {
      /** A 200 whose headers and first bytes go out, then nothing more: a server stuck mid-answer. */
      readonly kind: 'stalled'
      readonly delayMs: number
    }
  | {
      readonly kind: 'error'
      readonly status: number
      readonly message: string
      /** Sent as `retry-after-ms`, so retries in tests wait milliseconds, not seconds; `null` sends none. */
      readonly retryAfterMs: number | null
      /** Sent as `retry-after`, in seconds, when set. */
      readonly retryAfterSeconds?: number
      readonly delayMs: number
    }

export type FakeAnswerSource = FakeAnswer | ((request: RecordedRequest, index: number) => FakeAnswer)

export interface RecordedRequest {
  readonly method: string
  /** The path as received, e.g. `/v1/chat/completions`. */
  readonly path: string
  readonly headers: IncomingHttpHeaders
  /** The JSON body as the client sent it. */
  readonly body: ChatCompletionCreateParamsNonStreaming
}

export interface FakeOpenAiServer {
  /** The base URL to give the client (`baseURL`, `OPENAI_BASE_URL`); it ends in `/v1`. */
  readonly url: string
  /** Every request received, answered or not, in arrival order. */
  readonly requests: readonly RecordedRequest[]
  /** Chat-completion requests that found no scripted answer; they were answered with a 400. */
  readonly unexpected: readonly RecordedRequest[]
  /** Answers for the next chat-completion requests, one each, in order. */
  enqueue(...answers: FakeAnswerSource[]): void
  /** What requests get once the queue is empty. Without it, they are unexpected. */
  otherwise(answer: FakeAnswerSource): void
  /** Forgets requests and scripted answers, for the next scenario on the same server. */
  reset(): void
  close(): Promise<void>
}

const DEFAULT_USAGE: FakeUsage = { promptTokens: 10, completionTokens: 5 }
const DEFAULT_RETRY_AFTER_MS = 5

/** A reply with text and no tool call. */
export function replyAnswer(
  content: Extract<FakeAnswer, { kind: 'completion' }>['content'],
  options: { usage?: FakeUsage | null; delayMs?: number } = {},
): FakeAnswer {
  return {
    kind: 'completion',
    content,
    toolCalls: [],
    usage: options.usage === undefined ? DEFAULT_USAGE : options.usage,
    delayMs: options.delayMs ?? 0,
  }
}

/** An assistant round that calls tools; `content` defaults to `null`, as models usually send. */
export function toolCallsAnswer(
  toolCalls: readonly FakeToolCall[],
  options: { content?: string | null; usage?: FakeUsage | null } = {},
): FakeAnswer {
  return {
    kind: 'completion',
    content: options.content ?? null,
    toolCalls,
    usage: options.usage === undefined ? DEFAULT_USAGE : options.usage,
    delayMs: 0,
  }
}

/** An API error in OpenAI's error shape, e.g. 429 or 500. */
export function errorAnswer(
  status: number,
  options: {
    message?: string
    retryAfterMs?: number | null
    retryAfterSeconds?: number
    delayMs?: number
  } = {},
): FakeAnswer {
  return {
    kind: 'error',
    status,
    message: options.message ?? `fake OpenAI server: scripted ${status}`,
    retryAfterMs: options.retryAfterMs === undefined ? DEFAULT_RETRY_AFTER_MS : options.retryAfterMs,
    ...(options.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: options.retryAfterSeconds }),
    delayMs: options.delayMs ?? 0,
  }
}

/** Headers and the start of a completion, then the server never finishes the body. */
export function stalledAnswer(): FakeAnswer {
  return { kind: 'stalled', delayMs: 0 }
}

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
}

/**
 * An OpenAI-compatible server on a real socket (port 0): it records what clients send to
 * `POST /v1/chat/completions` and answers with scripted completions, tool calls and errors. A
 * request nobody scripted gets a 400, which no client retries, and is kept in `unexpected`.
 */
export async function startFakeOpenAiServer(): Promise<FakeOpenAiServer> {
  const requests: RecordedRequest[] = []
  const unexpected: RecordedRequest[] = []
  const queue: FakeAnswerSource[] = []
  let fallback: FakeAnswerSource | null = null
  let completions = 0
  let toolCallIds = 0
  const timers = new Set<NodeJS.Timeout>()

  const send = (
    response: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) => {
    if (response.destroyed || response.writableEnded) return
    response.writeHead(status, { 'content-type': 'application/json', ...headers })
    response.end(JSON.stringify(body))
  }

  const answerWith = (response: ServerResponse, recorded: RecordedRequest, answer: FakeAnswer) => {
    const respond = () => {
      if (answer.kind === 'error') {
        send(
          response,
          answer.status,
          {
            error: {
              message: answer.message,
              type: ERROR_TYPES[answer.status] ?? 'server_error',
              param: null,
              code: null,
            },
          },
          {
            ...(answer.retryAfterMs === null ? {} : { 'retry-after-ms': String(answer.retryAfterMs) }),
            ...(answer.retryAfterSeconds === undefined
              ? {}
              : { 'retry-after': String(answer.retryAfterSeconds) }),
          },
        )
        return
      }
      if (answer.kind === 'stalled') {
        response.writeHead(200, { 'content-type': 'application/json' })
        response.write('{"id":"chatcmpl-stalled","object":"chat.completion","choices":[')
        return
      }
      if (answer.kind === 'raw') {
        send(response, 200, answer.body)
        return
      }
      completions += 1
      const toolCalls = answer.toolCalls.map((call) => ({
        id: call.id ?? `call_${++toolCallIds}`,
        ...(call.type === 'absent' ? {} : { type: call.type === undefined ? 'function' : call.type }),
        function: { name: call.name, arguments: call.arguments },
      }))
      send(response, 200, {
        id: `chatcmpl-fake-${completions}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: recorded.body.model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: answer.content,
              refusal: null,
              ...(toolCalls.length === 0 ? {} : { tool_calls: toolCalls }),
            },
            finish_reason: toolCalls.length === 0 ? 'stop' : 'tool_calls',
            logprobs: null,
          },
        ],
        ...(answer.usage === null
          ? {}
          : {
              usage: {
                prompt_tokens: answer.usage.promptTokens,
                completion_tokens: answer.usage.completionTokens,
                total_tokens: answer.usage.promptTokens + answer.usage.completionTokens,
              },
            }),
      })
    }
    if (answer.delayMs === 0) return respond()
    const timer = setTimeout(() => {
      timers.delete(timer)
      respond()
    }, answer.delayMs)
    timers.add(timer)
  }

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of request) chunks.push(chunk as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    let body: unknown = null
    try {
      body = raw === '' ? null : JSON.parse(raw)
    } catch {
      // Kept as null: the test sees the request, and the client gets a 400 below.
    }
    const recorded: RecordedRequest = {
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers,
      body: body as ChatCompletionCreateParamsNonStreaming,
    }
    const index = requests.length
    requests.push(recorded)

    if (request.method !== 'POST' || recorded.path.split('?')[0] !== '/v1/chat/completions') {
      send(response, 404, {
        error: { message: 'fake OpenAI server: unknown route', type: 'not_found_error' },
      })
      return
    }
    if (body === null || typeof body !== 'object') {
      send(response, 400, {
        error: { message: 'fake OpenAI server: the body is not JSON', type: 'invalid_request_error' },
      })
      return
    }
    const source = queue.shift() ?? fallback
    if (source === null) {
      unexpected.push(recorded)
      send(response, 400, {
        error: {
          message: `fake OpenAI server: no answer scripted for request ${index + 1}`,
          type: 'invalid_request_error',
        },
      })
      return
    }
    answerWith(response, recorded, typeof source === 'function' ? source(recorded, index) : source)
  }

  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      send(response, 500, { error: { message: 'fake OpenAI server failed', type: 'server_error' } })
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    unexpected,
    enqueue(...answers) {
      queue.push(...answers)
    },
    otherwise(answer) {
      fallback = answer
    },
    reset() {
      requests.length = 0
      unexpected.length = 0
      queue.length = 0
      fallback = null
    },
    async close() {
      for (const timer of timers) clearTimeout(timer)
      timers.clear()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}
