import { describe, expect, it } from 'vitest'
import {
  type Connector,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createSwitchboard,
  type LlmProvider,
  type SendOutcome,
  type Storage,
} from '../src/index.js'
import { createManualClock, createScriptedModel, reply, seedChannel } from '../src/testing/index.js'

interface Gate {
  readonly opened: Promise<void>
  open(): void
}

function gate(): Gate {
  let open: () => void = () => undefined
  const opened = new Promise<void>((resolve) => {
    open = resolve
  })
  return { opened, open }
}

/** Memory storage whose next leases wait for `leaseGate`, when one is set. */
function slowLeases(storage: Storage): { hold(): Gate } {
  let held: Gate | null = null
  const lease = storage.jobs.lease
  storage.jobs.lease = async (options) => {
    const waiting = held
    if (waiting !== null) await waiting.opened
    return lease(options)
  }
  return {
    hold() {
      held = gate()
      return held
    },
  }
}

/** A channel whose sends wait for the gate set when they started, when one is set. */
function slowConnector(type: string): Connector & { sent: string[]; hold(): Gate; started: number } {
  let held: Gate | null = null
  const connector = {
    type,
    sent: [] as string[],
    started: 0,
    hold() {
      held = gate()
      return held
    },
    async send({ message }: { message: { text: string } }): Promise<SendOutcome> {
      connector.started += 1
      const waiting = held
      if (waiting !== null) await waiting.opened
      connector.sent.push(message.text)
      return { ok: true }
    },
  }
  return connector
}

const within = <T>(promise: Promise<T>, ms: number): Promise<T | 'timed out'> =>
  Promise.race([promise, new Promise<'timed out'>((resolve) => setTimeout(() => resolve('timed out'), ms))])

const tick = () => new Promise((resolve) => setTimeout(resolve, 10))

/** A model that counts its calls: a process stopping must make none. */
function countingModel(): LlmProvider & { calls: number } {
  const model = {
    name: 'counting',
    calls: 0,
    async complete() {
      model.calls += 1
      return { text: 'too late', toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } }
    },
  }
  return model
}

/** Memory storage whose transactions, while `committing` holds a gate, wait for it before they commit. */
function slowCommits(storage: Storage): { hold(): Gate; release(): void } {
  const transaction = storage.transaction
  let committing: Gate | null = null
  storage.transaction = (fn) =>
    transaction(async (tx) => {
      const result = await fn(tx)
      if (committing !== null) await committing.opened
      return result
    })
  return {
    hold() {
      committing = gate()
      return committing
    },
    release() {
      const held = committing
      committing = null
      held?.open()
    },
  }
}

const STOP_TIME = '2026-03-01T10:00:00.000Z'

function switchboardOn(
  storage: Storage,
  model: LlmProvider,
  connector: Connector,
  clock = createManualClock(STOP_TIME),
) {
  return createSwitchboard({
    storage,
    model,
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock,
  })
}

/** Another process, at the same moment as the one that stopped, answers at once: nothing holds the job. */
async function expectTakenOverAtOnce(
  storage: Storage,
  agentId: number,
  connector: Connector & { sent: string[] },
) {
  const scripted = createScriptedModel()
  scripted.script(agentId, reply('taken over'))
  const next = switchboardOn(storage, scripted, connector)
  await next.idle()
  expect(connector.sent).toEqual(['taken over'])
  await next.stop()
}

describe('idle and stop', () => {
  it('idle resolves when a job is leased while it waits for the last delivery', async () => {
    const storage = createMemoryStorage()
    const leases = slowLeases(storage)
    const connector = slowConnector('slow')
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const model = createScriptedModel()
    model.script(agent.id, reply('first'), reply('second'))
    const switchboard = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(),
    })
    try {
      const sending = connector.hold()
      await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
      while (connector.started === 0) await tick()
      // The turn is done, its reply is being sent: idle waits for the delivery.
      const idle = switchboard.idle()
      await tick()
      // A message arrives meanwhile, and its lease takes a while (a busy database).
      const leasing = leases.hold()
      await switchboard.ingest({ integrationId: integration.id, clientId: 'bob', text: 'hello' })
      sending.open()
      await tick()
      leasing.open()
      expect(await within(idle, 1000)).toBeUndefined()
      expect(connector.sent).toEqual(['first', 'second'])
    } finally {
      await switchboard.stop()
    }
  })

  it('takes no job whose lease was under way when stop was called, and gives it back', async () => {
    const storage = createMemoryStorage()
    const leases = slowLeases(storage)
    const connector = slowConnector('slow')
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const model = countingModel()
    const stopping = switchboardOn(storage, model, connector)
    await stopping.idle()
    const leasing = leases.hold()
    // Stored by a process that only ingests: this one finds the job by a lease.
    const front = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(STOP_TIME),
      concurrency: 0,
    })
    await front.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    const stopped = stopping.stop()
    leasing.open()
    await stopped
    await tick()
    expect(model.calls).toBe(0)
    await front.stop()
    await expectTakenOverAtOnce(storage, agent.id, connector)
  })

  it("gives back a new session's first job whose message was being stored when stop was called", async () => {
    const storage = createMemoryStorage()
    const commits = slowCommits(storage)
    const connector = slowConnector('slow')
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const model = countingModel()
    const stopping = switchboardOn(storage, model, connector)
    await stopping.idle()
    commits.hold()
    const ingesting = stopping.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await tick()
    let stopDone = false
    const stopped = stopping.stop().then(() => {
      stopDone = true
    })
    await tick()
    // Stop waits for the job being handed over, so it is given back before the storage may close.
    expect(stopDone).toBe(false)
    commits.release()
    expect((await ingesting).isOk()).toBe(true)
    await stopped
    expect(model.calls).toBe(0)
    await expectTakenOverAtOnce(storage, agent.id, connector)
  })

  it("does not renew the lease of a new session's first job it gives back at stop", async () => {
    const storage = createMemoryStorage()
    const commits = slowCommits(storage)
    // The give-back is made at once, and its answer takes a while (a round trip to a database).
    const answering = gate()
    const renew = storage.jobs.renew
    storage.jobs.renew = async (options) => {
      const renewed = await renew(options)
      if (options.leaseMs === 0) await answering.opened
      return renewed
    }
    const connector = slowConnector('slow')
    const { integration } = await seedChannel(storage, { type: connector.type })
    const clock = createManualClock(STOP_TIME)
    const stopping = switchboardOn(storage, createScriptedModel(), connector, clock)
    await stopping.idle()
    commits.hold()
    const ingesting = stopping.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    await tick()
    const stopped = stopping.stop()
    await tick()
    commits.release()
    expect((await ingesting).isOk()).toBe(true)
    // The pool renews its running jobs' leases every third of a lease while the give-back is answered.
    await clock.advance(20_000)
    answering.open()
    await stopped

    // Another process, at the same moment, finds the job free.
    const taken = await storage.jobs.lease({ now: clock.now(), leaseMs: 55_000, token: 'next process' })
    expect(taken).not.toBeNull()
  })

  it('stop ends within its timeout while a delivery hangs', async () => {
    const storage = createMemoryStorage()
    const connector = slowConnector('slow')
    const { agent, integration } = await seedChannel(storage, { type: connector.type })
    const model = createScriptedModel()
    model.script(agent.id, reply('never leaves'))
    const switchboard = createSwitchboard({
      storage,
      model,
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [connector],
      clock: createManualClock(),
    })
    const hanging = connector.hold()
    await switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text: 'hello' })
    while (connector.started === 0) await tick()
    expect(await within(switchboard.stop({ timeoutMs: 100 }), 1000)).toBeUndefined()
    hanging.open()
  })
})
