import { describe, expect, it } from 'vitest'
import { createMemoryKnowledgeIndex } from '../knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import { createOfflineProvider } from '../offline/offline-provider.js'
import { type Storage, TransactionConflictError } from '../ports/storage.js'
import { createChannel, createSession } from '../testing/conformance/storage-fixtures.js'
import { createManualClock } from '../testing/manual-clock.js'
import { createRecordingConnector } from '../testing/recording-connector.js'
import { seedChannel } from '../testing/seed-channel.js'
import { createSwitchboard } from './create-switchboard.js'
import { updateSession } from './update-session.js'

const conflicts = new WeakMap<Storage, { left: number }>()

/** Memory storage whose first `failures` transactions are given up as a database gives up a deadlock's victim. */
function conflicting(failures: number): { storage: Storage; attempts: () => number } {
  const storage = createMemoryStorage()
  const transaction = storage.transaction.bind(storage)
  const pending = { left: failures }
  conflicts.set(storage, pending)
  let attempts = 0
  storage.transaction = async (fn) => {
    attempts += 1
    if (pending.left > 0) {
      pending.left -= 1
      throw new TransactionConflictError('deadlock detected')
    }
    return transaction(fn)
  }
  return { storage, attempts: () => attempts }
}

/** The next `count` transactions of a `conflicting` storage are given up. */
function conflictNext(storage: Storage, count: number): void {
  conflicts.get(storage)!.left = count
}

describe('updateSession', () => {
  it('runs a transaction the storage gave up for a concurrent one again, and lands it', async () => {
    const { storage, attempts } = conflicting(3)
    const session = await createSession(storage, await createChannel(storage, 1))

    const updated = await updateSession(storage, { sessionId: session.id }, (current) => ({
      session: { ...current, state: 'paused' },
      value: null,
    }))

    expect(updated._unsafeUnwrap().session).toMatchObject({ state: 'paused', version: session.version + 1 })
    expect(attempts()).toBe(4)
  })

  it('passes on any other failure at once', async () => {
    const storage = createMemoryStorage()
    const session = await createSession(storage, await createChannel(storage, 1))

    let applied = 0

    await expect(
      updateSession(storage, { sessionId: session.id }, () => {
        applied += 1
        throw new Error('the disk is full')
      }),
    ).rejects.toThrow('the disk is full')
    expect(applied).toBe(1)
  })

  it('hands the started writes their results in order, and takes everything back when that check throws', async () => {
    const storage = createMemoryStorage()
    const channel = await createChannel(storage, 1)
    const session = await createSession(storage, channel)
    const seen: unknown[][] = []

    const attempt = (refuse: boolean) =>
      updateSession(storage, { sessionId: session.id }, (current, tx) => ({
        session: { ...current, state: 'paused' },
        value: null,
        pending: [tx.jobs.pending({}), tx.sessions.get({ id: current.id })],
        written: (results) => {
          seen.push([...results])
          if (refuse) throw new Error('the precondition is gone')
        },
        beforeCommit: (last) => [
          last.billing.adjust({ companyId: current.companyId, amountUsd: 5, at: new Date() }),
        ],
      }))

    await expect(attempt(true)).rejects.toThrow('the precondition is gone')
    expect(seen[0]?.slice(0, 2)).toEqual([0, session])
    expect(await storage.sessions.get({ id: session.id })).toEqual(session)
    expect(await storage.billing.getBalance({ companyId: session.companyId })).toBe(0)

    const updated = await attempt(false)
    expect(updated._unsafeUnwrap().session).toMatchObject({ state: 'paused', version: session.version + 1 })
    expect(await storage.billing.getBalance({ companyId: session.companyId })).toBe(5)
  })
})

describe("an operator's message", () => {
  it('is stored and announced once when the storage gave its first transactions up for concurrent ones', async () => {
    const { storage, attempts } = conflicting(0)
    const { integration } = await seedChannel(storage, { type: 'sms' })
    const switchboard = createSwitchboard({
      storage,
      model: createOfflineProvider(),
      knowledge: createMemoryKnowledgeIndex(),
      connectors: [createRecordingConnector({ type: 'sms' })],
      clock: createManualClock(),
      concurrency: 0,
    })
    try {
      const session = (
        await switchboard.openSession({ integrationId: integration.id, clientId: 'ann' })
      )._unsafeUnwrap()
      const created: string[] = []
      switchboard.events.on('message-created', (event) => created.push(event.message.id))
      const before = attempts()
      conflictNext(storage, 2)

      const sent = await switchboard.sessions.sendOperatorMessage({
        companyId: session.companyId,
        sessionId: session.id,
        text: 'An operator here',
      })

      const message = sent._unsafeUnwrap()
      expect(attempts() - before).toBe(3)
      expect(created).toEqual([message.id])
      const stored = await storage.messages.list({ sessionId: session.id, limit: 10 })
      expect(stored.map((row) => row.text)).toEqual(['An operator here'])
    } finally {
      await switchboard.stop()
    }
  })
})
