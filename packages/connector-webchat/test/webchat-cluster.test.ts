import { reply } from '@switchboard/core/testing'
import { afterEach, describe, expect, it } from 'vitest'
import { type Cluster, startCluster } from './support/start-cluster.js'
import { connectVisitor, type Visitor } from './support/visitor.js'

// Two "processes" in one: two switchboards, two HTTP servers, one memory storage and one memory
// event bus standing in for the PostgreSQL they would share.
let cluster: Cluster | undefined
const visitors: Visitor[] = []
afterEach(async () => {
  await Promise.all(visitors.splice(0).map((visitor) => visitor.close()))
  await cluster?.close()
  cluster = undefined
})

describe('webchat across processes', () => {
  it('delivers a reply processed by process B to the visitor connected to process A', async () => {
    // A holds the socket and takes no jobs; B takes them.
    cluster = await startCluster({ nodes: [{ concurrency: 0 }, {}] })
    const [a, b] = cluster.nodes as [Cluster['nodes'][0], Cluster['nodes'][0]]
    cluster.model.script(cluster.agentId, reply('Answered by B'))
    const visitor = await connectVisitor(a.socketUrl())
    visitors.push(visitor)
    const session = await visitor.next('session')
    visitor.send({ type: 'message', text: 'Who answers?', clientMessageId: 'x-1' })
    await visitor.next('ack')
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: true })
    expect(await visitor.next('message')).toMatchObject({ role: 'agent', text: 'Answered by B' })
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: false })
    expect(cluster.model.requests).toHaveLength(1)
    expect(a.webchat.connectionCount()).toBe(1)
    expect(b.webchat.connectionCount()).toBe(0)

    // An operator acting through B reaches the socket on A as well.
    const companyId = 1
    await b.switchboard.sessions.pause({ companyId, sessionId: session.sessionId as string })
    expect(await visitor.next('state')).toEqual({ type: 'state', state: 'paused' })
    const sent = await b.switchboard.sessions.sendOperatorMessage({
      companyId,
      sessionId: session.sessionId as string,
      text: 'An operator on B',
    })
    expect(await visitor.next('message')).toMatchObject({
      role: 'operator',
      messageId: sent._unsafeUnwrap().id,
    })

    // The same visitor resumes on B with the token A signed.
    const onB = await connectVisitor(b.socketUrl(session.visitorToken as string))
    visitors.push(onB)
    expect(await onB.next()).toMatchObject({ type: 'session', sessionId: session.sessionId, state: 'paused' })
  })

  it('stores a visitor message on the integration its handshake read, checked in the store', async () => {
    // A node that takes no jobs: the storage calls are the socket's and the store's alone.
    cluster = await startCluster({ nodes: [{ concurrency: 0 }] })
    const [node] = cluster.nodes as [Cluster['nodes'][0]]
    const visitor = await connectVisitor(node.socketUrl())
    visitors.push(visitor)
    await visitor.next('session')
    const storage = cluster.storage
    let reads = 0
    const get = storage.integrations.get.bind(storage.integrations)
    storage.integrations.get = (options) => {
      reads += 1
      return get(options)
    }
    visitor.send({ type: 'message', text: 'one', clientMessageId: 'c-1' })
    await visitor.next('ack')
    visitor.send({ type: 'message', text: 'two', clientMessageId: 'c-2' })
    await visitor.next('ack')
    expect(reads).toBe(0)
  })

  it('turns typing off from the process whose turn ended without a reply', async () => {
    cluster = await startCluster({ nodes: [{ concurrency: 0 }, {}] })
    const [a] = cluster.nodes as [Cluster['nodes'][0]]
    // An empty final text is no reply (CONTRACT §10).
    cluster.model.script(cluster.agentId, reply(''))
    const visitor = await connectVisitor(a.socketUrl())
    visitors.push(visitor)
    await visitor.next('session')
    visitor.send({ type: 'message', text: 'hm', clientMessageId: 'q-1' })
    await visitor.next('ack')
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: true })
    expect(await visitor.next('typing')).toEqual({ type: 'typing', on: false })
    expect(visitor.frames.some((frame) => frame.type === 'message')).toBe(false)
  })
})
