/**
 * One server of the webchat bench, in its own process so its memory is its own: either a bare
 * `ws` echo server or Switchboard's webchat (memory storage, an instant model). It tells the
 * parent its URL over IPC and answers memory questions after a full GC.
 *
 *   node --import tsx --conditions=source --expose-gc server-process.ts echo|switchboard
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createWebchatServer, MAX_FRAME_BYTES } from '@switchboard/connector-webchat'
import {
  agentInputSchema,
  createMemoryEventBus,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
} from '@switchboard/core'
import { WebSocketServer } from 'ws'
import { createZeroLatencyModel } from '../core-turn/zero-latency-model.js'

export type ServerKind = 'echo' | 'switchboard'

export type ToServer = { readonly type: 'memory' } | { readonly type: 'stop' }

export type FromServer =
  | { readonly type: 'ready'; readonly socketUrl: string }
  | {
      readonly type: 'memory'
      readonly rssBytes: number
      readonly heapUsedBytes: number
      readonly externalBytes: number
      readonly connections: number
    }

const kind = process.argv[2] as ServerKind
const send = (message: FromServer) => process.send?.(message)
const server = createServer((_request, response) => response.writeHead(404).end())
let connections: () => number
let stop: () => Promise<void>
let socketPath = '/'

if (kind === 'echo') {
  // The floor: the same library with the same frame cap, doing nothing but echo.
  const sockets = new WebSocketServer({ server, maxPayload: MAX_FRAME_BYTES })
  sockets.on('connection', (socket) => {
    socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }))
  })
  connections = () => sockets.clients.size
  stop = async () => {
    for (const socket of sockets.clients) socket.terminate()
    await new Promise<void>((resolve) => sockets.close(() => resolve()))
  }
} else {
  const storage = createMemoryStorage()
  const eventBus = createMemoryEventBus()
  const companyId = 1
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Bench agent' }),
    companyId,
    at: new Date(),
  })
  const integration = await storage.integrations.create({
    companyId,
    type: 'webchat',
    name: 'Bench widget',
    active: true,
    entryAgentId: agent.id,
    config: {},
    webhookSecret: 'bench-secret-0123456789abcdef',
    at: new Date(),
  })
  const switchboard = createSwitchboard({
    storage,
    model: createZeroLatencyModel(),
    knowledge: createMemoryKnowledgeIndex(),
  })
  const webchat = createWebchatServer({ switchboard, eventBus, server })
  socketPath = `/api/webchat/${integration.id}`
  connections = () => webchat.connectionCount()
  stop = async () => {
    await switchboard.stop()
    await webchat.close()
    await eventBus.close()
    await storage.close()
  }
}
server.on('listening', () => {
  const { port } = server.address() as AddressInfo
  send({ type: 'ready', socketUrl: `ws://127.0.0.1:${port}${socketPath}` })
})

const collect = () => {
  // Twice: the first full GC runs finalizers that free more for the second.
  globalThis.gc?.()
  globalThis.gc?.()
}

process.on('message', (message: ToServer) => {
  if (message.type === 'memory') {
    collect()
    const usage = process.memoryUsage()
    send({
      type: 'memory',
      rssBytes: usage.rss,
      heapUsedBytes: usage.heapUsed,
      externalBytes: usage.external,
      connections: connections(),
    })
  } else {
    stop().then(
      () => server.close(() => process.exit(0)),
      () => process.exit(1),
    )
  }
})

server.listen(0, '127.0.0.1')
