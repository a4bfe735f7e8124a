import {
  agentInputSchema,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
  type Storage,
} from '@switchboard/core'
import { createRecordingConnector } from '@switchboard/core/testing'
import { type Contender, expectEqual } from './contender.js'
import {
  CUSTOMER_TEXT,
  FACT_KEY,
  FACT_VALUE,
  RECEPTION_PROMPT,
  REPLY_TEXT,
  SALES_PROMPT,
  type Scenario,
  SUPPORT_PROMPT,
} from './scenario.js'
import { createZeroLatencyModel } from './zero-latency-model.js'

export type SwitchboardMode =
  /** Each message comes from a new customer, so opens a new session; one turn at a time. */
  | { readonly kind: 'new-session' }
  /** Every message comes from one customer: the session's history grows, one turn at a time. */
  | { readonly kind: 'same-session' }
  /** `batchSize` new customers write at once; the worker pool answers them concurrently. */
  | { readonly kind: 'concurrent'; readonly batchSize: number }

const COMPANY_ID = 1

/**
 * The real runtime: ingest → job queue → turn → outbox → connector, on in-memory storage, with a
 * zero-latency model. A turn counts as done when the connector delivered its reply.
 */
export function createSwitchboardContender(scenario: Scenario, mode: SwitchboardMode): Contender {
  const labels: Record<SwitchboardMode['kind'], string> = {
    'new-session': 'Switchboard, new session per turn',
    'same-session': 'Switchboard, same session every turn',
    concurrent: `Switchboard, ${mode.kind === 'concurrent' ? mode.batchSize : 0} sessions at once`,
  }
  return {
    label: labels[mode.kind],
    scenario: scenario.name,
    role: mode.kind === 'new-session' ? 'switchboard' : 'switchboard-variant',
    ...(mode.kind === 'concurrent' ? { turnsPerStep: mode.batchSize } : {}),
    async open() {
      const storage = createMemoryStorage()
      const connector = createRecordingConnector()
      const team = await createTeam(storage, scenario)
      const integration = await storage.integrations.create({
        companyId: COMPANY_ID,
        type: connector.type,
        name: 'bench',
        active: true,
        entryAgentId: team.entryAgentId,
        config: {},
        webhookSecret: null,
        at: new Date(),
      })
      const switchboard = createSwitchboard({
        storage,
        model: createZeroLatencyModel(team.delegation === undefined ? {} : { delegation: team.delegation }),
        knowledge: createMemoryKnowledgeIndex(),
        connectors: [connector],
      })

      // Sequential turns wait for their own reply's delivery event rather than `idle()`, which
      // would add a lease attempt and a delivery check of its own to every turn.
      let delivered: (() => void) | null = null
      switchboard.events.on('message-delivered', () => {
        const resolve = delivered
        delivered = null
        resolve?.()
      })
      const clientIdOf = (index: number) =>
        mode.kind === 'same-session' ? 'customer-0' : `customer-${index}`
      const ingest = async (index: number) => {
        const result = await switchboard.ingest({
          integrationId: integration.id,
          clientId: clientIdOf(index),
          text: CUSTOMER_TEXT,
        })
        if (result.isErr())
          throw new Error(`bench: ingest failed: ${result.error.code} ${result.error.message}`)
      }
      let lastIndex = 0

      return {
        async run(first, count) {
          lastIndex = first + count - 1
          if (mode.kind === 'concurrent') {
            for (let start = first; start < first + count; start += mode.batchSize) {
              const size = Math.min(mode.batchSize, first + count - start)
              const ingests: Promise<void>[] = []
              for (let index = start; index < start + size; index++) ingests.push(ingest(index))
              await Promise.all(ingests)
              await switchboard.idle()
            }
            return
          }
          for (let index = first; index < first + count; index++) {
            const reply = new Promise<void>((resolve) => {
              delivered = resolve
            })
            await ingest(index)
            await reply
          }
        },
        async verify(turns) {
          await switchboard.idle()
          expectEqual('replies sent', connector.sent.length, turns)
          expectEqual('last reply', connector.sent[connector.sent.length - 1]?.text, REPLY_TEXT)
          const session = await storage.sessions.findOpen({
            integrationId: integration.id,
            clientId: clientIdOf(lastIndex),
          })
          if (scenario.delegates) {
            expectEqual('active agent', session?.activeAgentId, team.delegation?.toAgentId)
            expectEqual('saved fact', session?.metadata.sharedContext.facts[FACT_KEY], FACT_VALUE)
          }
        },
        async close() {
          await switchboard.stop()
          await storage.close()
        },
      }
    },
  }
}

async function createTeam(
  storage: Storage,
  scenario: Scenario,
): Promise<{ entryAgentId: number; delegation?: { fromAgentId: number; toAgentId: number } }> {
  const create = async (input: Parameters<typeof agentInputSchema.parse>[0]) =>
    storage.agents.create({ ...agentInputSchema.parse(input), companyId: COMPANY_ID, at: new Date() })
  if (!scenario.delegates) {
    const support = await create({ name: 'support', systemPrompt: SUPPORT_PROMPT })
    return { entryAgentId: support.id }
  }
  // The target first, so the receptionist can name it in allowedTargets. No handoff message
  // template: the customer receives one message per turn, the answer, as in the other contenders.
  const sales = await create({ name: 'sales', systemPrompt: SALES_PROMPT })
  const reception = await create({
    name: 'reception',
    systemPrompt: RECEPTION_PROMPT,
    handoff: { enabled: true, allowedTargets: [sales.id] },
  })
  return { entryAgentId: reception.id, delegation: { fromAgentId: reception.id, toAgentId: sales.id } }
}
