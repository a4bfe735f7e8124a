import type { LlmProvider } from '@switchboard/core'
import { afterEach, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { type Cluster, startCluster } from './support/start-cluster.js'
import { connectVisitor, type Visitor } from './support/visitor.js'

let cluster: Cluster | undefined
const visitors: Visitor[] = []
afterEach(async () => {
  await Promise.all(visitors.splice(0).map((visitor) => visitor.close()))
  await cluster?.close()
  cluster = undefined
})

async function until(condition: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

/** A model that never answers: an agent stuck mid-turn. */
const silentModel: LlmProvider = { name: 'silent', complete: () => new Promise(() => undefined) }

describe('webchat limits (shortened for the test)', () => {
  it('turns typing off by itself when no reply comes in time', async () => {
    cluster = await startCluster({ nodes: [{ webchat: { typingTimeoutMs: 150 } }], model: silentModel })
    const visitor = await connectVisitor(cluster.nodes[0]!.socketUrl())
    visitors.push(visitor)
    await visitor.next('session')
    visitor.send({ type: 'message', text: 'anyone?' })
    await visitor.next('ack')
    const on = Date.now()
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: true })
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: false })
    expect(Date.now() - on).toBeGreaterThanOrEqual(100)
  })

  it('drops a peer that does not answer pings, and keeps one that does', async () => {
    cluster = await startCluster({ nodes: [{ webchat: { heartbeatIntervalMs: 50 } }] })
    const node = cluster.nodes[0]!
    const deaf = await connectVisitor(node.socketUrl(), { autoPong: false })
    const healthy = await connectVisitor(node.socketUrl())
    visitors.push(deaf, healthy)
    expect(await deaf.closed).toBe(1006)
    await until(() => node.webchat.connectionCount() === 1)
    expect(healthy.socket.readyState).toBe(WebSocket.OPEN)
  })

  it('drops a socket whose unsent frames pass the buffer cap', async () => {
    const warnings: string[] = []
    const logger = {
      warn: (_object: object, message: string) => warnings.push(message),
      error: () => undefined,
    }
    cluster = await startCluster({ nodes: [{ webchat: { maxBufferedBytes: 64 * 1024, logger } }] })
    const node = cluster.nodes[0]!
    const visitor = await connectVisitor(node.socketUrl())
    visitors.push(visitor)
    const session = await visitor.next('session')
    // The visitor stops reading; the kernel buffers fill, then the server's own.
    const raw = (visitor.socket as unknown as { _socket: import('node:net').Socket })._socket
    raw.pause()
    const text = 'x'.repeat(60_000)
    for (let index = 0; index < 400 && node.webchat.connectionCount() > 0; index += 1) {
      await cluster.eventBus.publish(`webchat:session:${session.sessionId}`, {
        kind: 'message',
        frame: {
          type: 'message',
          messageId: `m-${index}`,
          role: 'agent',
          text,
          at: new Date().toISOString(),
        },
      })
      await new Promise((resolve) => setImmediate(resolve))
    }
    await until(() => node.webchat.connectionCount() === 0)
    expect(warnings).toContain('webchat: dropping a slow socket')
    raw.resume()
  })

  it('closes its sockets with 1001 when the server shuts down', async () => {
    cluster = await startCluster({ nodes: [{}] })
    const visitor = await connectVisitor(cluster.nodes[0]!.socketUrl())
    await visitor.next('session')
    await cluster.nodes[0]!.webchat.close()
    expect(await visitor.closed).toBe(1001)
  })
})
