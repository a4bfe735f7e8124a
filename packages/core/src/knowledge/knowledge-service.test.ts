import { describe, expect, it } from 'vitest'
import { createMemoryStorage } from '../memory/memory-storage.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import { createManualClock } from '../testing/manual-clock.js'
import { seedChannel } from '../testing/seed-channel.js'
import { createKnowledgeService } from './knowledge-service.js'
import { createMemoryKnowledgeIndex } from './memory-knowledge-index.js'

/** The memory index, whose next `remove` fails once, as a database can between two statements. */
function indexFailingNextRemove(): KnowledgeIndex & { failNextRemove(): void } {
  const index = createMemoryKnowledgeIndex()
  let failRemove = false
  return {
    add: (document) => index.add(document),
    search: (options) => index.search(options),
    async remove(options) {
      if (failRemove) {
        failRemove = false
        throw new Error('the index could not be reached')
      }
      await index.remove(options)
    },
    failNextRemove() {
      failRemove = true
    },
  }
}

function setup() {
  const storage = createMemoryStorage()
  const knowledge = indexFailingNextRemove()
  let id = 0
  const service = createKnowledgeService({
    storage,
    knowledge,
    clock: createManualClock(),
    ids: { uuid: () => `00000000-0000-4000-8000-${(++id).toString(16).padStart(12, '0')}` },
  })
  return { storage, knowledge, service }
}

describe('createKnowledgeService', () => {
  it('answers NOT_FOUND for a document of another agent and leaves its passages searchable', async () => {
    const { storage, knowledge, service } = setup()
    const { companyId, agent } = await seedChannel(storage)
    const other = await seedChannel(storage, { companyId })
    const target = { companyId, agentId: agent.id }
    const added = (
      await service.add(target, { title: 'Returns', content: 'Refunds take five days.' })
    )._unsafeUnwrap()

    const removed = await service.remove({ companyId, agentId: other.agent.id, documentId: added.id })

    expect(removed._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect(await knowledge.search({ ...target, query: 'refunds', limit: 3 })).toHaveLength(1)
  })

  it('leaves no passage searchable once a removal that failed on the index is asked for again', async () => {
    const { storage, knowledge, service } = setup()
    const { companyId, agent } = await seedChannel(storage)
    const target = { companyId, agentId: agent.id }
    const added = (
      await service.add(target, { title: 'Returns', content: 'Refunds take five days.' })
    )._unsafeUnwrap()

    knowledge.failNextRemove()
    await expect(service.remove({ ...target, documentId: added.id })).rejects.toThrow(/could not be reached/)
    // The caller was told it failed, so it asks again; whatever that answers, the passage must go.
    await service.remove({ ...target, documentId: added.id })

    expect(await knowledge.search({ ...target, query: 'refunds', limit: 3 })).toEqual([])
  })
})
