import { reply } from '@switchboard/core/testing'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { type Cluster, startCluster } from './support/start-cluster.js'
import { type Service, startService } from './support/start-service.js'
import { connectVisitor, type Visitor } from './support/visitor.js'

/*
 * The handshake admits a visitor once; a socket lives on for as long as the visitor keeps it. What
 * revokes the visitor's admission (a rotated secret, a switched-off or deleted integration, an
 * origin taken off allowedOrigins) must also reach the sockets already open, or a stolen token
 * stays good on its socket for ever.
 */

describe('an open socket the integration no longer admits (reference server)', () => {
  let service: Service
  let agentId: number
  const visitors: Visitor[] = []

  beforeAll(async () => {
    service = await startService()
    agentId = await service.createAgent({ name: 'Concierge' })
  })
  afterEach(async () => {
    await Promise.all(visitors.splice(0).map((visitor) => visitor.close()))
  })
  afterAll(async () => {
    await service.close()
  })

  it('stores no more messages once the secret is rotated: UNAUTHORIZED, then closed with 1008', async () => {
    const integrationId = await service.createWebchat({ entryAgentId: agentId })
    const visitor = await connectVisitor(service.socketUrl(integrationId))
    visitors.push(visitor)
    const { sessionId } = await visitor.next('session')

    const rotated = await service.api('POST', `/api/integrations/${integrationId}/rotate-secret`)
    expect(rotated.status).toBe(200)
    visitor.send({ type: 'message', text: 'still here?', clientMessageId: 'after-rotation' })
    expect(await visitor.next((frame) => frame.type === 'error' || frame.type === 'ack')).toMatchObject({
      type: 'error',
      code: 'UNAUTHORIZED',
    })
    expect(await visitor.closed).toBe(1008)
    const messages = await service.api<{ messages: unknown[] }>('GET', `/api/sessions/${sessionId}/messages`)
    expect(messages.body.messages).toEqual([])
  })

  it('sends no history once the integration is switched off: INTEGRATION_INACTIVE, then 1008', async () => {
    const integrationId = await service.createWebchat({ entryAgentId: agentId })
    const visitor = await connectVisitor(service.socketUrl(integrationId))
    visitors.push(visitor)
    await visitor.next('session')
    service.model.script(agentId, reply('Hello there.'))
    visitor.send({ type: 'message', text: 'hi' })
    await visitor.next((frame) => frame.type === 'message' && frame.role === 'agent')

    await service.api('PATCH', `/api/integrations/${integrationId}`, { active: false })
    visitor.send({ type: 'history' })
    expect(await visitor.next((frame) => frame.type === 'error' || frame.type === 'message')).toMatchObject({
      type: 'error',
      code: 'INTEGRATION_INACTIVE',
    })
    expect(await visitor.closed).toBe(1008)
  })
})

describe('an open socket that only listens (heartbeat shortened for the test)', () => {
  let cluster: Cluster | undefined
  const visitors: Visitor[] = []
  afterEach(async () => {
    await Promise.all(visitors.splice(0).map((visitor) => visitor.close()))
    await cluster?.close()
    cluster = undefined
  })

  const webchatIntegration = async (allowedOrigins?: string[]) =>
    cluster!.storage.integrations.create({
      companyId: 1,
      type: 'webchat',
      name: 'Widget',
      active: true,
      entryAgentId: cluster!.agentId,
      config: allowedOrigins === undefined ? {} : { allowedOrigins },
      webhookSecret: 'a-webchat-secret-of-enough-length',
      at: new Date(),
    })

  const listen = async (integrationId: string, origin?: string) => {
    const url = cluster!.nodes[0]!.socketUrl().replace(/\/\d+$/, `/${integrationId}`)
    const visitor = await connectVisitor(url, origin === undefined ? {} : { headers: { origin } })
    visitors.push(visitor)
    await visitor.next('session')
    return visitor
  }

  it('is closed within a heartbeat once its admission is revoked, whatever revoked it', async () => {
    cluster = await startCluster({ nodes: [{ webchat: { heartbeatIntervalMs: 50 } }] })
    const rotated = await webchatIntegration()
    const switchedOff = await webchatIntegration()
    const deleted = await webchatIntegration()
    const narrowed = await webchatIntegration(['https://shop.example.com'])
    const untouched = await webchatIntegration()
    const sockets = {
      rotated: await listen(rotated.id),
      switchedOff: await listen(switchedOff.id),
      deleted: await listen(deleted.id),
      narrowed: await listen(narrowed.id, 'https://shop.example.com'),
      untouched: await listen(untouched.id),
    }

    const { storage } = cluster
    const at = new Date()
    await storage.integrations.update({
      companyId: 1,
      id: rotated.id,
      patch: { webhookSecret: 'another-webchat-secret-of-enough-length' },
      at,
    })
    await storage.integrations.update({ companyId: 1, id: switchedOff.id, patch: { active: false }, at })
    await storage.integrations.delete({ companyId: 1, id: deleted.id })
    await storage.integrations.update({
      companyId: 1,
      id: narrowed.id,
      patch: { config: { allowedOrigins: ['https://other.example.com'] } },
      at,
    })

    const codes = await Promise.all(
      [sockets.rotated, sockets.switchedOff, sockets.deleted, sockets.narrowed].map(async (visitor) => {
        const error = await visitor.next('error', 2000)
        return { code: error.code, closed: await visitor.closed }
      }),
    )
    expect(codes).toEqual([
      { code: 'UNAUTHORIZED', closed: 1008 },
      { code: 'INTEGRATION_INACTIVE', closed: 1008 },
      { code: 'NOT_FOUND', closed: 1008 },
      { code: 'FORBIDDEN', closed: 1008 },
    ])
    expect(await sockets.untouched.quietFor(200)).toBe(true)
    expect(sockets.untouched.socket.readyState).toBe(WebSocket.OPEN)
  })
})
