import type { AgentInput, HandoffConfig } from '../domain/agent.js'
import { agentInputSchema } from '../domain/agent.js'
import type { Message, Session } from '../domain/session.js'
import { createMemoryKnowledgeIndex } from '../knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import type { Storage } from '../ports/storage.js'
import { createSwitchboard, type Switchboard } from '../runtime/create-switchboard.js'
import type { IngestResult } from '../runtime/ingest.js'
import type { Tool } from '../tools/tool.js'
import { createManualClock, type ManualClock } from './manual-clock.js'
import { createRecordingConnector, type RecordingConnector, type SentMessage } from './recording-connector.js'
import { createScriptedModel, type ScriptedModel } from './scripted-model.js'

type AgentReference = string | number

/** An agent of the team; other agents are named by their key in `agents`. */
export interface HarnessAgent extends Omit<AgentInput, 'handoff' | 'routingConfig' | 'name'> {
  readonly name?: string
  readonly handoff?: Partial<Omit<HandoffConfig, 'allowedTargets'>> & { allowedTargets?: AgentReference[] }
  readonly routingConfig?: {
    enabled: boolean
    routes: { id: string; agent: AgentReference; description: string }[]
    confidenceThreshold?: number
  }
  /** Knowledge documents of this agent. */
  readonly knowledge?: readonly string[]
}

export interface ConversationHarnessOptions {
  readonly agents: Readonly<Record<string, HarnessAgent>>
  /** The integration's entry agent. */
  readonly entry: string
  /** Whether the channel can transfer to a human (msgplatform can, webchat cannot). */
  readonly humanTransfer?: boolean
  readonly tools?: readonly Tool[]
  readonly model?: ScriptedModel
  /** Enforce credits, starting the company with this balance in USD. Not enforced when absent. */
  readonly creditsUsd?: number
}

export interface HarnessCustomer {
  readonly clientId: string
  /**
   * The customer writes; resolves once every turn and delivery it caused has finished. Rejects when
   * one of those turns made a model call the script had no step for.
   */
  says(text: string, options?: { externalId?: string }): Promise<IngestResult>
  /**
   * The customer writes; resolves once the message is stored, without waiting for its turn, which
   * may be under way already (script the model before the customer writes).
   */
  sends(text: string, options?: { externalId?: string }): Promise<IngestResult>
  session(): Promise<Session>
  /** The key (in `agents`) of the session's active agent. */
  activeAgent(): Promise<string>
  facts(): Promise<Readonly<Record<string, string>>>
  /** Every stored message of the session, in arrival order. */
  messages(): Promise<Message[]>
  /** What the channel delivered to this customer, in order. */
  received(): SentMessage[]
  /** The texts of the agents' replies delivered to this customer. */
  replies(): string[]
}

export interface ConversationHarness {
  readonly switchboard: Switchboard
  readonly storage: Storage
  readonly model: ScriptedModel
  readonly clock: ManualClock
  readonly connector: RecordingConnector
  readonly companyId: number
  readonly integrationId: string
  /** The id of the agent with this key. */
  agent(key: string): number
  customer(clientId?: string): HarnessCustomer
  /** Stops the runtime and fails if the model script was not used up exactly. */
  finish(): Promise<void>
}

const COMPANY_ID = 1

/**
 * An agent team on in-memory storage with a scripted model, a manual clock and a recording
 * channel: conversation tests that read like the conversation, with no network.
 */
export async function createConversationHarness(
  options: ConversationHarnessOptions,
): Promise<ConversationHarness> {
  const storage = createMemoryStorage()
  const knowledge = createMemoryKnowledgeIndex()
  const model = options.model ?? createScriptedModel()
  const clock = createManualClock()
  const connector = createRecordingConnector({ humanTransfer: options.humanTransfer ?? false })

  const ids = new Map<string, number>()
  const keys = new Map<number, string>()
  for (const [key, definition] of Object.entries(options.agents)) {
    const { handoff: _handoff, routingConfig: _routing, knowledge: _knowledge, ...rest } = definition
    const input = agentInputSchema.parse({ ...rest, name: definition.name ?? key })
    const agent = await storage.agents.create({ ...input, companyId: COMPANY_ID, at: clock.now() })
    ids.set(key, agent.id)
    keys.set(agent.id, key)
  }
  const resolve = (reference: AgentReference): number => {
    if (typeof reference === 'number') return reference
    const id = ids.get(reference)
    if (id === undefined) {
      throw new Error(`harness: no agent "${reference}"; the agents are ${[...ids.keys()].join(', ')}`)
    }
    return id
  }
  // The scripted model knows agents by id; a test names them by key.
  const legend = () => `(agents: ${[...ids].map(([key, id]) => `${id} is ${key}`).join(', ')})`
  for (const [key, definition] of Object.entries(options.agents)) {
    const id = resolve(key)
    const patch = agentInputSchema.pick({ handoff: true }).parse({
      handoff:
        definition.handoff === undefined
          ? undefined
          : { ...definition.handoff, allowedTargets: (definition.handoff.allowedTargets ?? []).map(resolve) },
    })
    const routingConfig =
      definition.routingConfig === undefined
        ? undefined
        : {
            enabled: definition.routingConfig.enabled,
            routes: definition.routingConfig.routes.map((entry) => ({
              id: entry.id,
              agentId: resolve(entry.agent),
              description: entry.description,
            })),
            confidenceThreshold: definition.routingConfig.confidenceThreshold ?? 0.5,
          }
    await storage.agents.update({
      companyId: COMPANY_ID,
      id,
      patch: { handoff: patch.handoff, ...(routingConfig === undefined ? {} : { routingConfig }) },
      at: clock.now(),
    })
    for (const [index, content] of (definition.knowledge ?? []).entries()) {
      await knowledge.add({ companyId: COMPANY_ID, agentId: id, documentId: `${key}-${index}`, content })
    }
  }

  const integration = await storage.integrations.create({
    companyId: COMPANY_ID,
    type: connector.type,
    name: 'harness',
    active: true,
    entryAgentId: resolve(options.entry),
    config: {},
    webhookSecret: null,
    at: clock.now(),
  })

  if (options.creditsUsd !== undefined) {
    await storage.billing.adjust({ companyId: COMPANY_ID, amountUsd: options.creditsUsd, at: clock.now() })
  }

  let uuid = 0
  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge,
    connectors: [connector],
    tools: options.tools ?? [],
    enforceCredits: options.creditsUsd !== undefined,
    clock,
    ids: { uuid: () => `00000000-0000-4000-8000-${(++uuid).toString(16).padStart(12, '0')}` },
  })

  const customer = (clientId = 'customer-1'): HarnessCustomer => {
    let sessionId: string | null = null
    const sends = async (text: string, sendOptions: { externalId?: string } = {}) => {
      const result = await switchboard.ingest({
        integrationId: integration.id,
        clientId,
        text,
        ...(sendOptions.externalId === undefined ? {} : { externalId: sendOptions.externalId }),
      })
      if (result.isErr())
        throw new Error(`harness: ingest failed: ${result.error.code} ${result.error.message}`)
      sessionId = result.value.session.id
      return result.value
    }
    const session = async () => {
      // A tool of the customer's first turn may ask before `says` has its answer: the turn of a
      // new session starts as its message is stored.
      const id =
        sessionId ??
        (await storage.sessions.findOpen({ integrationId: integration.id, clientId }))?.id ??
        null
      if (id === null) throw new Error(`harness: ${clientId} has not written yet`)
      const found = await storage.sessions.get({ id })
      if (found === null) throw new Error('harness: the session disappeared')
      return found
    }
    const received = () => connector.sent.filter((sent) => sent.clientId === clientId)
    return {
      clientId,
      sends,
      async says(text, sendOptions) {
        const known = model.problems.length
        const result = await sends(text, sendOptions)
        await switchboard.idle()
        // The turn itself only falls back to the agent's fallback reply, which a test may not check.
        if (model.problems.length > known) {
          throw new Error(`${model.problems.slice(known).join('\n')}\n${legend()}`)
        }
        return result
      },
      session,
      async activeAgent() {
        const id = (await session()).activeAgentId
        return keys.get(id) ?? String(id)
      },
      facts: async () => (await session()).metadata.sharedContext.facts,
      messages: async () => storage.messages.list({ sessionId: (await session()).id, limit: 10_000 }),
      received,
      replies: () =>
        received()
          .filter((sent) => sent.role === 'agent')
          .map((sent) => sent.text),
    }
  }

  return {
    switchboard,
    storage,
    model,
    clock,
    connector,
    companyId: COMPANY_ID,
    integrationId: integration.id,
    agent: resolve,
    customer,
    async finish() {
      await switchboard.stop()
      try {
        model.assertDone()
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${legend()}`)
      }
    },
  }
}
