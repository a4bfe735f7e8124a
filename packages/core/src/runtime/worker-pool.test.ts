import { describe, expect, it, vi } from 'vitest'
import { createMemoryKnowledgeIndex } from '../knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import type { LlmProvider } from '../ports/llm-provider.js'
import type { JobLease, Storage } from '../ports/storage.js'
import { createManualClock } from '../testing/manual-clock.js'
import { createRecordingConnector } from '../testing/recording-connector.js'
import { createScriptedModel, reply } from '../testing/scripted-model.js'
import { seedChannel } from '../testing/seed-channel.js'
import { createSwitchboard } from './create-switchboard.js'

interface LeaseCall {
  readonly token: string
  readonly leased: JobLease | null
}

/** Memory storage whose job queue notes every lease asked for and what it found. */
function createWatchedStorage(): { storage: Storage; leases: LeaseCall[] } {
  const storage = createMemoryStorage()
  const leases: LeaseCall[] = []
  const lease = storage.jobs.lease
  storage.jobs.lease = async (options) => {
    const leased = await lease(options)
    leases.push({ token: options.token, leased })
    return leased
  }
  return { storage, leases }
}

/** A model that answers `text` after `ms`, longer than the short leases of these tests. */
function slowModel(text: string, ms: number): LlmProvider {
  return {
    name: 'slow',
    complete: () =>
      new Promise((resolve) =>
        setTimeout(() => resolve({ text, toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } }), ms),
      ),
  }
}

/** Turns that answer "late" after 250 ms, with leases of 90 ms: each must be renewed to finish. */
async function startSlowTurns(storage: Storage) {
  const connector = createRecordingConnector()
  const { integration } = await seedChannel(storage, { type: connector.type })
  const switchboard = createSwitchboard({
    storage,
    model: slowModel('late', 250),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    leaseMs: 90,
  })
  return { switchboard, connector, integration }
}

async function start(options: { concurrency?: number; replies: number }) {
  const { storage, leases } = createWatchedStorage()
  const connector = createRecordingConnector()
  const { agent, integration } = await seedChannel(storage, { type: connector.type })
  const model = createScriptedModel()
  model.script(agent.id, ...Array.from({ length: options.replies }, (_, index) => reply(`answer ${index}`)))
  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
  })
  await switchboard.idle()
  leases.length = 0
  const says = (clientId: string) =>
    switchboard.ingest({ integrationId: integration.id, clientId, text: 'hello' })
  return { switchboard, leases, connector, says }
}

describe('the worker pool', () => {
  it("runs a new session's first message on a free worker of the process that stored it, with no lease", async () => {
    const { switchboard, leases, connector, says } = await start({ replies: 1 })
    const delivered = new Promise((resolve) => switchboard.events.once('message-delivered', resolve))
    await says('ann')
    await delivered
    // Time for any lease the finished turn would still ask for.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(connector.sent.map((sent) => sent.text)).toEqual(['answer 0'])
    expect(leases).toEqual([])
    await switchboard.stop()
  })

  it("runs a returning customer's message with no lease too, and leases one that waited behind its session's job", async () => {
    const { switchboard, leases, connector, says } = await start({ replies: 3 })
    const delivered = new Promise((resolve) => switchboard.events.once('message-delivered', resolve))
    await says('ann')
    await delivered
    // Not `idle()`, which looks for work itself.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(leases).toEqual([])
    // Two at once: the first is handed to a worker; the second waits behind it and is found by a
    // lease once the first is done, after which the pool asks once more and finds nothing.
    await Promise.all([says('ann'), says('ann')])
    await vi.waitFor(() => expect(connector.sent).toHaveLength(3), { timeout: 500 })
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(connector.sent.map((sent) => sent.text)).toEqual(['answer 0', 'answer 1', 'answer 2'])
    expect(leases.map((call) => call.leased === null)).toEqual([false, true])
    await switchboard.stop()
  })

  it("leases a new session's first job like any other when no worker is free for it", async () => {
    const { switchboard, leases, connector, says } = await start({ concurrency: 1, replies: 2 })
    // Both stored before either turn ends: the second finds the one worker busy.
    await Promise.all([says('ann'), says('bob')])
    await switchboard.idle()
    expect(connector.sent.map((sent) => sent.clientId).sort()).toEqual(['ann', 'bob'])
    expect(leases.filter((call) => call.leased !== null)).toHaveLength(1)
    await switchboard.stop()
  })

  it("keeps no worker for a new session's first job while a lease under way may fill the last slot", async () => {
    const { storage } = createWatchedStorage()
    const connector = createRecordingConnector()
    const { integration } = await seedChannel(storage, { type: connector.type })
    let working = 0
    let mostAtOnce = 0
    const model: LlmProvider = {
      name: 'counting',
      async complete() {
        working += 1
        mostAtOnce = Math.max(mostAtOnce, working)
        await new Promise((resolve) => setTimeout(resolve, 20))
        working -= 1
        return { text: 'answer', toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } }
      },
    }
    const switchboard = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      concurrency: 1,
    })
    await switchboard.idle()
    await switchboard.openSession({ integrationId: integration.id, clientId: 'ann' })
    // Ann's lease takes a while (a busy database); Bob, a new customer, writes meanwhile.
    let leaseStarted = () => {}
    const started = new Promise<void>((resolve) => {
      leaseStarted = resolve
    })
    let openLease = () => {}
    const leaseHeld = new Promise<void>((resolve) => {
      openLease = resolve
    })
    const lease = storage.jobs.lease
    storage.jobs.lease = async (options) => {
      leaseStarted()
      await leaseHeld
      return lease(options)
    }
    await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await started
    await switchboard.ingest({ integrationId: integration.id, clientId: 'bob', text: 'hello' })
    openLease()
    await switchboard.idle()
    expect(connector.sent).toHaveLength(2)
    expect(mostAtOnce).toBe(1)
    await switchboard.stop()
  })

  it('hands no job to a process that only ingests (concurrency 0): another one leases it', async () => {
    const { storage, leases } = createWatchedStorage()
    const connector = createRecordingConnector()
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const model = createScriptedModel()
    model.script(agent.id, reply('from the worker process'))
    const common = { storage, model, knowledge: createMemoryKnowledgeIndex(), connectors: [connector] }
    const front = createSwitchboard({ ...common, concurrency: 0 })
    await front.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    expect(await storage.jobs.pending({})).toBe(1)
    const worker = createSwitchboard(common)
    await worker.idle()
    expect(connector.sent.map((sent) => sent.text)).toEqual(['from the worker process'])
    expect(leases.filter((call) => call.leased !== null)).toHaveLength(1)
    await Promise.all([front.stop(), worker.stop()])
  })

  it('offers the token of a lease that found nothing again, and never the token of a leased job', async () => {
    const { switchboard, leases, says, connector } = await start({ replies: 8 })
    // Of messages sent together, the first is handed to a worker as it is stored (and the first of
    // the batch stored after it too, when that job finished meanwhile); the others wait behind it
    // and are leased one by one.
    for (let round = 0; round < 2; round++) {
      await Promise.all([says('ann'), says('ann'), says('ann'), says('ann')])
      await switchboard.idle()
    }
    expect(connector.sent).toHaveLength(8)
    expect(leases.filter((call) => call.leased !== null).length).toBeGreaterThanOrEqual(4)
    expect(leases.filter((call) => call.leased !== null).length).toBeLessThanOrEqual(6)
    leases.forEach((call, index) => {
      const later = leases.slice(index + 1).map((laterCall) => laterCall.token)
      // A token that took a job fences that job's commit: no later lease may carry it.
      if (call.leased !== null) expect(later).not.toContain(call.token)
      // One that found nothing is no job's, so the next lease offers it rather than a new one.
      else if (index + 1 < leases.length) expect(later[0]).toBe(call.token)
    })
    await switchboard.stop()
  })

  it('takes the next waiting job when a busy slot frees, with no new message to wake it', async () => {
    const { switchboard, connector, says } = await start({ concurrency: 1, replies: 3 })
    await Promise.all([says('ann'), says('bob'), says('eve')])
    // Well before the poll (every second) would find the jobs left waiting.
    await vi.waitFor(() => expect(connector.sent).toHaveLength(3), { timeout: 500 })
    await switchboard.stop()
  })

  it('renews the lease of a turn that outlasts it, so no other process takes the job, and stops after', async () => {
    const { storage } = createWatchedStorage()
    const renewals: number[] = []
    const renew = storage.jobs.renew
    storage.jobs.renew = (options) => {
      renewals.push(Date.now())
      return renew(options)
    }
    const { switchboard, connector, integration } = await startSlowTurns(storage)
    await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await new Promise((resolve) => setTimeout(resolve, 150))
    // Another process, on its own clock: the lease would have run out 60 ms ago without renewals.
    expect(await storage.jobs.lease({ now: new Date(), leaseMs: 90, token: 'other process' })).toBeNull()
    await switchboard.idle()
    expect(connector.sent.map((sent) => sent.text)).toEqual(['late'])
    const renewed = renewals.length
    expect(renewed).toBeGreaterThanOrEqual(3)
    await new Promise((resolve) => setTimeout(resolve, 100))
    expect(renewals).toHaveLength(renewed)
    await switchboard.stop()
  })

  it('keeps renewing the leases of the turns a stop waits for', async () => {
    const storage = createMemoryStorage()
    const { switchboard, connector, integration } = await startSlowTurns(storage)
    const started = new Promise((resolve) => switchboard.events.once('turn-started', resolve))
    await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await started
    const stopped = switchboard.stop({ timeoutMs: 2000 })
    await new Promise((resolve) => setTimeout(resolve, 150))
    // The lease would have run out 60 ms ago had the stop ended its renewals.
    expect(await storage.jobs.lease({ now: new Date(), leaseMs: 90, token: 'other process' })).toBeNull()
    await stopped
    expect(connector.sent.map((sent) => sent.text)).toEqual(['late'])
  })

  it('takes a job of a process that died again within 60 s, at the default lease and poll (CONTRACT §11)', async () => {
    const storage = createMemoryStorage()
    const connector = createRecordingConnector()
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const start = '2026-03-01T10:00:00.000Z'
    // The process that dies: its model never answers, and its clock never moves again, so its
    // lease is never renewed.
    const dying = createSwitchboard({
      storage,
      model: { name: 'hangs', complete: () => new Promise(() => undefined) },
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(start),
    })
    const leased = new Promise((resolve) => dying.events.once('turn-started', resolve))
    await dying.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await leased

    const model = createScriptedModel()
    model.script(agent.id, reply('taken over'))
    const clock = createManualClock(start)
    const survivor = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock,
    })
    // Its polls are a second apart at most; a later one than this would break the promise.
    for (let elapsed = 0; elapsed < 59_000 && connector.sent.length === 0; elapsed += 250) {
      await clock.advance(250)
    }
    await vi.waitFor(() => expect(connector.sent.map((sent) => sent.text)).toEqual(['taken over']))
    expect(clock.now().getTime() - Date.parse(start)).toBeLessThanOrEqual(59_000)
    await survivor.stop()
    await dying.stop({ timeoutMs: 0 })
  })

  it('gives back the job of a turn a stop cut short, so another process takes it at once', async () => {
    const storage = createMemoryStorage()
    const connector = createRecordingConnector()
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const start = '2026-03-01T10:00:00.000Z'
    const stopping = createSwitchboard({
      storage,
      model: { name: 'hangs', complete: () => new Promise(() => undefined) },
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(start),
    })
    const leased = new Promise((resolve) => stopping.events.once('turn-started', resolve))
    await stopping.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await leased
    await stopping.stop({ timeoutMs: 0 })

    const model = createScriptedModel()
    model.script(agent.id, reply('taken over'))
    // The same moment: nothing waits for the cut-short turn's lease to run out.
    const next = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(start),
    })
    await next.idle()
    expect(connector.sent.map((sent) => sent.text)).toEqual(['taken over'])
    await next.stop()
  })
})
