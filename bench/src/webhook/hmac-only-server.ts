import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { verifyWebhookSignature } from '@switchboard/core'
import express from 'express'

export interface HmacOnlyServer {
  /** Base URL; the route is `POST /api/webhook/msgplatform/:integrationId`. */
  readonly url: string
  close(): Promise<void>
}

/**
 * The baseline: Express 5 with one route that reads the raw body and checks its HMAC with core's
 * `verifyWebhookSignature`, then answers `{ok:true}`: the least a signed webhook costs.
 */
export async function startHmacOnlyServer(secret: string): Promise<HmacOnlyServer> {
  const app = express()
  app.disable('x-powered-by')
  app.post(
    '/api/webhook/msgplatform/:integrationId',
    express.raw({ limit: 1024 * 1024, type: () => true }),
    (request, response) => {
      const rawBody: unknown = request.body
      const signed = verifyWebhookSignature({
        rawBody: Buffer.isBuffer(rawBody) ? rawBody : new Uint8Array(0),
        secret,
        headers: request.headers,
      })
      if (signed) response.json({ ok: true })
      else response.status(401).json({ error: { code: 'INVALID_SIGNATURE', message: 'bad signature' } })
    },
  )
  const server: Server = await new Promise((resolve, reject) => {
    const listening = app.listen(0, '127.0.0.1', (error?: Error) =>
      error ? reject(error) : resolve(listening),
    )
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
