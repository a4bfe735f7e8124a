import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Agent } from '../../domain/agent.js'
import type { Message, Session } from '../../domain/session.js'
import { SessionClosedError, type Storage } from '../../ports/storage.js'
import { runAccountStorageConformance } from './account-storage-conformance.js'
import { runHumanTransferConformance } from './human-transfer-conformance.js'
import {
  at,
  type Channel,
  cleanUp,
  companyIdSource,
  createAgent,
  createChannel,
  createIntegration,
  createSession,
  expectedError,
  insertMessage,
  newAgentInput,
  newMessageInput,
  newSessionInput,
  type StorageConformanceOptions,
  tryToMutate,
} from './storage-fixtures.js'

const HOUR = 3_600_000
const CENTURY = 100 * 365 * 24 * HOUR

function idsOf(items: readonly { id: number | string }[]): Array<number | string> {
  return items.map((item) => item.id)
}

function sortedIds(rows: readonly { id: string }[]): string[] {
  return rows.map((row) => row.id).sort()
}

function sortedNumbers(values: readonly number[]): number[] {
  return [...values].sort((left, right) => left - right)
}

/**
 * The storage contract every adapter passes: run it against a fresh or shared database. Each test
 * uses companies, ids and customers of its own, so tables need not be empty.
 */
export function runStorageConformance(
  name: string,
  createStorage: () => Promise<Storage> | Storage,
  options?: StorageConformanceOptions,
): void {
  const newCompanyId = companyIdSource(options)

  describe(`${name}: storage conformance`, () => {
    let storage: Storage
    let companyId: number
    let otherCompanyId: number

    beforeEach(async () => {
      storage = await createStorage()
      companyId = await newCompanyId(storage)
      otherCompanyId = await newCompanyId(storage)
    })

    afterEach(async () => {
      await cleanUp(storage, options)
    })

    describe('agents', () => {
      it('creates agents with increasing integer ids and the given time', async () => {
        const first = await createAgent(storage, companyId, { name: 'Sales', role: 'Sales lead' })
        const second = await createAgent(storage, companyId)

        expect(Number.isInteger(first.id)).toBe(true)
        expect(first.id).toBeGreaterThan(0)
        expect(second.id).toBeGreaterThan(first.id)
        expect(first).toMatchObject({
          companyId,
          name: 'Sales',
          role: 'Sales lead',
          kind: 'ai',
          maxDepth: 3,
          fallbackReply: 'Sorry, try again later.',
          createdAt: at().toISOString(),
          updatedAt: at().toISOString(),
        })
        expect(second.role).toBeUndefined()
        expect(second.routingConfig).toBeUndefined()
        expect(await storage.agents.get({ companyId, id: first.id })).toEqual(first)
      })

      it('keeps routing settings and a null fallback reply', async () => {
        const target = await createAgent(storage, companyId)
        const routingConfig = {
          enabled: true,
          routes: [{ id: 'billing', agentId: target.id, description: 'Invoices' }],
          confidenceThreshold: 0.7,
        }
        const agent = await createAgent(storage, companyId, {
          routingModel: 'small-model',
          routingConfig,
          fallbackReply: null,
        })

        const stored = await storage.agents.get({ companyId, id: agent.id })
        expect(stored).toMatchObject({ routingModel: 'small-model', routingConfig, fallbackReply: null })
      })

      it("never returns another company's agent", async () => {
        const agent = await createAgent(storage, companyId)

        expect(await storage.agents.get({ companyId: otherCompanyId, id: agent.id })).toBeNull()
        expect(await storage.agents.get({ companyId, id: agent.id + 1_000_000 })).toBeNull()
      })

      it('gets many: only the existing agents of the company, once each', async () => {
        const first = await createAgent(storage, companyId)
        const second = await createAgent(storage, companyId)
        const foreign = await createAgent(storage, otherCompanyId)

        const found = await storage.agents.getMany({
          companyId,
          ids: [first.id, second.id, foreign.id, second.id + 1_000_000, first.id],
        })
        expect(sortedNumbers(found.map((agent) => agent.id))).toEqual([first.id, second.id])
        expect(await storage.agents.getMany({ companyId, ids: [] })).toEqual([])
      })

      it('lists the company agents by id, page by page', async () => {
        const created: Agent[] = []
        for (let index = 0; index < 5; index++) created.push(await createAgent(storage, companyId))
        await createAgent(storage, otherCompanyId)

        const first = await storage.agents.list({ companyId, limit: 2 })
        expect(idsOf(first.items)).toEqual(idsOf(created.slice(0, 2)))
        expect(first.nextCursor).toEqual(expect.any(String))
        const second = await storage.agents.list({ companyId, limit: 2, cursor: first.nextCursor! })
        expect(idsOf(second.items)).toEqual(idsOf(created.slice(2, 4)))
        const third = await storage.agents.list({ companyId, limit: 2, cursor: second.nextCursor! })
        expect(idsOf(third.items)).toEqual(idsOf(created.slice(4)))
        expect(third.nextCursor).toBeNull()

        const exact = await storage.agents.list({ companyId, limit: 5 })
        expect(exact.items).toHaveLength(5)
        expect(exact.nextCursor).toBeNull()
        expect(await storage.agents.list({ companyId: await newCompanyId(storage), limit: 10 })).toEqual({
          items: [],
          nextCursor: null,
        })
      })

      it('updates: null removes role, routing model and routing config; undefined leaves a field', async () => {
        const target = await createAgent(storage, companyId)
        const agent = await createAgent(storage, companyId, {
          role: 'Support',
          routingModel: 'small-model',
          routingConfig: { enabled: true, routes: [], confidenceThreshold: 0.5 },
        })
        const handoff = { ...agent.handoff, enabled: true, allowedTargets: [target.id] }

        const updated = await storage.agents.update({
          companyId,
          id: agent.id,
          patch: {
            name: 'Renamed',
            role: null,
            routingModel: null,
            routingConfig: null,
            fallbackReply: null,
            handoff,
            systemPrompt: undefined,
          },
          at: at(HOUR),
        })

        expect(updated).toMatchObject({
          id: agent.id,
          companyId,
          name: 'Renamed',
          kind: 'ai',
          systemPrompt: agent.systemPrompt,
          llmModel: agent.llmModel,
          maxDepth: agent.maxDepth,
          handoff,
          fallbackReply: null,
          createdAt: agent.createdAt,
          updatedAt: at(HOUR).toISOString(),
        })
        expect(updated?.role).toBeUndefined()
        expect(updated?.routingModel).toBeUndefined()
        expect(updated?.routingConfig).toBeUndefined()
        expect(await storage.agents.get({ companyId, id: agent.id })).toEqual(updated)

        const touched = await storage.agents.update({
          companyId,
          id: agent.id,
          patch: { maxDepth: 5 },
          at: at(2 * HOUR),
        })
        expect(touched).toEqual({ ...updated, maxDepth: 5, updatedAt: at(2 * HOUR).toISOString() })
      })

      it("does not update another company's or a missing agent", async () => {
        const agent = await createAgent(storage, companyId)

        const patch = { name: 'Taken over' }
        expect(
          await storage.agents.update({ companyId: otherCompanyId, id: agent.id, patch, at: at(HOUR) }),
        ).toBeNull()
        expect(
          await storage.agents.update({ companyId, id: agent.id + 1_000_000, patch, at: at(HOUR) }),
        ).toBeNull()
        expect(await storage.agents.get({ companyId, id: agent.id })).toEqual(agent)
      })

      it('deletes an agent of the company only', async () => {
        const agent = await createAgent(storage, companyId)

        expect(await storage.agents.delete({ companyId: otherCompanyId, id: agent.id })).toBe(false)
        expect(await storage.agents.get({ companyId, id: agent.id })).toEqual(agent)
        expect(await storage.agents.delete({ companyId, id: agent.id })).toBe(true)
        expect(await storage.agents.get({ companyId, id: agent.id })).toBeNull()
        expect(await storage.agents.delete({ companyId, id: agent.id })).toBe(false)
      })

      it('tells one of ten transactions that read and delete an agent at once that it deleted it', async () => {
        const agent = await createAgent(storage, companyId)

        const deleted = await Promise.all(
          Array.from({ length: 10 }, () =>
            storage.transaction(async (tx) => {
              const found = await tx.agents.get({ companyId, id: agent.id })
              return found !== null && (await tx.agents.delete({ companyId, id: agent.id }))
            }),
          ),
        )

        expect(deleted.filter(Boolean)).toHaveLength(1)
      })

      // A PATCH merges its handoff or routing settings into the agent it read: two at once must
      // not each write their merge over a copy the other's commit already made stale.
      it('lands every one of 10 concurrent transactions that read an agent for an edit and change it', async () => {
        const agent = await createAgent(storage, companyId)

        await Promise.all(
          Array.from({ length: 10 }, (_, index) =>
            storage.transaction(async (tx) => {
              const current = (await tx.agents.get({ companyId, id: agent.id, lock: 'edit' }))!
              const systemPrompt = `${current.systemPrompt}[${index}]`
              await tx.agents.update({ companyId, id: agent.id, patch: { systemPrompt }, at: at(HOUR) })
            }),
          ),
        )

        const final = (await storage.agents.get({ companyId, id: agent.id }))!
        expect(final.systemPrompt.match(/\[\d+\]/g)?.sort()).toEqual(
          Array.from({ length: 10 }, (_, index) => `[${index}]`).sort(),
        )
      })

      it('knows when an entry agent, a handoff target or a route target is referenced', async () => {
        const lone = await createAgent(storage, companyId)
        const entry = await createAgent(storage, companyId)
        const handoffTarget = await createAgent(storage, companyId)
        const routeTarget = await createAgent(storage, companyId)
        await createIntegration(storage, companyId, entry.id)
        const caller = await createAgent(storage, companyId, {
          handoff: { ...lone.handoff, enabled: true, allowedTargets: [handoffTarget.id] },
          routingConfig: {
            enabled: true,
            routes: [{ id: 'orders', agentId: routeTarget.id, description: 'Order questions' }],
            confidenceThreshold: 0.5,
          },
        })

        const referenced = (id: number) => storage.agents.isReferenced({ companyId, id })
        expect(await referenced(lone.id)).toBe(false)
        expect(await referenced(entry.id)).toBe(true)
        expect(await referenced(handoffTarget.id)).toBe(true)
        expect(await referenced(routeTarget.id)).toBe(true)
        expect(await referenced(caller.id)).toBe(false)

        await storage.agents.delete({ companyId, id: caller.id })
        expect(await referenced(handoffTarget.id)).toBe(false)
        expect(await referenced(routeTarget.id)).toBe(false)
      })

      it('does not count an agent naming itself or an agent of another company', async () => {
        const agent = await createAgent(storage, companyId)
        await storage.agents.update({
          companyId,
          id: agent.id,
          patch: { handoff: { ...agent.handoff, enabled: true, allowedTargets: [agent.id] } },
          at: at(HOUR),
        })
        await createAgent(storage, otherCompanyId, {
          handoff: { ...agent.handoff, enabled: true, allowedTargets: [agent.id] },
        })

        expect(await storage.agents.isReferenced({ companyId, id: agent.id })).toBe(false)
      })

      it('stores a snapshot: changing a returned or an input object changes nothing stored', async () => {
        const input = newAgentInput(companyId)
        const agent = await storage.agents.create(input)
        const original = structuredClone(agent)

        tryToMutate(agent, 'name', 'Changed')
        tryToMutate(agent.handoff.allowedTargets, '0', 42)
        input.handoff.allowedTargets.push(42)
        ;(input as { name: string }).name = 'Changed too'

        expect(await storage.agents.get({ companyId, id: agent.id })).toEqual(original)
      })
    })

    describe('integrations', () => {
      it('reads several integrations of any company at once', async () => {
        const agent = await createAgent(storage, companyId)
        const first = await createIntegration(storage, companyId, agent.id)
        const second = await createIntegration(storage, companyId, agent.id)
        const otherAgent = await createAgent(storage, otherCompanyId)
        const elsewhere = await createIntegration(storage, otherCompanyId, otherAgent.id)

        const found = await storage.integrations.getMany({
          ids: [second.id, 'not-an-id', elsewhere.id, second.id, '999999999999', first.id],
        })

        expect(sortedIds(found)).toEqual(sortedIds([first, second, elsewhere]))
        expect(found.find((integration) => integration.id === first.id)).toEqual(first)
        expect(await storage.integrations.getMany({ ids: [] })).toEqual([])
      })

      it('creates integrations whose ids are strings of digits', async () => {
        const agent = await createAgent(storage, companyId)
        const integration = await createIntegration(storage, companyId, agent.id)
        const second = await createIntegration(storage, companyId, agent.id)

        expect(integration.id).toMatch(/^\d+$/)
        expect(second.id).toMatch(/^\d+$/)
        expect(second.id).not.toBe(integration.id)
        expect(integration).toMatchObject({
          companyId,
          type: 'webchat',
          name: 'Website chat',
          active: true,
          entryAgentId: agent.id,
          config: { greeting: 'Hello' },
          webhookSecret: null,
          createdAt: at().toISOString(),
          updatedAt: at().toISOString(),
        })
      })

      it('gets by id within the company, or from any company without one', async () => {
        const agent = await createAgent(storage, companyId)
        const integration = await createIntegration(storage, companyId, agent.id)

        expect(await storage.integrations.get({ id: integration.id, companyId })).toEqual(integration)
        expect(await storage.integrations.get({ id: integration.id })).toEqual(integration)
        expect(await storage.integrations.get({ id: integration.id, companyId: otherCompanyId })).toBeNull()
        expect(await storage.integrations.get({ id: '999999999999' })).toBeNull()
        // Another text of the same number names no integration: its id is that string of digits.
        expect(await storage.integrations.get({ id: `0${integration.id}` })).toBeNull()
        expect(await storage.integrations.getMany({ ids: [`00${integration.id}`] })).toEqual([])
      })

      it('lists the company integrations page by page', async () => {
        const agent = await createAgent(storage, companyId)
        const created = [
          await createIntegration(storage, companyId, agent.id),
          await createIntegration(storage, companyId, agent.id),
          await createIntegration(storage, companyId, agent.id),
        ]
        const foreignAgent = await createAgent(storage, otherCompanyId)
        await createIntegration(storage, otherCompanyId, foreignAgent.id)

        const first = await storage.integrations.list({ companyId, limit: 2 })
        expect(first.items).toHaveLength(2)
        expect(first.nextCursor).toEqual(expect.any(String))
        const second = await storage.integrations.list({ companyId, limit: 2, cursor: first.nextCursor! })
        expect(second.items).toHaveLength(1)
        expect(second.nextCursor).toBeNull()
        expect(idsOf([...first.items, ...second.items])).toEqual(idsOf(created))
        expect((await storage.integrations.list({ companyId, limit: 3 })).nextCursor).toBeNull()
      })

      it('updates the given fields of an integration of the company', async () => {
        const agent = await createAgent(storage, companyId)
        const otherAgent = await createAgent(storage, companyId)
        const integration = await createIntegration(storage, companyId, agent.id)

        const updated = await storage.integrations.update({
          companyId,
          id: integration.id,
          patch: { name: 'Shop chat', active: false, entryAgentId: otherAgent.id, webhookSecret: 'secret' },
          at: at(HOUR),
        })
        expect(updated).toEqual({
          ...integration,
          name: 'Shop chat',
          active: false,
          entryAgentId: otherAgent.id,
          webhookSecret: 'secret',
          updatedAt: at(HOUR).toISOString(),
        })

        const cleared = await storage.integrations.update({
          companyId,
          id: integration.id,
          patch: { webhookSecret: null, config: { greeting: 'Hi', colors: ['blue'] } },
          at: at(2 * HOUR),
        })
        expect(cleared).toMatchObject({
          webhookSecret: null,
          config: { greeting: 'Hi', colors: ['blue'] },
          name: 'Shop chat',
        })
        expect(await storage.integrations.get({ id: integration.id })).toEqual(cleared)

        expect(
          await storage.integrations.update({
            companyId: otherCompanyId,
            id: integration.id,
            patch: { name: 'Stolen' },
            at: at(3 * HOUR),
          }),
        ).toBeNull()
        expect(await storage.integrations.get({ id: integration.id })).toEqual(cleared)
      })

      // A PATCH merges the config it is given into the one it read (the apiToken it never sees):
      // two at once must not each write their merge over a copy the other's commit made stale.
      it('lands every one of 10 concurrent transactions that read an integration for an edit and change it', async () => {
        const agent = await createAgent(storage, companyId)
        const integration = await createIntegration(storage, companyId, agent.id)

        await Promise.all(
          Array.from({ length: 10 }, (_, index) =>
            storage.transaction(async (tx) => {
              const current = (await tx.integrations.get({ id: integration.id, companyId, lock: true }))!
              const config = { ...current.config, [`key${index}`]: index }
              await tx.integrations.update({ companyId, id: integration.id, patch: { config }, at: at(HOUR) })
            }),
          ),
        )

        const final = (await storage.integrations.get({ id: integration.id, companyId }))!
        expect(final.config).toEqual({
          greeting: 'Hello',
          ...Object.fromEntries(Array.from({ length: 10 }, (_, index) => [`key${index}`, index])),
        })
      })

      it('deletes an integration of the company only', async () => {
        const agent = await createAgent(storage, companyId)
        const integration = await createIntegration(storage, companyId, agent.id)

        expect(await storage.integrations.delete({ companyId: otherCompanyId, id: integration.id })).toBe(
          false,
        )
        expect(await storage.integrations.delete({ companyId, id: integration.id })).toBe(true)
        expect(await storage.integrations.get({ id: integration.id })).toBeNull()
        expect(await storage.integrations.delete({ companyId, id: integration.id })).toBe(false)
      })
    })

    describe('sessions', () => {
      let channel: Channel

      beforeEach(async () => {
        channel = await createChannel(storage, companyId)
      })

      it('creates a session with a version and gets it back within the company', async () => {
        const input = newSessionInput({
          companyId,
          integrationId: channel.integration.id,
          agentId: channel.agent.id,
          clientId: 'client-1',
        })
        const session = await storage.sessions.create(input)

        expect(session).toEqual({ ...input, version: expect.any(Number) })
        expect(await storage.sessions.get({ id: session.id, companyId })).toEqual(session)
        expect(await storage.sessions.get({ id: session.id })).toEqual(session)
        expect(await storage.sessions.get({ id: session.id, companyId: otherCompanyId })).toBeNull()
        expect(await storage.sessions.get({ id: randomUUID() })).toBeNull()
      })

      // A session's times are ISO text; past the year 9999 it has six digits and a sign.
      it('keeps creation and update times past the year 9999', async () => {
        const createdAt = '+012000-01-01T00:00:00.000Z'
        const updatedAt = '+012000-06-01T10:20:30.456Z'
        const input = {
          ...newSessionInput({
            companyId,
            integrationId: channel.integration.id,
            agentId: channel.agent.id,
            clientId: randomUUID(),
          }),
          createdAt,
          updatedAt: createdAt,
        }
        const session = await storage.sessions.create(input)
        const saved = await storage.sessions.save({ ...session, updatedAt })

        expect(session).toMatchObject({ createdAt, updatedAt: createdAt })
        expect(saved).toMatchObject({ createdAt, updatedAt })
        const listed = await storage.sessions.list({ companyId, limit: 1 })
        expect(listed.items.map((item) => item.id)).toEqual([session.id])
      })

      it('refuses a second open session for the same customer on the same integration', async () => {
        const clientId = randomUUID()
        const open = await createSession(storage, channel, { clientId })

        await expect(createSession(storage, channel, { clientId })).rejects.toThrow()
        await expect(createSession(storage, channel, { clientId, state: 'paused' })).rejects.toThrow()
        expect(await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId })).toEqual(
          open,
        )

        await createSession(storage, channel)
        const otherIntegration = await createIntegration(storage, companyId, channel.agent.id)
        await createSession(storage, { ...channel, integration: otherIntegration }, { clientId })
      })

      it('counts a paused session as open', async () => {
        const clientId = randomUUID()
        const paused = await createSession(storage, channel, { clientId, state: 'paused' })

        await expect(createSession(storage, channel, { clientId })).rejects.toThrow()
        expect(await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId })).toEqual(
          paused,
        )
      })

      it('opens a new session once the previous one is closed', async () => {
        const clientId = randomUUID()
        const first = await createSession(storage, channel, { clientId })
        const closed = await storage.sessions.save({
          ...first,
          state: 'closed',
          updatedAt: at(HOUR).toISOString(),
        })
        expect(closed?.state).toBe('closed')
        expect(
          await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId }),
        ).toBeNull()

        const second = await createSession(storage, channel, { clientId, createdAt: at(2 * HOUR) })
        expect(await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId })).toEqual(
          second,
        )
        expect(await storage.sessions.get({ id: first.id })).toEqual(closed)
      })

      it('finds no open session for an unknown customer', async () => {
        expect(
          await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId: randomUUID() }),
        ).toBeNull()
      })

      it('saves with compare-and-set on the version', async () => {
        const session = await createSession(storage, channel)
        const pauseState = { pausedAt: at(HOUR).toISOString(), reason: 'Lunch' }

        const saved = await storage.sessions.save({
          ...session,
          state: 'paused',
          pauseState,
          updatedAt: at(HOUR).toISOString(),
        })
        expect(saved).toEqual({
          ...session,
          state: 'paused',
          pauseState,
          updatedAt: at(HOUR).toISOString(),
          version: session.version + 1,
        })
        expect(await storage.sessions.get({ id: session.id })).toEqual(saved)

        expect(await storage.sessions.save({ ...session, activeAgentId: channel.agent.id })).toBeNull()
        expect(await storage.sessions.get({ id: session.id })).toEqual(saved)

        const resumed = await storage.sessions.save({ ...saved!, state: 'ongoing', pauseState: undefined })
        expect(resumed?.version).toBe(session.version + 2)
        expect((await storage.sessions.get({ id: session.id }))?.pauseState).toBeUndefined()
      })

      it('does not save a session that does not exist', async () => {
        const input = newSessionInput({
          companyId,
          integrationId: channel.integration.id,
          agentId: channel.agent.id,
        })
        expect(await storage.sessions.save({ ...input, version: 1 })).toBeNull()
        expect(await storage.sessions.get({ id: input.id })).toBeNull()
      })

      it('keeps metadata whole: agent path, shared context, routing and errors', async () => {
        const session = await createSession(storage, channel)
        const metadata: Session['metadata'] = {
          agentPath: [
            {
              agentId: channel.agent.id,
              agentName: channel.agent.name,
              timestamp: at().toISOString(),
              via: 'initial',
            },
            {
              agentId: channel.agent.id,
              agentName: channel.agent.name,
              confidence: 0.9,
              routeId: 'billing',
              depth: 1,
              timestamp: at(1).toISOString(),
              via: 'entry_routing',
            },
          ],
          sharedContext: {
            facts: { orderId: '42' },
            journey: [{ step: 'Asked about order', at: at(2).toISOString() }],
          },
          routing: { reason: 'resolved', depth: 1, at: at(1).toISOString() },
          errors: [
            {
              code: 'TOOL_LOOP_LIMIT',
              message: 'Too many tool calls',
              agentId: channel.agent.id,
              at: at(3).toISOString(),
            },
          ],
        }

        const saved = await storage.sessions.save({ ...session, metadata })
        expect(saved?.metadata).toEqual(metadata)
        expect((await storage.sessions.get({ id: session.id }))?.metadata).toEqual(metadata)
      })

      it('keeps a fact named __proto__ or after another Object.prototype member as an own key', async () => {
        const session = await createSession(storage, channel)
        // JSON.parse makes such keys own properties, as a model's tool arguments arrive.
        const facts = JSON.parse('{"__proto__":"kept","constructor":"too","toString":"also"}') as Record<
          string,
          string
        >
        const metadata: Session['metadata'] = {
          ...session.metadata,
          sharedContext: { facts, journey: [] },
        }
        await storage.sessions.save({ ...session, metadata })
        const stored = await storage.sessions.get({ id: session.id })
        expect(Object.entries(stored?.metadata.sharedContext.facts ?? {})).toEqual([
          ['__proto__', 'kept'],
          ['constructor', 'too'],
          ['toString', 'also'],
        ])
      })

      it('lists newest first, filtered by state and integration, page by page', async () => {
        const oldest = await createSession(storage, channel, { createdAt: at(0) })
        const newest = await createSession(storage, channel, { createdAt: at(2 * HOUR) })
        const middle = await createSession(storage, channel, { createdAt: at(HOUR), state: 'closed' })
        const otherIntegration = await createIntegration(storage, companyId, channel.agent.id)
        const elsewhere = await createSession(
          storage,
          { ...channel, integration: otherIntegration },
          { createdAt: at(3 * HOUR) },
        )
        const foreignChannel = await createChannel(storage, otherCompanyId)
        await createSession(storage, foreignChannel, { createdAt: at(4 * HOUR) })

        const all = await storage.sessions.list({ companyId, limit: 10 })
        expect(idsOf(all.items)).toEqual(idsOf([elsewhere, newest, middle, oldest]))
        expect(all.nextCursor).toBeNull()

        const first = await storage.sessions.list({ companyId, limit: 3 })
        expect(idsOf(first.items)).toEqual(idsOf([elsewhere, newest, middle]))
        const second = await storage.sessions.list({ companyId, limit: 3, cursor: first.nextCursor! })
        expect(idsOf(second.items)).toEqual(idsOf([oldest]))
        expect(second.nextCursor).toBeNull()

        const closed = await storage.sessions.list({ companyId, state: 'closed', limit: 10 })
        expect(idsOf(closed.items)).toEqual(idsOf([middle]))
        const ongoing = await storage.sessions.list({ companyId, state: 'ongoing', limit: 1 })
        expect(idsOf(ongoing.items)).toEqual(idsOf([elsewhere]))
        const rest = await storage.sessions.list({
          companyId,
          state: 'ongoing',
          limit: 1,
          cursor: ongoing.nextCursor!,
        })
        expect(idsOf(rest.items)).toEqual(idsOf([newest]))

        const byIntegration = await storage.sessions.list({
          companyId,
          integrationId: channel.integration.id,
          state: 'ongoing',
          limit: 10,
        })
        expect(idsOf(byIntegration.items)).toEqual(idsOf([newest, oldest]))
      })

      it('pages through sessions created at the same instant without losing or repeating one', async () => {
        const created: Session[] = []
        for (let index = 0; index < 5; index++) created.push(await createSession(storage, channel))

        const seen: Array<number | string> = []
        let cursor: string | undefined
        for (let pages = 0; pages < 5; pages++) {
          const page = await storage.sessions.list({ companyId, limit: 2, cursor })
          seen.push(...idsOf(page.items))
          if (page.nextCursor === null) break
          cursor = page.nextCursor
        }
        expect(seen).toHaveLength(5)
        expect(new Set(seen)).toEqual(new Set(idsOf(created)))
      })

      it('stores a snapshot: changing a returned session changes nothing stored', async () => {
        const session = await createSession(storage, channel)
        const original = structuredClone(session)

        tryToMutate(session, 'state', 'closed')
        tryToMutate(session.metadata.sharedContext.facts, 'stolen', 'yes')
        tryToMutate(session.customer, 'clientId', 'someone else')

        expect(await storage.sessions.get({ id: session.id })).toEqual(original)
      })
    })

    describe('messages', () => {
      let channel: Channel
      let session: Session

      beforeEach(async () => {
        channel = await createChannel(storage, companyId)
        session = await createSession(storage, channel)
      })

      it('inserts messages with increasing sequence numbers', async () => {
        const customer = await insertMessage(storage, session, {
          text: 'Where is my order?',
          externalId: randomUUID(),
        })
        const reply = await insertMessage(storage, session, {
          role: 'agent',
          agentId: channel.agent.id,
          text: 'Let me check.',
          delivery: 'pending',
          at: at(1000),
        })

        expect(Number.isInteger(customer.sequence)).toBe(true)
        expect(reply.sequence).toBeGreaterThan(customer.sequence)
        expect(customer).toMatchObject({
          companyId,
          sessionId: session.id,
          role: 'customer',
          text: 'Where is my order?',
          at: at().toISOString(),
        })
        expect(customer.agentId).toBeUndefined()
        expect(customer.delivery).toBeUndefined()
        expect(reply).toMatchObject({
          role: 'agent',
          agentId: channel.agent.id,
          delivery: 'pending',
          at: at(1000).toISOString(),
        })
        expect(reply.externalId).toBeUndefined()
        expect(await storage.messages.get({ id: reply.id })).toEqual(reply)
      })

      it('keeps the channel a message came from or goes back on, exactly', async () => {
        const customer = await insertMessage(storage, session, {
          channelId: 'chat-42',
          transport: 'telegram',
        })
        // Channel ids are the platform's keys, returned verbatim in replies: any character survives,
        // a leading U+FEFF (which PGlite's reads of a text column dropped) included.
        const [odd, none, marked] = await storage.messages.insertMany([
          newMessageInput(session, {
            role: 'agent',
            text: 'hi',
            channelId: 'c\u0000h 😀',
            transport: 'טלגרם',
          }),
          newMessageInput(session, { role: 'operator', text: 'hello' }),
          newMessageInput(session, {
            role: 'agent',
            text: 'hey',
            channelId: '\uFEFFchat',
            transport: '\uFEFF',
          }),
        ])

        expect(customer).toMatchObject({ channelId: 'chat-42', transport: 'telegram' })
        expect(odd).toMatchObject({ channelId: 'c\u0000h 😀', transport: 'טלגרם' })
        expect(none?.channelId).toBeUndefined()
        expect(none?.transport).toBeUndefined()
        expect(marked).toMatchObject({ channelId: '\uFEFFchat', transport: '\uFEFF' })
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([
          customer,
          odd,
          none,
          marked,
        ])
      })

      it("never returns another company's message", async () => {
        const message = await insertMessage(storage, session)

        expect(await storage.messages.get({ id: message.id, companyId })).toEqual(message)
        expect(await storage.messages.get({ id: message.id, companyId: otherCompanyId })).toBeNull()
        expect(await storage.messages.get({ id: randomUUID() })).toBeNull()
      })

      it('finds a message by the external id of its integration, which is unique', async () => {
        const externalId = `wamid.${randomUUID()}`
        const message = await insertMessage(storage, session, { externalId })

        expect(
          await storage.messages.findByExternalId({ integrationId: channel.integration.id, externalId }),
        ).toEqual(message)
        expect(
          await storage.messages.findByExternalId({
            integrationId: channel.integration.id,
            externalId: randomUUID(),
          }),
        ).toBeNull()

        const duplicateId = randomUUID()
        await expect(insertMessage(storage, session, { id: duplicateId, externalId })).rejects.toThrow()
        expect(await storage.messages.get({ id: duplicateId })).toBeNull()
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([message])

        const otherIntegration = await createIntegration(storage, companyId, channel.agent.id)
        const otherSession = await createSession(storage, { ...channel, integration: otherIntegration })
        const same = await insertMessage(storage, otherSession, { externalId })
        expect(
          await storage.messages.findByExternalId({ integrationId: otherIntegration.id, externalId }),
        ).toEqual(same)
      })

      it('refuses a second message with the same id', async () => {
        const message = await insertMessage(storage, session)

        await expect(insertMessage(storage, session, { id: message.id, text: 'again' })).rejects.toThrow()
        expect(await storage.messages.get({ id: message.id })).toEqual(message)
      })

      it('lists a session in arrival order, after a sequence, up to a limit', async () => {
        const inserted: Message[] = []
        for (let index = 0; index < 5; index++) {
          inserted.push(await insertMessage(storage, session, { text: `message ${index}` }))
        }
        const otherSession = await createSession(storage, channel)
        await insertMessage(storage, otherSession)

        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual(inserted)
        expect(await storage.messages.list({ sessionId: session.id, limit: 2 })).toEqual(inserted.slice(0, 2))
        expect(
          await storage.messages.list({
            sessionId: session.id,
            afterSequence: inserted[2]!.sequence,
            limit: 10,
          }),
        ).toEqual(inserted.slice(3))
        expect(
          await storage.messages.list({
            sessionId: session.id,
            afterSequence: inserted[4]!.sequence,
            limit: 10,
          }),
        ).toEqual([])
        expect(await storage.messages.list({ sessionId: randomUUID(), limit: 10 })).toEqual([])
      })

      it('gives the history a turn sees: conversational messages, no later customer message, oldest first', async () => {
        const agentId = channel.agent.id
        const first = await insertMessage(storage, session, { text: 'first' })
        const sent = await insertMessage(storage, session, { role: 'agent', agentId, delivery: 'sent' })
        await insertMessage(storage, session, { role: 'system', text: 'Session paused' })
        await insertMessage(storage, session, { role: 'agent', agentId, delivery: 'blocked' })
        const operator = await insertMessage(storage, session, { role: 'operator', delivery: 'sent' })
        const failed = await insertMessage(storage, session, { role: 'agent', agentId, delivery: 'failed' })
        const current = await insertMessage(storage, session, { text: 'current' })
        const later = await insertMessage(storage, session, { text: 'queued after the current one' })
        const reply = await insertMessage(storage, session, { role: 'agent', agentId, delivery: 'pending' })
        const otherSession = await createSession(storage, channel)
        await insertMessage(storage, otherSession)

        const history = (currentSequence: number, limit: number) =>
          storage.messages.history({ sessionId: session.id, currentSequence, limit })
        expect(await history(current.sequence, 10)).toEqual([first, sent, operator, failed, reply])
        expect(await history(current.sequence, 2)).toEqual([failed, reply])
        expect(await history(later.sequence, 3)).toEqual([failed, current, reply])
        expect(await history(first.sequence, 10)).toEqual([sent, operator, failed, reply])
        expect(await history(current.sequence, 0)).toEqual([])
      })

      it('blocks the pending outgoing messages of the given roles in the session', async () => {
        const pendingReply = await insertMessage(storage, session, { role: 'agent', delivery: 'pending' })
        const pendingOperator = await insertMessage(storage, session, {
          role: 'operator',
          delivery: 'pending',
        })
        const sentReply = await insertMessage(storage, session, { role: 'agent', delivery: 'sent' })
        const customer = await insertMessage(storage, session)
        const otherSession = await createSession(storage, channel)
        const elsewhere = await insertMessage(storage, otherSession, { role: 'agent', delivery: 'pending' })

        expect(await storage.messages.blockPending({ sessionId: session.id, roles: ['agent'] })).toEqual([
          pendingReply.id,
        ])
        expect((await storage.messages.get({ id: pendingReply.id }))?.delivery).toBe('blocked')
        expect((await storage.messages.get({ id: pendingOperator.id }))?.delivery).toBe('pending')
        expect((await storage.messages.get({ id: sentReply.id }))?.delivery).toBe('sent')
        expect(await storage.messages.get({ id: customer.id })).toEqual(customer)
        expect((await storage.messages.get({ id: elsewhere.id }))?.delivery).toBe('pending')

        expect(
          await storage.messages.blockPending({ sessionId: session.id, roles: ['agent', 'operator'] }),
        ).toEqual([pendingOperator.id])
        expect(
          await storage.messages.blockPending({ sessionId: session.id, roles: ['agent', 'operator'] }),
        ).toEqual([])
      })

      it('stores messages into an open session only while it is open: a closed one refuses them all, storing none', async () => {
        const paused = await createSession(storage, channel, { state: 'paused' })
        const closed = await createSession(storage, channel, { state: 'closed' })
        const intoOpenSession = { intoOpenSession: true }
        const stored = await storage.messages.insert(newMessageInput(session), intoOpenSession)
        const many = await storage.messages.insertMany(
          [newMessageInput(session), newMessageInput(paused)],
          intoOpenSession,
        )

        const refused = await storage.messages
          .insert(newMessageInput(closed, { text: 'too late' }), intoOpenSession)
          .catch((error: unknown) => error)
        // All or none: the open session's message of the batch is not stored either.
        const refusedMany = await storage.messages
          .insertMany(
            [newMessageInput(session, { text: 'beside' }), newMessageInput(closed, { text: 'too late' })],
            intoOpenSession,
          )
          .catch((error: unknown) => error)

        expect(SessionClosedError.isInstance(refused)).toBe(true)
        expect(SessionClosedError.isInstance(refusedMany)).toBe(true)
        expect((refused as SessionClosedError).sessionId).toBe(closed.id)
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([stored, many[0]])
        expect(await storage.messages.list({ sessionId: paused.id, limit: 10 })).toEqual([many[1]])
        expect(await storage.messages.list({ sessionId: closed.id, limit: 10 })).toEqual([])
        // Without it, a closed session takes messages: a turn's replies silenced by the close.
        const silenced = await insertMessage(storage, closed, { role: 'agent', delivery: 'blocked' })
        expect(await storage.messages.list({ sessionId: closed.id, limit: 10 })).toEqual([silenced])
      })
    })

    describe('several rows at once', () => {
      let channel: Channel

      beforeEach(async () => {
        channel = await createChannel(storage, companyId)
      })

      it('inserts messages in the order given, with increasing sequence numbers', async () => {
        const [first, second] = [await createSession(storage, channel), await createSession(storage, channel)]
        const inputs = [
          newMessageInput(first, { text: 'one', externalId: randomUUID() }),
          newMessageInput(second, { text: 'two' }),
          newMessageInput(first, {
            role: 'agent',
            agentId: channel.agent.id,
            text: 'three',
            delivery: 'pending',
          }),
        ]

        const inserted = await storage.messages.insertMany(inputs)

        expect(inserted.map((message) => message.text)).toEqual(['one', 'two', 'three'])
        expect(inserted[1]!.sequence).toBeGreaterThan(inserted[0]!.sequence)
        expect(inserted[2]!.sequence).toBeGreaterThan(inserted[1]!.sequence)
        expect(inserted[2]).toMatchObject({ role: 'agent', agentId: channel.agent.id, delivery: 'pending' })
        for (const message of inserted)
          expect(await storage.messages.get({ id: message.id })).toEqual(message)
        expect(await storage.messages.list({ sessionId: first.id, limit: 10 })).toEqual([
          inserted[0],
          inserted[2],
        ])
        expect(await storage.messages.insertMany([])).toEqual([])
      })

      it('inserts none of the messages when one of them is refused', async () => {
        const session = await createSession(storage, channel)
        const externalId = randomUUID()
        const existing = await insertMessage(storage, session, { externalId })
        const fresh = newMessageInput(session, { text: 'fresh' })

        await expect(
          storage.messages.insertMany([fresh, newMessageInput(session, { externalId })]),
        ).rejects.toThrow()
        await expect(
          storage.messages.insertMany([newMessageInput(session), { ...fresh }, fresh]),
        ).rejects.toThrow()

        expect(await storage.messages.get({ id: fresh.id })).toBeNull()
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([existing])
      })

      it('finds messages by several external ids of one integration', async () => {
        const session = await createSession(storage, channel)
        const [one, two] = [randomUUID(), randomUUID()]
        const first = await insertMessage(storage, session, { externalId: one })
        const second = await insertMessage(storage, session, { externalId: two })
        const otherIntegration = await createIntegration(storage, companyId, channel.agent.id)
        const elsewhere = await createSession(storage, { ...channel, integration: otherIntegration })
        await insertMessage(storage, elsewhere, { externalId: `${one}-elsewhere` })

        const found = await storage.messages.findByExternalIds({
          integrationId: channel.integration.id,
          externalIds: [two, randomUUID(), one, two, `${one}-elsewhere`],
        })

        expect(sortedIds(found)).toEqual(sortedIds([first, second]))
        expect(
          await storage.messages.findByExternalIds({
            integrationId: channel.integration.id,
            externalIds: [],
          }),
        ).toEqual([])
        expect(
          await storage.messages.findByExternalIds({ integrationId: 'not-an-id', externalIds: [one] }),
        ).toEqual([])
      })

      it("finds several customers' open sessions of one integration", async () => {
        const [ann, bob, cleo] = [randomUUID(), randomUUID(), randomUUID()]
        const annSession = await createSession(storage, channel, { clientId: ann })
        await createSession(storage, channel, { clientId: bob, state: 'closed' })
        const cleoSession = await createSession(storage, channel, { clientId: cleo, state: 'paused' })
        const otherIntegration = await createIntegration(storage, companyId, channel.agent.id)
        await createSession(storage, { ...channel, integration: otherIntegration }, { clientId: bob })

        const found = await storage.sessions.findOpenMany({
          integrationId: channel.integration.id,
          clientIds: [ann, bob, cleo, ann, randomUUID()],
        })

        expect(sortedIds(found)).toEqual(sortedIds([annSession, cleoSession]))
        expect(
          await storage.sessions.findOpenMany({ integrationId: channel.integration.id, clientIds: [] }),
        ).toEqual([])
      })
    })

    describe('outbox', () => {
      let channel: Channel
      let session: Session

      beforeEach(async () => {
        channel = await createChannel(storage, companyId)
        session = await createSession(storage, channel)
      })

      const addReply = async (target: Session, availableAt: Date): Promise<Message> => {
        const message = await insertMessage(storage, target, { role: 'agent', delivery: 'pending' })
        await storage.outbox.add({
          messageId: message.id,
          sessionId: target.id,
          companyId: target.companyId,
          integrationId: target.integrationId,
          availableAt,
        })
        return message
      }

      /** Claims whatever an earlier test or run left due, so only this test's messages are due. */
      const drainDue = async (now: Date): Promise<void> => {
        for (;;) {
          const claimed = await storage.outbox.claimDue({
            now,
            limit: 100,
            leaseMs: CENTURY,
            leaseToken: randomUUID(),
          })
          if (claimed.length < 100) return
        }
      }

      it('records the outcome of a delivery with its removal, only while the claim holds', async () => {
        const sent = await addReply(session, at())
        await storage.outbox.claim({ messageId: sent.id, now: at(), leaseMs: 30_000, leaseToken: 'sender' })
        expect(
          await storage.outbox.remove({ messageId: sent.id, leaseToken: 'another', delivery: 'sent' }),
        ).toBe(false)
        expect((await storage.messages.get({ id: sent.id }))?.delivery).toBe('pending')
        expect(
          await storage.outbox.remove({ messageId: sent.id, leaseToken: 'sender', delivery: 'sent' }),
        ).toBe(true)
        expect((await storage.messages.get({ id: sent.id }))?.delivery).toBe('sent')
        // Removed already: a second sender's outcome changes nothing.
        expect(
          await storage.outbox.remove({ messageId: sent.id, leaseToken: 'sender', delivery: 'failed' }),
        ).toBe(false)
        expect((await storage.messages.get({ id: sent.id }))?.delivery).toBe('sent')

        const failed = await addReply(session, at(1))
        await storage.outbox.claim({
          messageId: failed.id,
          now: at(1),
          leaseMs: 30_000,
          leaseToken: 'sender',
        })
        await expect(
          storage.transaction(async (tx) => {
            await tx.outbox.remove({ messageId: failed.id, leaseToken: 'sender', delivery: 'failed' })
            throw new Error('rolled back')
          }),
        ).rejects.toThrow('rolled back')
        expect((await storage.messages.get({ id: failed.id }))?.delivery).toBe('pending')
        expect(
          await storage.outbox.remove({ messageId: failed.id, leaseToken: 'sender', delivery: 'failed' }),
        ).toBe(true)
        expect((await storage.messages.get({ id: failed.id }))?.delivery).toBe('failed')
      })

      it('claims a waiting message once, until its lease runs out', async () => {
        const message = await addReply(session, at())

        const item = await storage.outbox.claim({
          messageId: message.id,
          now: at(),
          leaseMs: 30_000,
          leaseToken: 'first',
        })
        expect(item).toEqual({
          messageId: message.id,
          sessionId: session.id,
          companyId,
          integrationId: channel.integration.id,
          attempts: 0,
          leaseToken: 'first',
        })
        expect(
          await storage.outbox.claim({
            messageId: message.id,
            now: at(29_999),
            leaseMs: 30_000,
            leaseToken: 'second',
          }),
        ).toBeNull()

        const again = await storage.outbox.claim({
          messageId: message.id,
          now: at(30_001),
          leaseMs: 30_000,
          leaseToken: 'second',
        })
        expect(again?.leaseToken).toBe('second')
        expect(await storage.outbox.remove({ messageId: message.id, leaseToken: 'first' })).toBe(false)
        expect(await storage.outbox.remove({ messageId: message.id, leaseToken: 'second' })).toBe(true)
        expect(
          await storage.outbox.claim({
            messageId: message.id,
            now: at(HOUR),
            leaseMs: 30_000,
            leaseToken: 'third',
          }),
        ).toBeNull()
      })

      it('does not claim a message before its time, nor one that is not there', async () => {
        const message = await addReply(session, at(5000))

        expect(
          await storage.outbox.claim({
            messageId: message.id,
            now: at(4999),
            leaseMs: 1000,
            leaseToken: 'a',
          }),
        ).toBeNull()
        expect(
          await storage.outbox.claim({
            messageId: randomUUID(),
            now: at(HOUR),
            leaseMs: 1000,
            leaseToken: 'a',
          }),
        ).toBeNull()
        expect(
          await storage.outbox.claim({
            messageId: message.id,
            now: at(5000),
            leaseMs: 1000,
            leaseToken: 'a',
          }),
        ).not.toBeNull()
      })

      it('refuses to add a message twice', async () => {
        const message = await addReply(session, at())

        await expect(
          storage.outbox.add({
            messageId: message.id,
            sessionId: session.id,
            companyId,
            integrationId: channel.integration.id,
            availableAt: at(),
          }),
        ).rejects.toThrow()
      })

      it('retries later with the attempts the worker counted', async () => {
        const message = await addReply(session, at())
        await storage.outbox.claim({
          messageId: message.id,
          now: at(),
          leaseMs: 30_000,
          leaseToken: 'worker',
        })

        expect(
          await storage.outbox.retryLater({
            messageId: message.id,
            leaseToken: 'intruder',
            attempts: 1,
            availableAt: at(1000),
          }),
        ).toBe(false)
        expect(
          await storage.outbox.retryLater({
            messageId: message.id,
            leaseToken: 'worker',
            attempts: 3,
            availableAt: at(10_000),
          }),
        ).toBe(true)

        expect(
          await storage.outbox.claim({
            messageId: message.id,
            now: at(9999),
            leaseMs: 1000,
            leaseToken: 'next',
          }),
        ).toBeNull()
        const retried = await storage.outbox.claim({
          messageId: message.id,
          now: at(10_000),
          leaseMs: 1000,
          leaseToken: 'next',
        })
        expect(retried).toMatchObject({ messageId: message.id, attempts: 3, leaseToken: 'next' })
      })

      it('claims due messages oldest first, up to the limit, skipping claimed and future ones', async () => {
        const now = at(HOUR)
        await drainDue(at(2 * HOUR))
        // A session each: only a session's earliest message can be claimed.
        const inSession = async (availableAt: Date) =>
          addReply(await createSession(storage, channel), availableAt)
        const second = await inSession(at(HOUR - 2000))
        const future = await inSession(at(HOUR + 1))
        const first = await inSession(at(HOUR - 3000))
        const third = await inSession(at(HOUR - 1000))
        const claimed = await inSession(at(0))
        await storage.outbox.claim({
          messageId: claimed.id,
          now: at(0),
          leaseMs: 2 * HOUR,
          leaseToken: 'busy',
        })

        const batch = await storage.outbox.claimDue({ now, limit: 2, leaseMs: 60_000, leaseToken: 'batch' })
        expect(batch.map((item) => item.messageId)).toEqual([first.id, second.id])
        expect(batch.every((item) => item.leaseToken === 'batch' && item.attempts === 0)).toBe(true)
        const rest = await storage.outbox.claimDue({ now, limit: 10, leaseMs: 60_000, leaseToken: 'rest' })
        expect(rest.map((item) => item.messageId)).toEqual([third.id])
        expect(
          await storage.outbox.claimDue({ now, limit: 10, leaseMs: 60_000, leaseToken: 'none' }),
        ).toEqual([])

        const later = await storage.outbox.claimDue({
          now: at(HOUR + 1),
          limit: 10,
          leaseMs: 60_000,
          leaseToken: 'later',
        })
        expect(later.map((item) => item.messageId)).toEqual([future.id])
      })

      it('removes the named messages nobody is sending, so they hold back no later one', async () => {
        const inFlight = await addReply(session, at())
        const waiting = await addReply(session, at())
        const later = await addReply(session, at())
        const claim = (message: Message, now = at(), leaseMs = 60_000) =>
          storage.outbox.claim({ messageId: message.id, now, leaseMs, leaseToken: 'sender' })
        expect(await claim(inFlight)).not.toBeNull()
        const otherSession = await createSession(storage, channel)
        const other = await addReply(otherSession, at())

        expect(
          await storage.outbox.removeWaiting({
            sessionId: session.id,
            messageIds: [inFlight.id, waiting.id, other.id, 'not-a-message'],
            now: at(),
          }),
        ).toEqual([waiting.id])

        // The one in flight leaves as usual; the one after it is next, not the removed one.
        expect(await storage.outbox.remove({ messageId: inFlight.id, leaseToken: 'sender' })).toBe(true)
        expect(await claim(later)).toMatchObject({ messageId: later.id })
        // Waiting for a retry, or held by a lease that ran out: nobody is sending it.
        expect(
          await storage.outbox.retryLater({
            messageId: later.id,
            leaseToken: 'sender',
            attempts: 1,
            availableAt: at(HOUR),
          }),
        ).toBe(true)
        expect(await claim(other, at(), 1000)).not.toBeNull()
        expect(
          await storage.outbox.removeWaiting({ sessionId: session.id, messageIds: [later.id], now: at() }),
        ).toEqual([later.id])
        expect(
          await storage.outbox.removeWaiting({
            sessionId: otherSession.id,
            messageIds: [other.id],
            now: at(999),
          }),
        ).toEqual([])
        expect(
          await storage.outbox.removeWaiting({
            sessionId: otherSession.id,
            messageIds: [other.id],
            now: at(1000),
          }),
        ).toEqual([other.id])
      })

      it("removes a closed session's messages, claimed or not, and no other session's", async () => {
        const inFlight = await addReply(session, at())
        const waiting = await addReply(session, at())
        await storage.outbox.claim({
          messageId: inFlight.id,
          now: at(),
          leaseMs: 60_000,
          leaseToken: 'sender',
        })
        const otherSession = await createSession(storage, channel)
        const other = await addReply(otherSession, at())

        const removed = await storage.outbox.removeForSession({ sessionId: session.id })
        expect([...removed].sort()).toEqual([waiting.id, inFlight.id].sort())
        expect(
          await storage.outbox.claim({
            messageId: waiting.id,
            now: at(HOUR),
            leaseMs: 1000,
            leaseToken: 'x',
          }),
        ).toBeNull()
        expect(await storage.outbox.remove({ messageId: inFlight.id, leaseToken: 'sender' })).toBe(false)
        expect(
          await storage.outbox.claim({ messageId: other.id, now: at(), leaseMs: 1000, leaseToken: 'x' }),
        ).not.toBeNull()
        expect(await storage.outbox.removeForSession({ sessionId: session.id })).toEqual([])
      })

      describe("a session's messages leave in the order they were added", () => {
        const claim = (message: Message, leaseToken: string, now = at()) =>
          storage.outbox.claim({ messageId: message.id, now, leaseMs: 30_000, leaseToken })
        const claimNext = (target: Session, leaseToken: string, now = at()) =>
          storage.outbox.claimNext({ sessionId: target.id, now, leaseMs: 30_000, leaseToken })

        it('holds a later message while an earlier one is waiting, claimed or waiting for a retry', async () => {
          const first = await addReply(session, at())
          const second = await addReply(session, at())

          // Waiting, though the later one is just as due.
          expect(await claim(second, 'eager')).toBeNull()
          // Claimed, and still while its lease is live.
          expect(await claim(first, 'sender')).toMatchObject({ messageId: first.id })
          expect(await claim(second, 'eager', at(29_999))).toBeNull()
          expect(await claimNext(session, 'eager', at(29_999))).toBeNull()
          // Waiting for a retry.
          expect(
            await storage.outbox.retryLater({
              messageId: first.id,
              leaseToken: 'sender',
              attempts: 1,
              availableAt: at(HOUR),
            }),
          ).toBe(true)
          expect(await claim(second, 'eager', at(HOUR - 1))).toBeNull()
          expect(await claimNext(session, 'eager', at(HOUR - 1))).toBeNull()
          // A lease that ran out leaves the earlier one the head, to be claimed again, not skipped.
          expect(await claim(first, 'sender', at(HOUR))).toMatchObject({ messageId: first.id, attempts: 1 })
          expect(await claim(second, 'eager', at(HOUR + 30_000))).toBeNull()
          expect(await claimNext(session, 'taker', at(HOUR + 30_000))).toMatchObject({
            messageId: first.id,
            leaseToken: 'taker',
          })
        })

        it('lets the next message go once the earlier one is removed, sent or given up on', async () => {
          const first = await addReply(session, at())
          const second = await addReply(session, at())
          const third = await addReply(session, at())
          expect(await claimNext(session, 'sender')).toMatchObject({ messageId: first.id })
          expect(await storage.outbox.remove({ messageId: first.id, leaseToken: 'sender' })).toBe(true)

          // The next one, by its id or as the session's next, once.
          expect(await claim(third, 'eager')).toBeNull()
          expect(await claim(second, 'sender')).toMatchObject({ messageId: second.id, leaseToken: 'sender' })
          expect(await claimNext(session, 'other')).toBeNull()
          expect(await storage.outbox.remove({ messageId: second.id, leaseToken: 'sender' })).toBe(true)
          expect(await claimNext(session, 'sender')).toEqual({
            messageId: third.id,
            sessionId: session.id,
            companyId,
            integrationId: channel.integration.id,
            attempts: 0,
            leaseToken: 'sender',
          })
          expect(await storage.outbox.remove({ messageId: third.id, leaseToken: 'sender' })).toBe(true)
          expect(await claimNext(session, 'sender', at(HOUR))).toBeNull()
        })

        it('claims the next message only when it is due', async () => {
          const first = await addReply(session, at())
          await addReply(session, at(5000))
          await claim(first, 'sender')
          await storage.outbox.remove({ messageId: first.id, leaseToken: 'sender' })

          expect(await claimNext(session, 'sender', at(4999))).toBeNull()
          expect(await claimNext(session, 'sender', at(5000))).not.toBeNull()
          expect(await claimNext(await createSession(storage, channel), 'sender')).toBeNull()
          expect(
            await storage.outbox.claimNext({
              sessionId: randomUUID(),
              now: at(HOUR),
              leaseMs: 1000,
              leaseToken: 'x',
            }),
          ).toBeNull()
        })

        it('keeps sessions apart: one held back holds back no other', async () => {
          const otherSession = await createSession(storage, channel)
          const first = await addReply(session, at())
          const second = await addReply(session, at())
          const otherFirst = await addReply(otherSession, at())
          const otherSecond = await addReply(otherSession, at())

          expect(await claim(first, 'a')).not.toBeNull()
          expect(await claim(otherFirst, 'b')).not.toBeNull()
          expect(await storage.outbox.remove({ messageId: otherFirst.id, leaseToken: 'b' })).toBe(true)
          expect(await claim(second, 'a')).toBeNull()
          expect(await claimNext(otherSession, 'b')).toMatchObject({ messageId: otherSecond.id })
          expect(await storage.outbox.remove({ messageId: first.id, leaseToken: 'a' })).toBe(true)
          expect(await claimNext(session, 'a')).toMatchObject({ messageId: second.id })
        })

        it("claims due session heads only: a session's later message waits, whatever its time", async () => {
          await drainDue(at(2 * HOUR))
          const otherSession = await createSession(storage, channel)
          const head = await addReply(session, at(HOUR - 1000))
          // Due earlier than its head, yet behind it.
          const behind = await addReply(session, at(HOUR - 3000))
          const otherHead = await addReply(otherSession, at(HOUR - 2000))
          const otherBehind = await addReply(otherSession, at(HOUR - 4000))

          const batch = await storage.outbox.claimDue({
            now: at(HOUR),
            limit: 10,
            leaseMs: 60_000,
            leaseToken: 'a',
          })
          expect(batch.map((item) => item.messageId)).toEqual([otherHead.id, head.id])
          expect(
            await storage.outbox.claimDue({ now: at(HOUR), limit: 10, leaseMs: 60_000, leaseToken: 'b' }),
          ).toEqual([])

          await storage.outbox.remove({ messageId: head.id, leaseToken: 'a' })
          await storage.outbox.retryLater({
            messageId: otherHead.id,
            leaseToken: 'a',
            attempts: 1,
            availableAt: at(HOUR + 1000),
          })
          const next = await storage.outbox.claimDue({
            now: at(HOUR),
            limit: 10,
            leaseMs: 60_000,
            leaseToken: 'c',
          })
          expect(next.map((item) => item.messageId)).toEqual([behind.id])
          const retried = await storage.outbox.claimDue({
            now: at(HOUR + 1000),
            limit: 10,
            leaseMs: 60_000,
            leaseToken: 'd',
          })
          expect(retried.map((item) => item.messageId)).toEqual([otherHead.id])
          expect(await claim(otherBehind, 'e', at(HOUR + 1000))).toBeNull()
        })

        it('lets concurrent senders take one message of a session at a time, in order', async () => {
          const count = 8
          const added: Message[] = []
          for (let index = 0; index < count; index += 1) added.push(await addReply(session, at()))
          const taken: string[] = []
          let holding = 0
          let mostHeld = 0
          const sender = async (leaseToken: string) => {
            while (taken.length < count) {
              // Some ask for the session's next, some for a message they were told of, as
              // deliverers woken by a finished message or by a commit do.
              const wanted = added[Math.floor(Math.random() * count)]!
              const item = (await claimNext(session, leaseToken)) ?? (await claim(wanted, leaseToken))
              if (item === null) {
                await new Promise((resolve) => setImmediate(resolve))
                continue
              }
              holding += 1
              mostHeld = Math.max(mostHeld, holding)
              taken.push(item.messageId)
              await new Promise((resolve) => setImmediate(resolve))
              // Counted off before the removal: nobody can claim the next until it has landed.
              holding -= 1
              expect(await storage.outbox.remove({ messageId: item.messageId, leaseToken })).toBe(true)
            }
          }
          await Promise.all(['a', 'b', 'c', 'd'].map(sender))
          expect(mostHeld).toBe(1)
          expect(taken).toEqual(added.map((message) => message.id))
        })
      })
    })

    // PostgreSQL text cannot hold U+0000, UTF-8 cannot hold a lone surrogate, and jsonb refuses the
    // escape of either; text from outside may still carry them, typed by anyone or sent by a platform.
    // PGlite reads a text column through a TextDecoder that drops a leading U+FEFF (a byte order
    // mark): a key starting with one came back without it.
    describe('text PostgreSQL cannot hold as it is', () => {
      const AWKWARD = ['k\u0000', 'k\uFFFD', 'k\uD800', 'k\uDC00', 'k\uD83D\uDE00', 'k', '\uFEFFk', '\uFEFF']
      let channel: Channel

      beforeEach(async () => {
        channel = await createChannel(storage, companyId)
      })

      it('keeps external ids apart and exact: none is taken for another', async () => {
        const session = await createSession(storage, channel)
        const integrationId = channel.integration.id
        const stored = []
        for (const externalId of AWKWARD) stored.push(await insertMessage(storage, session, { externalId }))

        for (const [index, externalId] of AWKWARD.entries()) {
          expect(stored[index]!.externalId).toBe(externalId)
          expect(await storage.messages.findByExternalId({ integrationId, externalId })).toEqual(
            stored[index],
          )
        }
        const found = await storage.messages.findByExternalIds({ integrationId, externalIds: AWKWARD })
        expect(found.map((message) => message.externalId).sort()).toEqual([...AWKWARD].sort())
        await expect(insertMessage(storage, session, { externalId: 'k\u0000' })).rejects.toThrow()
      })

      it('keeps customers apart and exact: each client id, channel and transport comes back as sent', async () => {
        const sessions = []
        for (const clientId of AWKWARD) {
          sessions.push(
            await storage.sessions.create({
              ...newSessionInput({
                companyId,
                integrationId: channel.integration.id,
                agentId: channel.agent.id,
                clientId,
              }),
              customer: { clientId, channelId: `${clientId}-channel`, transport: `${clientId}-transport` },
            }),
          )
        }

        for (const [index, clientId] of AWKWARD.entries()) {
          const open = await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId })
          expect(open?.id).toBe(sessions[index]!.id)
          expect(open?.customer).toEqual({
            clientId,
            channelId: `${clientId}-channel`,
            transport: `${clientId}-transport`,
          })
        }
        const many = await storage.sessions.findOpenMany({
          integrationId: channel.integration.id,
          clientIds: AWKWARD,
        })
        expect(many.map((session) => session.customer.clientId).sort()).toEqual([...AWKWARD].sort())
      })

      // PostgreSQL cannot hold them: a storage that kept them answered differently (a fact, a
      // journey step, a pause reason or a webhook log's reason read back with U+0000 on the memory
      // storage and U+FFFD on PostgreSQL), so every storage stores U+FFFD, as text columns do.
      it('stores such text in any other field with U+FFFD in place of each character it cannot hold', async () => {
        const session = await createSession(storage, channel)
        const text = 'a\u0000b\uD800c\uDC00d\uD83D\uDE00'
        const storable = 'a\uFFFDb\uFFFDc\uFFFDd\uD83D\uDE00'
        const paused = await storage.sessions.save({
          ...session,
          state: 'paused',
          pauseState: { pausedAt: at(HOUR).toISOString(), reason: text, externalReference: text },
          metadata: {
            ...session.metadata,
            agentPath: [...session.metadata.agentPath, { ...session.metadata.agentPath[0]!, reason: text }],
            sharedContext: {
              facts: { [text]: text, k: text },
              journey: [{ at: at().toISOString(), step: text }],
            },
            errors: [{ code: 'MODEL_UNAVAILABLE', message: text, at: at().toISOString() }],
          },
        })
        const message = await insertMessage(storage, session, { text })
        await storage.webhookLogs.add({
          id: randomUUID(),
          companyId,
          integrationId: channel.integration.id,
          receivedAt: at(),
          httpStatus: 200,
          outcome: 'ignored',
          reason: text,
        })
        const agent = await createAgent(storage, companyId, { name: text, systemPrompt: text })
        const renamed = await storage.integrations.update({
          companyId,
          id: channel.integration.id,
          patch: { name: text, config: { [text]: [text] } },
          at: at(HOUR),
        })

        const read = await storage.sessions.get({ id: session.id })
        expect(read).toEqual(paused)
        expect(read?.pauseState).toEqual({
          pausedAt: at(HOUR).toISOString(),
          reason: storable,
          externalReference: storable,
        })
        expect(read?.metadata.agentPath.at(-1)?.reason).toBe(storable)
        expect(read?.metadata.sharedContext).toEqual({
          facts: { [storable]: storable, k: storable },
          journey: [{ at: at().toISOString(), step: storable }],
        })
        expect(read?.metadata.errors.map((error) => error.message)).toEqual([storable])
        expect(message.text).toBe(storable)
        expect((await storage.messages.get({ id: message.id }))?.text).toBe(storable)
        const logs = await storage.webhookLogs.list({
          companyId,
          integrationId: channel.integration.id,
          limit: 1,
        })
        expect(logs.items.map((log) => log.reason)).toEqual([storable])
        expect([agent.name, agent.systemPrompt]).toEqual([storable, storable])
        expect(await storage.agents.get({ companyId, id: agent.id })).toEqual(agent)
        expect([renamed?.name, renamed?.config]).toEqual([storable, { [storable]: [storable] }])
        expect(await storage.integrations.get({ id: channel.integration.id })).toEqual(renamed)
      })

      it('stores two keys of an object that differ only in such characters as one, the later value kept', async () => {
        const session = await createSession(storage, channel)
        const saved = await storage.sessions.save({
          ...session,
          metadata: {
            ...session.metadata,
            sharedContext: { facts: { 'k\u0000': 'first', other: 'x', 'k\uFFFD': 'second' }, journey: [] },
          },
        })

        expect(saved?.metadata.sharedContext.facts).toEqual({ 'k\uFFFD': 'second', other: 'x' })
        expect(Object.keys(saved?.metadata.sharedContext.facts ?? {})).toEqual(['k\uFFFD', 'other'])
        expect((await storage.sessions.get({ id: session.id }))?.metadata).toEqual(saved?.metadata)
      })
    })

    describe('knowledge documents', () => {
      it('creates, lists oldest first with cursors, gets and deletes, scoped by company and agent', async () => {
        const agent = await createAgent(storage, companyId)
        const otherAgent = await createAgent(storage, companyId)
        const created = []
        for (let index = 0; index < 3; index += 1) {
          created.push(
            await storage.knowledgeDocuments.create({
              id: randomUUID(),
              companyId,
              agentId: agent.id,
              title: `doc ${index}`,
              content: `content ${index}`,
              at: at(index),
            }),
          )
        }
        await storage.knowledgeDocuments.create({
          id: randomUUID(),
          companyId,
          agentId: otherAgent.id,
          title: 'other',
          content: 'other',
          at: at(),
        })
        expect(created[0]).toEqual({
          id: created[0]!.id,
          companyId,
          agentId: agent.id,
          title: 'doc 0',
          content: 'content 0',
          createdAt: at(0).toISOString(),
        })
        const first = await storage.knowledgeDocuments.list({ companyId, agentId: agent.id, limit: 2 })
        expect(first.items).toEqual(created.slice(0, 2))
        expect(first.nextCursor).not.toBeNull()
        const second = await storage.knowledgeDocuments.list({
          companyId,
          agentId: agent.id,
          limit: 2,
          cursor: first.nextCursor!,
        })
        expect(second).toEqual({ items: created.slice(2), nextCursor: null })

        const id = created[1]!.id
        expect(await storage.knowledgeDocuments.get({ companyId, agentId: agent.id, id })).toEqual(created[1])
        expect(
          await storage.knowledgeDocuments.get({ companyId: otherCompanyId, agentId: agent.id, id }),
        ).toBeNull()
        expect(await storage.knowledgeDocuments.get({ companyId, agentId: otherAgent.id, id })).toBeNull()
        expect(
          await storage.knowledgeDocuments.delete({ companyId: otherCompanyId, agentId: agent.id, id }),
        ).toBe(false)
        expect(await storage.knowledgeDocuments.delete({ companyId, agentId: agent.id, id })).toBe(true)
        expect(await storage.knowledgeDocuments.delete({ companyId, agentId: agent.id, id })).toBe(false)
        expect(await storage.knowledgeDocuments.get({ companyId, agentId: agent.id, id })).toBeNull()
      })
    })

    describe('transactions', () => {
      it('returns what the function returns and commits its writes', async () => {
        const result = await storage.transaction(async (tx) => {
          const channel = await createChannel(tx, companyId)
          const session = await createSession(tx, channel)
          const message = await insertMessage(tx, session)
          expect(await tx.sessions.get({ id: session.id })).toEqual(session)
          expect(await tx.messages.list({ sessionId: session.id, limit: 10 })).toEqual([message])
          return { channel, session, message }
        })

        expect(await storage.agents.get({ companyId, id: result.channel.agent.id })).toEqual(
          result.channel.agent,
        )
        expect(await storage.integrations.get({ id: result.channel.integration.id })).toEqual(
          result.channel.integration,
        )
        expect(await storage.sessions.get({ id: result.session.id })).toEqual(result.session)
        expect(await storage.messages.get({ id: result.message.id })).toEqual(result.message)
      })

      it('sees what committed before it', async () => {
        const agent = await createAgent(storage, companyId)

        const seen = await storage.transaction((tx) => tx.agents.get({ companyId, id: agent.id }))
        expect(seen).toEqual(agent)
      })

      it('leaves no trace of any write when the function throws', async () => {
        const channel = await createChannel(storage, companyId)
        const kept = await createAgent(storage, companyId)
        const doomed = await createAgent(storage, companyId)
        const session = await createSession(storage, channel)
        // A pending reply for the rolled-back blockPending to block.
        await insertMessage(storage, session, { role: 'agent', delivery: 'pending' })
        const queued = await insertMessage(storage, session, { role: 'agent', delivery: 'pending' })
        await storage.outbox.add({
          messageId: queued.id,
          sessionId: session.id,
          companyId,
          integrationId: channel.integration.id,
          availableAt: at(),
        })
        const agentsBefore = await storage.agents.list({ companyId, limit: 100 })
        const integrationsBefore = await storage.integrations.list({ companyId, limit: 100 })
        const sessionsBefore = await storage.sessions.list({ companyId, limit: 100 })
        const messagesBefore = await storage.messages.list({ sessionId: session.id, limit: 100 })
        const pendingBefore = await storage.jobs.pending({})

        const clientId = randomUUID()
        const externalId = randomUUID()
        const newMessageId = randomUUID()
        const failure = expectedError()
        let newSession: Session | undefined
        let newAgent: Agent | undefined

        await expect(
          storage.transaction(async (tx) => {
            newAgent = await createAgent(tx, companyId)
            await createIntegration(tx, companyId, newAgent.id)
            newSession = await createSession(tx, channel, { clientId })
            const inbound = await insertMessage(tx, newSession, { id: newMessageId, externalId })
            await tx.jobs.enqueue({
              companyId,
              sessionId: newSession.id,
              messageId: inbound.id,
              availableAt: at(),
            })
            const outgoing = await insertMessage(tx, newSession, { role: 'agent', delivery: 'pending' })
            await tx.outbox.add({
              messageId: outgoing.id,
              sessionId: newSession.id,
              companyId,
              integrationId: channel.integration.id,
              availableAt: at(),
            })
            await tx.agents.update({
              companyId,
              id: kept.id,
              patch: { name: 'Changed', role: 'Changed' },
              at: at(HOUR),
            })
            await tx.agents.delete({ companyId, id: doomed.id })
            await tx.integrations.update({
              companyId,
              id: channel.integration.id,
              patch: { active: false },
              at: at(HOUR),
            })
            await tx.sessions.save({ ...session, state: 'closed' })
            await tx.messages.blockPending({ sessionId: session.id, roles: ['agent'] })
            await tx.outbox.claim({ messageId: queued.id, now: at(), leaseMs: HOUR, leaseToken: 'doomed' })
            await tx.outbox.remove({ messageId: queued.id, leaseToken: 'doomed', delivery: 'sent' })
            await tx.outbox.removeForSession({ sessionId: session.id })
            throw failure
          }),
        ).rejects.toBe(failure)

        expect(await storage.agents.list({ companyId, limit: 100 })).toEqual(agentsBefore)
        expect(await storage.agents.get({ companyId, id: newAgent!.id })).toBeNull()
        expect(await storage.integrations.list({ companyId, limit: 100 })).toEqual(integrationsBefore)
        expect(await storage.sessions.list({ companyId, limit: 100 })).toEqual(sessionsBefore)
        expect(await storage.sessions.get({ id: newSession!.id })).toBeNull()
        expect(
          await storage.sessions.findOpen({ integrationId: channel.integration.id, clientId }),
        ).toBeNull()
        expect(await storage.messages.list({ sessionId: session.id, limit: 100 })).toEqual(messagesBefore)
        expect(await storage.messages.list({ sessionId: newSession!.id, limit: 100 })).toEqual([])
        expect(await storage.messages.get({ id: newMessageId })).toBeNull()
        expect(
          await storage.messages.findByExternalId({ integrationId: channel.integration.id, externalId }),
        ).toBeNull()
        expect(await storage.jobs.pending({})).toBe(pendingBefore)
        expect(await storage.jobs.pending({ sessionId: newSession!.id })).toBe(0)
        const item = await storage.outbox.claim({
          messageId: queued.id,
          now: at(),
          leaseMs: 1000,
          leaseToken: 'after',
        })
        expect(item).toMatchObject({ messageId: queued.id, attempts: 0 })

        // The unique keys the rolled-back writes took are free again.
        const reopened = await createSession(storage, channel, { clientId })
        const inbound = await insertMessage(storage, reopened, { id: newMessageId, externalId })
        expect(
          await storage.messages.findByExternalId({ integrationId: channel.integration.id, externalId }),
        ).toEqual(inbound)
      })

      it('never shows a concurrent reader the writes of a transaction that rolls back', async () => {
        let created: (agent: Agent) => void = () => {}
        const agentCreated = new Promise<Agent>((resolve) => {
          created = resolve
        })
        let release: () => void = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        const failure = expectedError()

        const transaction = storage.transaction(async (tx) => {
          created(await createAgent(tx, companyId))
          await released
          throw failure
        })
        const agent = await agentCreated
        const read = storage.agents.get({ companyId, id: agent.id })
        release()

        await expect(transaction).rejects.toBe(failure)
        expect(await read).toBeNull()
        expect(await storage.agents.get({ companyId, id: agent.id })).toBeNull()
      })

      it('commits nothing of a transaction one of whose statements failed, even when fn went on', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)
        const first = await insertMessage(storage, session, { text: 'first' })

        await expect(
          storage.transaction(async (tx) => {
            await insertMessage(tx, session, { text: 'written before the failure' })
            // The same id again: the statement fails, and fn carries on as if nothing happened.
            const repeated = await insertMessage(tx, session, { id: first.id }).then(
              () => 'stored',
              () => 'refused',
            )
            return repeated
          }),
        ).rejects.toThrow()
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([first])
      })

      // A storage may commit the calls made before `noMoreCalls` without waiting for the function:
      // not when a call made before them failed already, which dooms the transaction all the same.
      it('commits nothing of a transaction one of whose calls failed before noMoreCalls, even when fn went on', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)
        const first = await insertMessage(storage, session, { text: 'first' })

        await expect(
          storage.transaction(async (tx) => {
            // The same id again: the call fails, and fn carries on as if nothing happened.
            await insertMessage(tx, session, { id: first.id }).catch(() => {})
            const writing = tx.messages.insertMany([newMessageInput(session, { text: 'the last call' })])
            tx.noMoreCalls?.()
            await writing
          }),
        ).rejects.toThrow()
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([first])
      })

      it("rejects with the function's own error when it throws after one of its calls failed", async () => {
        const channel = await createChannel(storage, companyId)
        const closed = await createSession(storage, channel, { state: 'closed' })
        const own = new Error('the function gives up')

        const outcome = await storage
          .transaction(async (tx) => {
            await tx.messages.insertMany([newMessageInput(closed)], { intoOpenSession: true }).catch(() => {})
            throw own
          })
          .catch((error: unknown) => error)

        expect(outcome).toBe(own)
        expect(await storage.messages.list({ sessionId: closed.id, limit: 10 })).toEqual([])
      })

      it('holds a session read with lock until its transaction ends: a save elsewhere waits, then lands', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)
        let held: () => void = () => {}
        const wasHeld = new Promise<void>((resolve) => {
          held = resolve
        })
        let release: () => void = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        const order: string[] = []

        const holding = storage.transaction(async (tx) => {
          // The session's messages before the session itself, in the order every writer takes them.
          await insertMessage(tx, session, { role: 'operator', delivery: 'pending' })
          await tx.sessions.get({ id: session.id, lock: true })
          // Two holders at once: locked reads do not wait for each other.
          await tx.sessions.get({ id: session.id, lock: true })
          held()
          await released
          order.push('holder committed')
        })
        await wasHeld
        const saving = storage.sessions.save({ ...session, state: 'closed' }).then((saved) => {
          order.push('saved')
          return saved
        })
        // Time for a save that does not wait to land first.
        await new Promise((resolve) => setTimeout(resolve, 100))
        release()
        await holding

        expect(await saving).toMatchObject({ state: 'closed', version: session.version + 1 })
        expect(order).toEqual(['holder committed', 'saved'])
      })

      // A customer's message read its session open, and an operator closed it before the message
      // was stored: the message must not land in the closed session, where no turn answers it.
      it('refuses messages into an open session that a transaction under way closes: they wait, then find it closed', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)
        const beside = await createSession(storage, channel)
        let saved: () => void = () => {}
        const wasSaved = new Promise<void>((resolve) => {
          saved = resolve
        })
        let release: () => void = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        const outcome = (stored: Promise<unknown>) =>
          stored.then(
            () => 'stored',
            (error: unknown) => (SessionClosedError.isInstance(error) ? 'refused' : String(error)),
          )

        const closing = storage.transaction(async (tx) => {
          expect(await tx.sessions.save({ ...session, state: 'closed' })).not.toBeNull()
          saved()
          await released
        })
        await wasSaved
        const inserting = outcome(
          storage.messages.insert(newMessageInput(session), { intoOpenSession: true }),
        )
        const insertingMany = outcome(
          storage.messages.insertMany([newMessageInput(beside), newMessageInput(session)], {
            intoOpenSession: true,
          }),
        )
        // Time for inserts that do not wait for the close to land first.
        await new Promise((resolve) => setTimeout(resolve, 100))
        release()
        await closing

        expect(await inserting).toBe('refused')
        expect(await insertingMany).toBe('refused')
        expect(await storage.messages.list({ sessionId: session.id, limit: 10 })).toEqual([])
        expect(await storage.messages.list({ sessionId: beside.id, limit: 10 })).toEqual([])
      })

      it('lands every one of 20 concurrent compare-and-set loops', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)

        await Promise.all(
          Array.from({ length: 20 }, async (_, index) => {
            for (;;) {
              const current = (await storage.sessions.get({ id: session.id }))!
              const facts = { ...current.metadata.sharedContext.facts, [`fact${index}`]: String(index) }
              const next = {
                ...current,
                metadata: {
                  ...current.metadata,
                  sharedContext: { ...current.metadata.sharedContext, facts },
                },
              }
              if ((await storage.sessions.save(next)) !== null) return
            }
          }),
        )

        const final = (await storage.sessions.get({ id: session.id }))!
        expect(Object.keys(final.metadata.sharedContext.facts)).toHaveLength(20)
        expect(final.version).toBe(session.version + 20)
      })

      it('lands every one of 20 concurrent transactions that read, change and save a session', async () => {
        const channel = await createChannel(storage, companyId)
        const session = await createSession(storage, channel)

        await Promise.all(
          Array.from({ length: 20 }, (_, index) =>
            storage.transaction(async (tx) => {
              for (;;) {
                const current = (await tx.sessions.get({ id: session.id }))!
                const journey = [
                  ...current.metadata.sharedContext.journey,
                  { step: `step ${index}`, at: at(index).toISOString() },
                ]
                const next = {
                  ...current,
                  metadata: {
                    ...current.metadata,
                    sharedContext: { ...current.metadata.sharedContext, journey },
                  },
                }
                const saved = await tx.sessions.save(next)
                if (saved !== null) {
                  await insertMessage(tx, saved, { text: `turn ${index}` })
                  return
                }
              }
            }),
          ),
        )

        const final = (await storage.sessions.get({ id: session.id }))!
        expect(final.metadata.sharedContext.journey).toHaveLength(20)
        expect(final.version).toBe(session.version + 20)
        expect(await storage.messages.list({ sessionId: session.id, limit: 100 })).toHaveLength(20)
      })
    })
  })

  runAccountStorageConformance(name, createStorage, options)
  runHumanTransferConformance(name, createStorage, options)
}
