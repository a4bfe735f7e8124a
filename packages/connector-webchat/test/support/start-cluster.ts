import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  agentInputSchema,
  createMemoryEventBus,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
  type EventBus,
  type LlmProvider,
  type Storage,
  type Switchboard,
} from '@switchboard/core'
import { createScriptedModel, type ScriptedModel } from '@switchboard/core/testing'
import { createWebchatServer, type WebchatServer, type WebchatServerOptions } from '../../src/index.js'

const COMPANY_ID = 1

/** One server process: its own switchboard (workers), HTTP server and webchat sockets. */
export interface ClusterNode {
  readonly switchboard: Switchboard
  readonly webchat: WebchatServer
  readonly server: Server
  socketUrl(token?: string): string
}

/**
 * Several "processes" in one: each node has its own switchboard, HTTP server and webchat server,
 * and all share one storage and one event bus, as N processes share one PostgreSQL.
 */
export interface Cluster {
  readonly storage: Storage
  readonly eventBus: EventBus
  readonly model: ScriptedModel
  readonly agentId: number
  readonly integrationId: string
  readonly nodes: readonly ClusterNode[]
  close(): Promise<void>
}

export interface NodeOptions {
  /** Turns run at once on this node; 0 makes it take no jobs at all. */
  readonly concurrency?: number
  readonly webchat?: Partial<Omit<WebchatServerOptions, 'switchboard' | 'eventBus' | 'server'>>
  /** This node's view of the shared bus (one that can be cut off, say); the shared one by default. */
  readonly eventBus?: (shared: EventBus) => EventBus
}

export async function startCluster(options: {
  nodes: readonly NodeOptions[]
  model?: LlmProvider
}): Promise<Cluster> {
  const storage = createMemoryStorage()
  const eventBus = createMemoryEventBus()
  const scripted = createScriptedModel()
  const model = options.model ?? scripted
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Concierge' }),
    companyId: COMPANY_ID,
    at: new Date(),
  })
  const integration = await storage.integrations.create({
    companyId: COMPANY_ID,
    type: 'webchat',
    name: 'Widget',
    active: true,
    entryAgentId: agent.id,
    config: {},
    webhookSecret: 'a-webchat-secret-of-enough-length',
    at: new Date(),
  })
  const nodes: ClusterNode[] = []
  for (const node of options.nodes) {
    const switchboard = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      concurrency: node.concurrency ?? 8,
      // Another node's job is found by polling, as across processes.
      pollMs: 20,
    })
    const server = createServer((_request, response) => response.writeHead(404).end())
    const webchat = createWebchatServer({
      switchboard,
      eventBus: node.eventBus?.(eventBus) ?? eventBus,
      server,
      ...node.webchat,
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    nodes.push({
      switchboard,
      webchat,
      server,
      socketUrl: (token) =>
        `ws://127.0.0.1:${port}/api/webchat/${integration.id}` +
        (token === undefined ? '' : `?token=${encodeURIComponent(token)}`),
    })
  }
  return {
    storage,
    eventBus,
    model: scripted,
    agentId: agent.id,
    integrationId: integration.id,
    nodes,
    async close() {
      for (const node of nodes) {
        await node.switchboard.stop({ timeoutMs: 200 })
        await node.webchat.close()
        await new Promise<void>((resolve) => node.server.close(() => resolve()))
      }
      await eventBus.close()
      await storage.close()
    },
  }
}
