import { describe, expect, it } from 'vitest'
import { createMemoryStorage } from '../memory/memory-storage.js'
import { type Storage, TransactionConflictError } from '../ports/storage.js'
import { createChannel, createSession } from '../testing/conformance/storage-fixtures.js'
import { updateSession } from './update-session.js'

/** Memory storage whose next `failures` transactions are given up as a database gives up a deadlock's victim. */
function conflicting(failures: number): { storage: Storage; attempts: () => number } {
  const storage = createMemoryStorage()
  const transaction = storage.transaction.bind(storage)
  let attempts = 0
  storage.transaction = async (fn) => {
    attempts += 1
    if (attempts <= failures) throw new TransactionConflictError('deadlock detected')
    return transaction(fn)
  }
  return { storage, attempts: () => attempts }
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

    await expect(
      updateSession(storage, { sessionId: session.id }, () => {
        throw new Error('the disk is full')
      }),
    ).rejects.toThrow('the disk is full')
  })
})
