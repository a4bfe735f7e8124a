import { type Agent, type AgentPatch, referencedAgentIds } from '../domain/agent.js'
import type { AgentRepository } from '../ports/storage.js'
import type { IntegrationTable } from './integration-repository.js'
import { decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from './paging.js'
import { snapshot } from './snapshot.js'
import type { Statement } from './undo-log.js'

export interface AgentTable {
  readonly rows: Map<number, Agent>
  /** Like a database sequence, not taken back by a rollback, so an id is never handed out twice. */
  lastId: number
}

export function createAgentTable(): AgentTable {
  return { rows: new Map(), lastId: 0 }
}

/** Whether a `null` in the patch removes the field (true) or stores null (false). */
const PATCHABLE_FIELDS: Record<keyof AgentPatch, boolean> = {
  name: false,
  role: true,
  kind: false,
  systemPrompt: false,
  llmModel: false,
  routingModel: true,
  routingConfig: true,
  maxDepth: false,
  handoff: false,
  fallbackReply: false,
}

export function createAgentRepository(options: {
  agents: AgentTable
  integrations: IntegrationTable
  statement: Statement
}): AgentRepository {
  const { agents, integrations, statement } = options

  const find = (companyId: number, id: number): Agent | null => {
    const agent = agents.rows.get(id)
    return agent !== undefined && agent.companyId === companyId ? agent : null
  }

  return {
    create: (input) =>
      statement((log) => {
        agents.lastId += 1
        const at = input.at.toISOString()
        const agent = snapshot<Agent>({
          id: agents.lastId,
          companyId: input.companyId,
          name: input.name,
          role: input.role,
          kind: input.kind,
          systemPrompt: input.systemPrompt,
          llmModel: input.llmModel,
          routingModel: input.routingModel,
          routingConfig: input.routingConfig,
          maxDepth: input.maxDepth,
          handoff: input.handoff,
          fallbackReply: input.fallbackReply,
          createdAt: at,
          updatedAt: at,
        })
        log.set(agents.rows, agent.id, agent)
        return agent
      }),

    // `lock` needs nothing here: one transaction runs at a time.
    get: ({ companyId, id }) => statement(() => find(companyId, id)),

    getMany: ({ companyId, ids }) =>
      statement(() => [...new Set(ids)].map((id) => find(companyId, id)).filter((agent) => agent !== null)),

    list: ({ companyId, limit, cursor }) =>
      statement(() => {
        let afterId = 0
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isNumberTuple(position, 1)) return emptyPage<Agent>()
          afterId = position[0]!
        }
        const remaining = [...agents.rows.values()]
          .filter((agent) => agent.companyId === companyId && agent.id > afterId)
          .sort((left, right) => left.id - right.id)
        return takePage(remaining, limit, (agent) => encodeCursor([agent.id]))
      }),

    update: ({ companyId, id, patch, at }) =>
      statement((log) => {
        const current = find(companyId, id)
        if (current === null) return null
        const fields: Record<string, unknown> = { ...current }
        for (const [key, removedByNull] of Object.entries(PATCHABLE_FIELDS)) {
          const value = patch[key as keyof AgentPatch]
          if (value === undefined) continue
          if (value === null && removedByNull) delete fields[key]
          else fields[key] = value
        }
        fields.updatedAt = at.toISOString()
        const agent = snapshot(fields as unknown as Agent, current)
        log.set(agents.rows, id, agent)
        return agent
      }),

    delete: ({ companyId, id }) =>
      statement((log) => {
        if (find(companyId, id) === null) return false
        log.delete(agents.rows, id)
        return true
      }),

    isReferenced: ({ companyId, id }) =>
      statement(() => {
        for (const integration of integrations.rows.values()) {
          if (integration.companyId === companyId && integration.entryAgentId === id) return true
        }
        for (const agent of agents.rows.values()) {
          if (agent.companyId !== companyId || agent.id === id) continue
          if (referencedAgentIds(agent).includes(id)) return true
        }
        return false
      }),
  }
}
