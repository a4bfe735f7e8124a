import { describe, expect, it } from 'vitest'
import { DEFAULT_FALLBACK_REPLY } from '../domain/agent.js'
import { createKnowledgeService } from '../knowledge/knowledge-service.js'
import { createMemoryKnowledgeIndex } from '../knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import { createRandomIds } from '../runtime/system-clock.js'
import { createManualClock } from '../testing/manual-clock.js'
import { createAgentService } from './agent-service.js'

const COMPANY = 1
const OTHER_COMPANY = 2

function setup() {
  const storage = createMemoryStorage()
  const clock = createManualClock()
  return { storage, clock, agents: createAgentService({ storage, clock }) }
}

/** Agents whose deletion takes their knowledge base with them, and that knowledge base's service. */
function setupWithKnowledge() {
  const storage = createMemoryStorage()
  const clock = createManualClock()
  const index = createMemoryKnowledgeIndex()
  return {
    storage,
    index,
    agents: createAgentService({ storage, clock, knowledge: index }),
    knowledge: createKnowledgeService({ storage, knowledge: index, clock, ids: createRandomIds() }),
  }
}

describe('agent service', () => {
  it('creates an agent with the defaults of the contract', async () => {
    const { agents } = setup()
    const agent = (await agents.create(COMPANY, { name: 'Reception' }))._unsafeUnwrap()
    expect(agent).toMatchObject({
      companyId: COMPANY,
      name: 'Reception',
      kind: 'ai',
      llmModel: 'gpt-4o-mini',
      maxDepth: 3,
      fallbackReply: DEFAULT_FALLBACK_REPLY,
      handoff: {
        enabled: false,
        allowedTargets: [],
        announceHandoff: true,
        handoffMessageTemplate: '',
        messageHistoryDepth: 15,
        msgplatform: { sendSystemMessage: true },
      },
      createdAt: '2026-01-01T00:00:00.000Z',
    })
  })

  it('names every invalid field', async () => {
    const { agents } = setup()
    const error = (
      await agents.create(COMPANY, { name: '', handoff: { messageHistoryDepth: 51 } } as never)
    )._unsafeUnwrapErr()
    expect(error.code).toBe('VALIDATION_ERROR')
    expect(error.details).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'name' }),
        expect.objectContaining({ path: 'handoff.messageHistoryDepth' }),
      ]),
    )
  })

  it('accepts targets and routes of the same company only, naming the offending field', async () => {
    const { agents } = setup()
    const sales = (await agents.create(COMPANY, { name: 'Sales' }))._unsafeUnwrap()
    const foreign = (await agents.create(OTHER_COMPANY, { name: 'Foreign' }))._unsafeUnwrap()

    const rejected = await agents.create(COMPANY, {
      name: 'Reception',
      handoff: { enabled: true, allowedTargets: [sales.id, foreign.id] },
      routingConfig: { enabled: true, routes: [{ id: 'buy', agentId: 9999, description: 'buying' }] },
    })
    expect(rejected._unsafeUnwrapErr()).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [
        { path: 'handoff.allowedTargets.1', message: 'names no agent of this company' },
        { path: 'routingConfig.routes.0.agentId', message: 'names no agent of this company' },
      ],
    })

    const accepted = await agents.create(COMPANY, {
      name: 'Reception',
      handoff: { enabled: true, allowedTargets: [sales.id] },
      routingConfig: { enabled: true, routes: [{ id: 'buy', agentId: sales.id, description: 'buying' }] },
    })
    expect(accepted._unsafeUnwrap().routingConfig).toEqual({
      enabled: true,
      routes: [{ id: 'buy', agentId: sales.id, description: 'buying' }],
      confidenceThreshold: 0.5,
    })
  })

  it("treats another company's agent as missing", async () => {
    const { agents } = setup()
    const agent = (await agents.create(COMPANY, { name: 'Mine' }))._unsafeUnwrap()
    expect((await agents.get(OTHER_COMPANY, agent.id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect((await agents.update(OTHER_COMPANY, agent.id, { name: 'Stolen' }))._unsafeUnwrapErr().code).toBe(
      'NOT_FOUND',
    )
    expect((await agents.delete(OTHER_COMPANY, agent.id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect((await agents.list(OTHER_COMPANY, { limit: 50 })).items).toEqual([])
    expect((await agents.get(COMPANY, agent.id))._unsafeUnwrap().name).toBe('Mine')
  })

  it('lists a company’s agents oldest first, page by page', async () => {
    const { agents } = setup()
    for (const name of ['a', 'b', 'c']) await agents.create(COMPANY, { name })
    await agents.create(OTHER_COMPANY, { name: 'other' })
    const first = await agents.list(COMPANY, { limit: 2 })
    expect(first.items.map((agent) => agent.name)).toEqual(['a', 'b'])
    const second = await agents.list(COMPANY, { limit: 2, cursor: first.nextCursor! })
    expect(second.items.map((agent) => agent.name)).toEqual(['c'])
    expect(second.nextCursor).toBeNull()
  })

  it('updates the given fields, checks references, and removes a field patched to null', async () => {
    const { agents, clock } = setup()
    const sales = (await agents.create(COMPANY, { name: 'Sales' }))._unsafeUnwrap()
    const agent = (
      await agents.create(COMPANY, {
        name: 'Reception',
        role: 'reception',
        routingConfig: { enabled: true, routes: [{ id: 'buy', agentId: sales.id, description: 'buy' }] },
      })
    )._unsafeUnwrap()
    clock.set('2026-01-02T00:00:00.000Z')

    const bad = await agents.update(COMPANY, agent.id, { handoff: { allowedTargets: [424242] } })
    expect(bad._unsafeUnwrapErr().details).toEqual([
      { path: 'handoff.allowedTargets.0', message: 'names no agent of this company' },
    ])

    const updated = (
      await agents.update(COMPANY, agent.id, { name: 'Front desk', role: null, routingConfig: null })
    )._unsafeUnwrap()
    expect(updated.name).toBe('Front desk')
    expect(updated).not.toHaveProperty('role')
    expect(updated).not.toHaveProperty('routingConfig')
    expect(updated.updatedAt).toBe('2026-01-02T00:00:00.000Z')
    expect(updated.createdAt).toBe('2026-01-01T00:00:00.000Z')
  })

  it('changes only the nested handoff and routing fields a patch sends, and keeps the others', async () => {
    const { agents } = setup()
    const sales = (await agents.create(COMPANY, { name: 'Sales' }))._unsafeUnwrap()
    const agent = (
      await agents.create(COMPANY, {
        name: 'Reception',
        handoff: {
          enabled: true,
          allowedTargets: [sales.id],
          handoffMessageTemplate: 'Passing you to {{agent}}',
          messageHistoryDepth: 20,
          msgplatform: { targetOperatorId: 7, targetGroupId: 8, sendSystemMessage: false },
        },
        routingConfig: {
          enabled: true,
          routes: [{ id: 'buy', agentId: sales.id, description: 'buy' }],
          confidenceThreshold: 0.9,
        },
      })
    )._unsafeUnwrap()

    const updated = (
      await agents.update(COMPANY, agent.id, {
        handoff: { announceHandoff: false, msgplatform: { targetGroupId: null, sendSystemMessage: true } },
        routingConfig: { enabled: false },
      })
    )._unsafeUnwrap()

    expect(updated.handoff).toEqual({
      ...agent.handoff,
      announceHandoff: false,
      msgplatform: { targetOperatorId: 7, sendSystemMessage: true },
    })
    expect(updated.routingConfig).toEqual({ ...agent.routingConfig, enabled: false })
    expect((await agents.get(COMPANY, agent.id))._unsafeUnwrap()).toEqual(updated)

    const plain = (await agents.create(COMPANY, { name: 'Plain' }))._unsafeUnwrap()
    const routed = (
      await agents.update(COMPANY, plain.id, {
        routingConfig: { routes: [{ id: 'buy', agentId: sales.id, description: 'buy' }] },
      })
    )._unsafeUnwrap()
    expect(routed.routingConfig).toEqual({
      enabled: false,
      routes: [{ id: 'buy', agentId: sales.id, description: 'buy' }],
      confidenceThreshold: 0.5,
    })
  })

  it('stores any maxDepth from 1 and an empty role, as given', async () => {
    const { agents } = setup()
    const deep = (await agents.create(COMPANY, { name: 'Deep', maxDepth: 1001, role: '' }))._unsafeUnwrap()
    expect(deep).toMatchObject({ maxDepth: 1001, role: '' })
    expect(
      (await agents.update(COMPANY, deep.id, { maxDepth: 2_147_483_647 }))._unsafeUnwrap().maxDepth,
    ).toBe(2_147_483_647)
    expect((await agents.create(COMPANY, { name: 'Shallow', maxDepth: 0 }))._unsafeUnwrapErr().code).toBe(
      'VALIDATION_ERROR',
    )
  })

  it('refuses to delete an entry agent or a target, with CONFLICT', async () => {
    const { agents, storage, clock } = setup()
    const entry = (await agents.create(COMPANY, { name: 'Entry' }))._unsafeUnwrap()
    const target = (await agents.create(COMPANY, { name: 'Target' }))._unsafeUnwrap()
    const caller = (
      await agents.create(COMPANY, { name: 'Caller', handoff: { allowedTargets: [target.id] } })
    )._unsafeUnwrap()
    await storage.integrations.create({
      companyId: COMPANY,
      type: 'msgplatform',
      name: 'main',
      active: true,
      entryAgentId: entry.id,
      config: {},
      webhookSecret: null,
      at: clock.now(),
    })

    expect((await agents.delete(COMPANY, entry.id))._unsafeUnwrapErr().code).toBe('CONFLICT')
    expect((await agents.delete(COMPANY, target.id))._unsafeUnwrapErr().code).toBe('CONFLICT')
    expect((await agents.delete(COMPANY, caller.id)).isOk()).toBe(true)
    // Once nobody names it any more, the target can go.
    expect((await agents.delete(COMPANY, target.id)).isOk()).toBe(true)
    expect((await agents.get(COMPANY, target.id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
  })

  it("deletes the agent's knowledge base with it, every document and its passages, and keeps the others'", async () => {
    const { storage, index, agents, knowledge } = setupWithKnowledge()
    const leaving = (await agents.create(COMPANY, { name: 'Leaving' }))._unsafeUnwrap()
    const staying = (await agents.create(COMPANY, { name: 'Staying' }))._unsafeUnwrap()
    // More than a page of documents, so the deletion cannot stop at the first one.
    for (let index = 0; index < 120; index++) {
      await knowledge.add(
        { companyId: COMPANY, agentId: leaving.id },
        { title: `Doc ${index}`, content: 'Refunds take 5 days.' },
      )
    }
    await knowledge.add(
      { companyId: COMPANY, agentId: staying.id },
      { title: 'Kept', content: 'Refunds take 5 days.' },
    )
    const search = (agentId: number) =>
      index.search({ companyId: COMPANY, agentId, query: 'refunds', limit: 5 })
    const documents = (agentId: number) =>
      storage.knowledgeDocuments.list({ companyId: COMPANY, agentId, limit: 100 })

    expect((await agents.delete(COMPANY, leaving.id)).isOk()).toBe(true)

    expect((await documents(leaving.id)).items).toEqual([])
    expect(await search(leaving.id)).toEqual([])
    expect((await documents(staying.id)).items.map((document) => document.title)).toEqual(['Kept'])
    expect(await search(staying.id)).toHaveLength(1)
  })

  it('keeps the knowledge base of an agent it refuses to delete', async () => {
    const { storage, index, agents, knowledge } = setupWithKnowledge()
    const target = (await agents.create(COMPANY, { name: 'Target' }))._unsafeUnwrap()
    await agents.create(COMPANY, { name: 'Caller', handoff: { allowedTargets: [target.id] } })
    await knowledge.add(
      { companyId: COMPANY, agentId: target.id },
      { title: 'Kept', content: 'Refunds take 5 days.' },
    )

    expect((await agents.delete(COMPANY, target.id))._unsafeUnwrapErr().code).toBe('CONFLICT')

    expect(
      await index.search({ companyId: COMPANY, agentId: target.id, query: 'refunds', limit: 5 }),
    ).toHaveLength(1)
    expect(
      (await storage.knowledgeDocuments.list({ companyId: COMPANY, agentId: target.id, limit: 10 })).items,
    ).toHaveLength(1)
  })
})
