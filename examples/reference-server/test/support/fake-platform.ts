import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A reply the service sent to the platform (`POST /v1/messages`). */
export interface PlatformReply {
  readonly clientId: string
  readonly text: string
}

export interface FakePlatform {
  /** `http://127.0.0.1:PORT`, an integration's `apiBaseUrl`. */
  readonly url: string
  readonly replies: readonly PlatformReply[]
  /** Resolves once `count` replies arrived in all; fails after `timeoutMs`. */
  waitForReplies(count: number, timeoutMs?: number): Promise<readonly PlatformReply[]>
  close(): Promise<void>
}

/** The messaging platform's API as far as replies go: it keeps them and answers 200. */
export async function startFakePlatform(): Promise<FakePlatform> {
  const replies: PlatformReply[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/messages') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { client_id: string; text: string }
        replies.push({ clientId: body.client_id, text: body.text })
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    replies,
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
