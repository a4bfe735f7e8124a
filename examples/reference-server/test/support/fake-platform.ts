import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A reply the service sent to the platform (`POST /v1/messages`). */
export interface PlatformReply {
  readonly clientId: string
  readonly text: string
}

/** Any request the service made to the platform, as received. */
export interface PlatformRequest {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly headers: IncomingHttpHeaders
  readonly body: Record<string, unknown>
  /** When the whole request had arrived (`Date.now()`). */
  readonly receivedAt: number
}

export interface FakePlatform {
  /** `http://127.0.0.1:PORT`, an integration's `apiBaseUrl`. */
  readonly url: string
  readonly replies: readonly PlatformReply[]
  /** Every request, replies and transfers alike, in arrival order. */
  readonly requests: readonly PlatformRequest[]
  /** Resolves once `count` replies arrived in all; fails after `timeoutMs`. */
  waitForReplies(count: number, timeoutMs?: number): Promise<readonly PlatformReply[]>
  close(): Promise<void>
}

/**
 * The messaging platform's API: it keeps every request and answers 200; a transfer to a human is
 * answered with a request id of its own (`transfer-1`, `transfer-2`…), as the real one does.
 */
export async function startFakePlatform(): Promise<FakePlatform> {
  const replies: PlatformReply[] = []
  const requests: PlatformRequest[] = []
  let transfers = 0
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>
      requests.push({
        method: request.method ?? '',
        path: request.url ?? '',
        authorization: request.headers.authorization,
        headers: request.headers,
        body,
        receivedAt: Date.now(),
      })
      if (request.method === 'POST' && request.url === '/v1/messages') {
        replies.push({ clientId: String(body.client_id), text: String(body.text) })
      }
      const answer =
        request.method === 'POST' && request.url === '/v1/dialogs/transfer'
          ? { ok: true, data: { request_id: `transfer-${++transfers}` } }
          : { ok: true }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    replies,
    requests,
    async waitForReplies(count, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs
      while (replies.length < count) {
        if (Date.now() > deadline) {
          throw new Error(`the platform got ${replies.length} of ${count} replies in ${timeoutMs} ms`)
        }
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      return replies
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
