import type { PlatformConfig } from './platform-config.js'

/** How a call to the platform ended: an HTTP answer of any status, or none at all. */
export type PlatformCallResult =
  | { readonly answered: true; readonly status: number; readonly text: string }
  | {
      readonly answered: false
      /** For logs and the operators' records: the network error as Node reported it. */
      readonly error: string
      /** For whoever called the API: why, without this server's network internals. */
      readonly publicError: string
    }

export interface PlatformClientOptions {
  readonly fetch: typeof globalThis.fetch
  readonly timeoutMs: number
}

/** Longest excerpt of a platform's answer kept in an error: enough to diagnose, short enough to log. */
const EXCERPT_MAX = 300
/** More of an answer than this is not read. */
const ANSWER_READ_MAX_BYTES = 64 * 1024
const utf8 = new TextDecoder()

/**
 * `POST {apiBaseUrl}{path}` with a JSON body and the integration's token. Never throws: a
 * timeout or a network failure is a result, so the caller decides what is worth retrying.
 */
export async function postToPlatform(
  client: PlatformClientOptions,
  config: PlatformConfig,
  path: string,
  body: unknown,
): Promise<PlatformCallResult> {
  try {
    const response = await client.fetch(`${config.apiBaseUrl}${path}`, {
      method: 'POST',
      headers: {
        // The platform takes the bare token, not a Bearer scheme (CONTRACT §6).
        authorization: config.apiToken,
        'content-type': 'application/json',
        accept: 'application/json',
      },
      body: JSON.stringify(body),
      // Followed, a redirect turns the POST into a GET without the body, and that GET's 200 would
      // count as a reply delivered; answered as is, a 3xx is a failure like a 4xx.
      redirect: 'manual',
      signal: AbortSignal.timeout(client.timeoutMs),
    })
    // Reading the body releases the connection for the next call, and gives the error its text.
    // The status is the answer, though: a body cut off after a 2xx must not send the reply again.
    let text = ''
    try {
      text = await readStart(response)
    } catch {}
    return { answered: true, status: response.status, text }
  } catch (error) {
    return {
      answered: false,
      error: describeFailure(error, client.timeoutMs),
      publicError: isTimeout(error)
        ? `msgplatform did not answer within ${client.timeoutMs} ms`
        : 'msgplatform could not be reached at the apiBaseUrl of the integration',
    }
  }
}

/**
 * `msgplatform answered 503: <excerpt>` or why no answer came. The excerpt is the start of the
 * platform's answer, `excerptMax` characters at most.
 */
export function describeResult(result: PlatformCallResult, excerptMax = EXCERPT_MAX): string {
  if (!result.answered) return result.error
  if (result.status >= 300 && result.status < 400) {
    return `msgplatform answered ${result.status} (a redirect, not followed)`
  }
  const excerpt = result.text.trim().slice(0, excerptMax)
  return excerpt === ''
    ? `msgplatform answered ${result.status}`
    : `msgplatform answered ${result.status}: ${excerpt}`
}

export function isSuccess(result: PlatformCallResult): result is PlatformCallResult & { answered: true } {
  return result.answered && result.status >= 200 && result.status < 300
}

/**
 * `describeResult` for an answer shown to an API caller: the platform's own answer is theirs to
 * see; how this server failed to reach it (addresses, resolver errors) is not.
 */
export function describeResultPublicly(result: PlatformCallResult, excerptMax = EXCERPT_MAX): string {
  return result.answered ? describeResult(result, excerptMax) : result.publicError
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')
}

function describeFailure(error: unknown, timeoutMs: number): string {
  if (isTimeout(error)) return `msgplatform did not answer within ${timeoutMs} ms`
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : ''
  const message = error instanceof Error ? error.message : String(error)
  return `msgplatform unreachable: ${message}${cause}`
}

/**
 * The answer's first ANSWER_READ_MAX_BYTES, decoded: all this client needs of it is an excerpt and a
 * request id. Read to its end, an answer that never ends held this server's memory growing until
 * the timeout, at whatever rate the platform (any URL a tenant names) could send.
 */
async function readStart(response: Response): Promise<string> {
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < ANSWER_READ_MAX_BYTES) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.byteLength
    }
  } finally {
    // Unread, the rest would hold the connection; cancelled, it is closed instead of reused.
    reader.cancel().catch(() => undefined)
  }
  return utf8.decode(Buffer.concat(chunks).subarray(0, ANSWER_READ_MAX_BYTES))
}
