import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import express from 'express'

export interface HelloWorldServer {
  readonly url: string
  close(): Promise<void>
}

/**
 * The baseline: Express 5 with one JSON route and nothing else, so a ratio against it shows what
 * the service adds on top of the framework itself.
 */
export async function startHelloWorldServer(): Promise<HelloWorldServer> {
  const app = express()
  app.disable('x-powered-by')
  app.get('/hello', (_request, response) => {
    response.json({ hello: 'world' })
  })
  const server: Server = await new Promise((resolve, reject) => {
    const listening = app.listen(0, '127.0.0.1', (error?: Error) =>
      error ? reject(error) : resolve(listening),
    )
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/hello`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
