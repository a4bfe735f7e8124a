import { randomUUID } from 'node:crypto'
import { describe, expect, it, vi } from 'vitest'
import type { Message } from '../domain/session.js'
import { runJobQueueConformance } from '../testing/conformance/job-queue-conformance.js'
import { runStorageConformance } from '../testing/conformance/storage-conformance.js'
import {
  at,
  createChannel,
  createSession,
  insertMessage,
  newMessageInput,
} from '../testing/conformance/storage-fixtures.js'
import { createMemoryStorage } from './memory-storage.js'

runStorageConformance('memory', createMemoryStorage)
runJobQueueConformance('memory', createMemoryStorage)

function isDeepFrozen(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return true
  return Object.isFrozen(value) && Object.values(value).every(isDeepFrozen)
}

/** How many entries walks over maps make while `run` runs: the work of a lookup, counted. */
async function countMapSteps(run: () => Promise<unknown>): Promise<number> {
  const prototype = Map.prototype
  const originals = {
    values: prototype.values,
    keys: prototype.keys,
    entries: prototype.entries,
    iterator: prototype[Symbol.iterator],
  }
  let steps = 0
  const counted = <T>(iterator: IterableIterator<T>): IterableIterator<T> => {
    const next = iterator.next.bind(iterator)
    const wrapped = {
      next: () => {
        steps += 1
        return next()
      },
      [Symbol.iterator]: () => wrapped,
    }
    return wrapped as IterableIterator<T>
  }
  prototype.values = function (this: Map<unknown, unknown>) {
    return counted(originals.values.call(this))
  }
  prototype.keys = function (this: Map<unknown, unknown>) {
    return counted(originals.keys.call(this))
  }
  prototype.entries = function (this: Map<unknown, unknown>) {
    return counted(originals.entries.call(this))
  }
  prototype[Symbol.iterator] = prototype.entries
  try {
    await run()
  } finally {
    prototype.values = originals.values
    prototype.keys = originals.keys
    prototype.entries = originals.entries
    prototype[Symbol.iterator] = originals.iterator
  }
  return steps
}

describe('memory storage', () => {
  it('shows a read made on the storage while a transaction starts none of its writes, rolled back', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const { companyId, id } = channel.agent
    let read: Promise<unknown> | undefined

    await expect(
      storage.transaction(async (tx) => {
        const write = tx.agents.update({ companyId, id, patch: { name: 'never committed' }, at: at() })
        // The storage itself, before the transaction's first await: it must wait for the transaction.
        read = storage.agents.get({ companyId, id })
        await write
        throw new Error('rolled back on purpose')
      }),
    ).rejects.toThrow('rolled back on purpose')

    expect(await read).toMatchObject({ name: channel.agent.name })
  })

  it('is of kind memory and numbers agents and integrations from 1', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)

    expect(storage.kind).toBe('memory')
    expect(channel.agent.id).toBe(1)
    expect(channel.integration.id).toBe('1')
  })

  it('numbers companies from 1 and pipelines and their stages from "1"', async () => {
    const storage = createMemoryStorage()
    const first = await storage.companies.create({ companyName: 'First', publicId: randomUUID(), at: at() })
    const second = await storage.companies.create({ companyName: 'Second', publicId: randomUUID(), at: at() })
    const pipeline = await storage.pipelines.create({
      companyId: first.id,
      name: 'Sales',
      isDefault: true,
      stages: ['New', 'Won'],
      at: at(),
    })

    expect([first.id, second.id]).toEqual([1, 2])
    expect(pipeline.id).toBe('1')
    expect(pipeline.stages.map((stage) => stage.id)).toEqual(['1', '2'])
  })

  it('refuses a second company with the same public id', async () => {
    const storage = createMemoryStorage()
    const publicId = randomUUID()
    await storage.companies.create({ companyName: 'First', publicId, at: at() })

    await expect(storage.companies.create({ companyName: 'Copy', publicId, at: at() })).rejects.toThrow()
  })

  it('hands out deeply frozen account records', async () => {
    const storage = createMemoryStorage()
    const company = await storage.companies.create({ companyName: 'Acme', publicId: randomUUID(), at: at() })
    const user = await storage.users.create({
      id: randomUUID(),
      email: 'ada@example.com',
      companyId: company.id,
      passwordHash: 'hash',
      at: at(),
    })
    const pipeline = await storage.pipelines.create({
      companyId: company.id,
      name: 'Sales',
      isDefault: true,
      stages: ['New'],
      at: at(),
    })
    const usage = await storage.billing.recordUsage({
      id: randomUUID(),
      companyId: company.id,
      sessionId: randomUUID(),
      model: 'gpt-4o-mini',
      inputTokens: 1,
      outputTokens: 1,
      costUsd: 0.01,
      at: at(),
    })

    for (const record of [company, user, pipeline, usage]) expect(isDeepFrozen(record)).toBe(true)
  })

  it('hands out deeply frozen records', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel)
    const message = await insertMessage(storage, session)

    expect(isDeepFrozen(channel.agent)).toBe(true)
    expect(isDeepFrozen(channel.integration)).toBe(true)
    expect(isDeepFrozen(session)).toBe(true)
    expect(isDeepFrozen(message)).toBe(true)
    expect(() => {
      ;(session.metadata.agentPath as unknown[]).push('x')
    }).toThrow(TypeError)
  })

  it('lists sessions created in the same millisecond latest first', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const first = await createSession(storage, channel)
    const second = await createSession(storage, channel)
    const third = await createSession(storage, channel)

    const page = await storage.sessions.list({ companyId: 7, limit: 10 })
    expect(page.items.map((session) => session.id)).toEqual([third.id, second.id, first.id])
  })

  it('answers an empty page to a cursor it did not write', async () => {
    const storage = createMemoryStorage()
    await createChannel(storage, 7)

    expect(await storage.agents.list({ companyId: 7, limit: 10, cursor: 'not a cursor' })).toEqual({
      items: [],
      nextCursor: null,
    })
    expect(await storage.sessions.list({ companyId: 7, limit: 10, cursor: 'bm9wZQ' })).toEqual({
      items: [],
      nextCursor: null,
    })
  })

  it('refuses a page limit below 1', async () => {
    const storage = createMemoryStorage()
    await expect(storage.agents.list({ companyId: 7, limit: 0 })).rejects.toThrow(RangeError)
  })

  it('runs one transaction at a time', async () => {
    const storage = createMemoryStorage()
    const events: string[] = []
    const run = (name: string) =>
      storage.transaction(async () => {
        events.push(`${name} start`)
        await new Promise((resolve) => setTimeout(resolve, 5))
        events.push(`${name} end`)
      })

    await Promise.all([run('first'), run('second'), run('third')])
    expect(events).toEqual([
      'first start',
      'first end',
      'second start',
      'second end',
      'third start',
      'third end',
    ])
  })

  it('keeps calls on the storage waiting while a transaction runs', async () => {
    const storage = createMemoryStorage()
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    const transaction = storage.transaction(async (tx) => {
      const channel = await createChannel(tx, 7)
      await released
      return channel
    })

    const read = storage.agents.list({ companyId: 7, limit: 10 })
    const settled = vi.fn()
    read.then(settled, settled)
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(settled).not.toHaveBeenCalled()

    release()
    const channel = await transaction
    expect((await read).items).toEqual([channel.agent])
  })

  it('keeps a call waiting behind a transaction that was asked for but has not started yet', async () => {
    const storage = createMemoryStorage()
    const transaction = storage.transaction((tx) => createChannel(tx, 7))

    const read = storage.agents.list({ companyId: 7, limit: 10 })

    const channel = await transaction
    expect((await read).items).toEqual([channel.agent])
  })

  it('refuses to use the repositories of a transaction that is over', async () => {
    const storage = createMemoryStorage()
    const tx = await storage.transaction(async (repositories) => repositories)

    await expect(tx.agents.get({ companyId: 7, id: 1 })).rejects.toThrow(/transaction is already over/)
  })

  it('takes back a failed call inside a transaction at once, and the transaction with it', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel, { clientId: 'alice' })
    let inserted: Message | undefined

    await expect(
      storage.transaction(async (tx) => {
        inserted = await insertMessage(tx, session)
        await expect(createSession(tx, channel, { clientId: 'alice' })).rejects.toThrow(
          /already has open session/,
        )
        // Within the transaction its earlier writes stand and the failed call left nothing.
        expect(await tx.messages.get({ id: inserted.id })).toEqual(inserted)
        expect((await tx.sessions.list({ companyId: 7, limit: 10 })).items).toEqual([session])
        return inserted
      }),
    ).rejects.toThrow(/already has open session/)

    // As in PostgreSQL, whose transaction a failed statement aborts: nothing of it is committed.
    expect(await storage.messages.get({ id: inserted!.id })).toBeNull()
    expect((await storage.sessions.list({ companyId: 7, limit: 10 })).items).toEqual([session])
  })

  it('takes back a failed call outside a transaction, and nothing of the calls before or after it', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel, { clientId: 'alice' })
    const first = await insertMessage(storage, session)
    const second = newMessageInput(session)

    // Its first message is written before the duplicate fails the call.
    await expect(
      storage.messages.insertMany([second, newMessageInput(session, { id: first.id })]),
    ).rejects.toThrow(/already exists/)
    const third = await insertMessage(storage, session)
    await expect(storage.messages.insert(newMessageInput(session, { id: third.id }))).rejects.toThrow(
      /already exists/,
    )

    expect(await storage.messages.get({ id: second.id })).toBeNull()
    expect((await storage.messages.list({ sessionId: session.id, limit: 10 })).map(({ id }) => id)).toEqual([
      first.id,
      third.id,
    ])
  })

  it('frees a lease at the instant it runs out', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel)
    await storage.transaction(async (tx) => {
      const message = await insertMessage(tx, session)
      await tx.jobs.enqueue({ companyId: 7, sessionId: session.id, messageId: message.id, availableAt: at() })
    })

    await storage.jobs.lease({ now: at(), leaseMs: 1000, token: 'first' })
    expect(await storage.jobs.lease({ now: at(999), leaseMs: 1000, token: 'second' })).toBeNull()
    expect(await storage.jobs.lease({ now: at(1000), leaseMs: 1000, token: 'second' })).toMatchObject({
      token: 'second',
    })
  })

  it("tells listeners after a completion that frees a session's next job, never synchronously", async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel)
    for (let index = 0; index < 2; index++) {
      const message = await insertMessage(storage, session)
      await storage.jobs.enqueue({
        companyId: 7,
        sessionId: session.id,
        messageId: message.id,
        availableAt: at(),
      })
    }
    const leased = (await storage.jobs.lease({ now: at(), leaseMs: 1000, token: 'worker' }))!
    const listener = vi.fn()
    storage.jobs.onAvailable(listener)

    const completing = storage.jobs.complete({ jobId: leased.jobId, token: 'worker' })
    expect(listener).not.toHaveBeenCalled()
    await completing
    await new Promise((resolve) => setTimeout(resolve, 0))
    expect(listener).toHaveBeenCalledTimes(1)
  })

  it('keeps other listeners hearing when one throws', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 7)
    const session = await createSession(storage, channel)
    const errors: unknown[] = []
    const onError = (error: unknown) => errors.push(error)
    process.on('uncaughtException', onError)
    const listener = vi.fn()
    storage.jobs.onAvailable(() => {
      throw new Error('listener failed')
    })
    storage.jobs.onAvailable(listener)

    try {
      const message = await insertMessage(storage, session)
      await storage.jobs.enqueue({
        companyId: 7,
        sessionId: session.id,
        messageId: message.id,
        availableAt: at(),
      })
      await new Promise((resolve) => setTimeout(resolve, 0))
      expect(listener).toHaveBeenCalledTimes(1)
      expect(errors).toEqual([new Error('listener failed')])
    } finally {
      process.off('uncaughtException', onError)
    }
  })

  it('refuses calls once closed, after the running transaction finishes', async () => {
    const storage = createMemoryStorage()
    const transaction = storage.transaction((tx) => createChannel(tx, 7))
    await storage.close()

    await expect(transaction).resolves.toMatchObject({ companyId: 7 })
    await expect(storage.agents.get({ companyId: 7, id: 1 })).rejects.toThrow(/closed/)
    await expect(storage.transaction(async () => 1)).rejects.toThrow(/closed/)
  })

  it("claims a session's replies without walking the other sessions' backlog", async () => {
    const storage = createMemoryStorage()
    const now = at()
    // A platform that is down: 5,000 customers' replies wait for a retry.
    for (let index = 0; index < 5_000; index++) {
      await storage.outbox.add({
        messageId: randomUUID(),
        sessionId: randomUUID(),
        companyId: 1,
        integrationId: '1',
        availableAt: at(60_000),
      })
    }
    const sessionId = randomUUID()
    const messageIds = Array.from({ length: 100 }, () => randomUUID())
    for (const messageId of messageIds) {
      await storage.outbox.add({ messageId, sessionId, companyId: 2, integrationId: '2', availableAt: now })
    }

    const sent: string[] = []
    const steps = await countMapSteps(async () => {
      let item = await storage.outbox.claim({
        messageId: messageIds[0]!,
        now,
        leaseMs: 1_000,
        leaseToken: 'a',
      })
      while (item !== null) {
        sent.push(item.messageId)
        await storage.outbox.remove({ messageId: item.messageId, leaseToken: 'a', delivery: 'sent' })
        item = await storage.outbox.claimNext({ sessionId, now, leaseMs: 1_000, leaseToken: 'a' })
      }
    })

    expect(sent).toEqual(messageIds)
    // Each claim walked the whole outbox: over 500,000.
    expect(steps).toBeLessThan(5_000)
  })
})
