import type { Integration, IntegrationPatch, IntegrationRepository } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isNumberTuple, takePage } from './paging.js'
import { snapshot } from './snapshot.js'
import type { Statement } from './undo-log.js'

export interface IntegrationTable {
  readonly rows: Map<string, Integration>
  /** Like a database sequence, not taken back by a rollback. */
  lastId: number
}

export function createIntegrationTable(): IntegrationTable {
  return { rows: new Map(), lastId: 0 }
}

/** Listed so that a field added to the patch type fails the build until it is handled here. */
const PATCHABLE_FIELDS: Record<keyof IntegrationPatch, true> = {
  name: true,
  active: true,
  entryAgentId: true,
  config: true,
  webhookSecret: true,
}

export function createIntegrationRepository(options: {
  integrations: IntegrationTable
  statement: Statement
}): IntegrationRepository {
  const { integrations, statement } = options

  const find = (id: string, companyId: number | undefined): Integration | null => {
    const integration = integrations.rows.get(id)
    if (integration === undefined) return null
    return companyId === undefined || integration.companyId === companyId ? integration : null
  }

  return {
    create: (input) =>
      statement((log) => {
        integrations.lastId += 1
        const at = input.at.toISOString()
        const integration = snapshot<Integration>({
          id: String(integrations.lastId),
          companyId: input.companyId,
          type: input.type,
          name: input.name,
          active: input.active,
          entryAgentId: input.entryAgentId,
          config: input.config,
          webhookSecret: input.webhookSecret,
          createdAt: at,
          updatedAt: at,
        })
        log.set(integrations.rows, integration.id, integration)
        return integration
      }),

    // `lock` needs nothing here: one transaction runs at a time.
    get: ({ id, companyId }) => statement(() => find(id, companyId)),

    getMany: ({ ids }) =>
      statement(() => {
        const found: Integration[] = []
        for (const id of new Set(ids)) {
          const integration = find(id, undefined)
          if (integration !== null) found.push(integration)
        }
        return found
      }),

    list: ({ companyId, limit, cursor }) =>
      statement(() => {
        let afterId = 0
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isNumberTuple(position, 1)) return emptyPage<Integration>()
          afterId = position[0]!
        }
        const remaining = [...integrations.rows.values()]
          .filter((integration) => integration.companyId === companyId && Number(integration.id) > afterId)
          .sort((left, right) => Number(left.id) - Number(right.id))
        return takePage(remaining, limit, (integration) => encodeCursor([Number(integration.id)]))
      }),

    update: ({ companyId, id, patch, at }) =>
      statement((log) => {
        const current = find(id, companyId)
        if (current === null) return null
        const fields: Record<string, unknown> = { ...current }
        for (const key of Object.keys(PATCHABLE_FIELDS)) {
          const value = patch[key as keyof IntegrationPatch]
          if (value !== undefined) fields[key] = value
        }
        fields.updatedAt = at.toISOString()
        const integration = snapshot(fields as unknown as Integration, current)
        log.set(integrations.rows, id, integration)
        return integration
      }),

    delete: ({ companyId, id }) =>
      statement((log) => {
        if (find(id, companyId) === null) return false
        log.delete(integrations.rows, id)
        return true
      }),
  }
}
