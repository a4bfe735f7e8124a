import { Worker } from 'node:worker_threads'

export interface ReplySink {
  /** Base URL to use as the integrations' `apiBaseUrl`. */
  readonly url: string
  /** Replies (`POST /v1/messages`) received so far. */
  replies(): Promise<number>
  close(): Promise<void>
}

// The platform's API stand-in, in its own thread so that answering the service's replies takes no
// time from the main thread, where the servers under measure run.
const SINK_SOURCE = `
const { createServer } = require('node:http')
const { parentPort } = require('node:worker_threads')
let replies = 0
const server = createServer((request, response) => {
  request.resume()
  request.on('end', () => {
    if (request.url === '/v1/messages') replies += 1
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  })
})
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }))
parentPort.on('message', (message) => {
  if (message === 'count') parentPort.postMessage({ replies })
  if (message === 'close') server.close(() => process.exit(0))
})
`

export async function startReplySink(): Promise<ReplySink> {
  const worker = new Worker(SINK_SOURCE, { eval: true })
  const port = await new Promise<number>((resolve) => {
    worker.once('message', (message: { port: number }) => resolve(message.port))
  })
  return {
    url: `http://127.0.0.1:${port}`,
    replies: () =>
      new Promise((resolve) => {
        worker.once('message', (message: { replies: number }) => resolve(message.replies))
        worker.postMessage('count')
      }),
    async close() {
      worker.postMessage('close')
      await new Promise((resolve) => worker.once('exit', resolve))
    },
  }
}
