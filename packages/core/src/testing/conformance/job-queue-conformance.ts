import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Session } from '../../domain/session.js'
import type { JobLease, Repositories, Storage } from '../../ports/storage.js'
import {
  at,
  type Channel,
  cleanUp,
  companyIdSource,
  createChannel,
  createSession,
  expectedError,
  insertMessage,
  newMessageInput,
  type StorageConformanceOptions,
} from './storage-fixtures.js'

const LEASE_MS = 30_000
const HOUR_MS = 3_600_000
const CENTURY = 100 * 365 * 24 * 3_600_000

/** A promise and the functions that settle it. */
function deferred<T>(): {
  promise: Promise<T>
  resolve: (value: T) => void
  reject: (error: unknown) => void
} {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((settle, fail) => {
    resolve = settle
    reject = fail
  })
  return { promise, resolve, reject }
}

/** A message stored and its job enqueued, leased to the enqueuing worker or not. */
interface Enqueued {
  readonly messageId: string
  readonly leased: JobLease | null
}

function nextTick(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0))
}

/**
 * The job queue contract every adapter passes. Jobs live in the storage and are enqueued in the
 * transaction that stores their message. Time is passed in, so nothing here waits for a lease
 * to run out.
 */
export function runJobQueueConformance(
  name: string,
  createStorage: () => Promise<Storage> | Storage,
  options?: StorageConformanceOptions,
): void {
  const newCompanyId = companyIdSource(options)

  describe(`${name}: job queue conformance`, () => {
    let storage: Storage
    let channel: Channel

    /** Stores a customer message and enqueues its job in one transaction; returns the message id. */
    const receive = (session: Session, availableAt = at()): Promise<string> =>
      storage.transaction(async (tx) => {
        const message = await insertMessage(tx, session, { at: availableAt })
        await tx.jobs.enqueue({
          companyId: session.companyId,
          sessionId: session.id,
          messageId: message.id,
          availableAt,
        })
        return message.id
      })

    const lease = (token: string, now = at()): Promise<JobLease | null> =>
      storage.jobs.lease({ now, leaseMs: LEASE_MS, token })

    beforeEach(async () => {
      storage = await createStorage()
      // Leases whatever earlier tests or runs left unfinished for longer than any time used here,
      // so in a shared database only this test's jobs can be leased.
      let leftover = await storage.jobs.lease({ now: at(CENTURY), leaseMs: CENTURY, token: randomUUID() })
      while (leftover !== null) {
        leftover = await storage.jobs.lease({ now: at(CENTURY), leaseMs: CENTURY, token: randomUUID() })
      }
      channel = await createChannel(storage, await newCompanyId(storage))
    })

    afterEach(async () => {
      await cleanUp(storage, options)
    })

    it('leases a job with what the worker needs to run it', async () => {
      const session = await createSession(storage, channel)
      const messageId = await receive(session)

      const leased = await lease('worker-1')
      expect(leased).toEqual({
        jobId: expect.any(String),
        companyId: channel.companyId,
        sessionId: session.id,
        messageId,
        attempts: 0,
        token: 'worker-1',
      })
      expect(await lease('worker-2')).toBeNull()
    })

    it("runs a session's jobs one at a time in enqueue order", async () => {
      const session = await createSession(storage, channel)
      const messageIds = [await receive(session), await receive(session), await receive(session)]

      const order: string[] = []
      for (let index = 0; index < 3; index++) {
        const leased = (await lease(`worker-${index}`))!
        expect(await lease('other')).toBeNull()
        order.push(leased.messageId)
        expect(await storage.jobs.complete({ jobId: leased.jobId, token: leased.token })).toBe(true)
      }
      expect(order).toEqual(messageIds)
      expect(await lease('idle')).toBeNull()
    })

    /**
     * Completes `first`, then each job a lease finds after it, checking that nobody can lease
     * anything while one is held: the messages of the jobs run, in order, `first`'s included.
     */
    const runBehind = async (first: JobLease): Promise<string[]> => {
      let current = first
      const ran = [current.messageId]
      for (;;) {
        expect(await lease('intruder')).toBeNull()
        expect(await storage.jobs.complete({ jobId: current.jobId, token: current.token })).toBe(true)
        const next = await lease(`worker-${ran.length}`)
        if (next === null) return ran
        ran.push(next.messageId)
        current = next
      }
    }

    /** Creates a session and its first message, and enqueues the message's job leased to `token`. */
    const receiveLeased = (token: string, now = at()) =>
      storage.transaction(async (tx) => {
        const session = await createSession(tx, channel)
        const message = await insertMessage(tx, session, { at: now })
        const leased = await tx.jobs.enqueueLeased(
          { companyId: session.companyId, sessionId: session.id, messageId: message.id, availableAt: now },
          { now, leaseMs: LEASE_MS, token },
        )
        if (leased === null) throw new Error('the first job of a new session was not leased')
        return { session, messageId: message.id, leased }
      })

    it("enqueues a new session's first job leased to its token, which no other worker can take", async () => {
      const { session, messageId, leased } = await receiveLeased('ingesting-worker')

      expect(leased).toEqual({
        jobId: expect.any(String),
        companyId: channel.companyId,
        sessionId: session.id,
        messageId,
        attempts: 0,
        token: 'ingesting-worker',
      })
      expect(await lease('other')).toBeNull()
      expect(await lease('still-other', at(LEASE_MS - 1))).toBeNull()
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)
      expect(
        await storage.jobs.renew({
          jobId: leased.jobId,
          token: 'ingesting-worker',
          now: at(),
          leaseMs: LEASE_MS,
        }),
      ).toBe(true)
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'ingesting-worker' })).toBe(true)
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(0)
    })

    it('hands a job enqueued leased to another worker once its lease ran out, and fences the first out', async () => {
      const { session, leased } = await receiveLeased('died')
      const next = await receive(session)

      const taken = (await lease('survivor', at(LEASE_MS + 1)))!
      expect(taken).toMatchObject({ jobId: leased.jobId, token: 'survivor', attempts: 0 })
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'died' })).toBe(false)
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'survivor' })).toBe(true)
      expect((await lease('after', at(LEASE_MS + 2)))?.messageId).toBe(next)
    })

    it("holds a session's later jobs back behind its first one enqueued leased", async () => {
      const { session, leased } = await receiveLeased('first')
      const next = await receive(session)

      expect(await lease('other')).toBeNull()
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'first' })).toBe(true)
      expect((await lease('second'))?.messageId).toBe(next)
    })

    it("enqueues behind a session's unfinished job unleased, as enqueue does, and tells listeners", async () => {
      const session = await createSession(storage, channel)
      const first = await receive(session)
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)
      try {
        const second = await storage.transaction(async (tx) => {
          const message = await insertMessage(tx, session)
          const leased = await tx.jobs.enqueueLeased(
            { companyId: session.companyId, sessionId: session.id, messageId: message.id, availableAt: at() },
            { now: at(), leaseMs: LEASE_MS, token: 'behind' },
          )
          expect(leased).toBeNull()
          return message.id
        })
        await vi.waitFor(() => expect(listener).toHaveBeenCalled())
        expect(await storage.jobs.pending({ sessionId: session.id })).toBe(2)
        const leased = (await lease('worker'))!
        expect(leased.messageId).toBe(first)
        expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'worker' })).toBe(true)
        expect((await lease('worker'))?.messageId).toBe(second)
      } finally {
        unsubscribe()
      }
    })

    it("leases to itself the job of a returning customer's session with no unfinished job", async () => {
      const session = await createSession(storage, channel)
      const earlier = (await lease('none yet')) ?? null
      expect(earlier).toBeNull()
      const { messageId, leased } = await storage.transaction(async (tx) => {
        const message = await insertMessage(tx, session)
        const leased = await tx.jobs.enqueueLeased(
          { companyId: session.companyId, sessionId: session.id, messageId: message.id, availableAt: at() },
          { now: at(), leaseMs: LEASE_MS, token: 'returning' },
        )
        return { messageId: message.id, leased }
      })
      expect(leased).toMatchObject({ sessionId: session.id, messageId, token: 'returning', attempts: 0 })
      expect(await lease('other')).toBeNull()
    })

    it('leases the job of only one of many transactions enqueuing leased for one session at once', async () => {
      const session = await createSession(storage, channel)
      const messages = await Promise.all(Array.from({ length: 8 }, () => insertMessage(storage, session)))
      const stored = await Promise.all(
        messages.map((message, index) =>
          storage.transaction((tx) =>
            tx.jobs.enqueueLeased(
              {
                companyId: session.companyId,
                sessionId: session.id,
                messageId: message.id,
                availableAt: at(),
              },
              { now: at(), leaseMs: LEASE_MS, token: `ingest-${index}` },
            ),
          ),
        ),
      )
      const leased = stored.filter((lease) => lease !== null)
      expect(leased).toHaveLength(1)
      // The others run one at a time behind it, each once.
      const ran = await runBehind(leased[0]!)
      expect([...ran].sort()).toEqual(messages.map((message) => message.id).sort())
    })

    it('leaves no job behind when the transaction that enqueued it leased rolls back', async () => {
      let sessionId = ''
      await expect(
        storage.transaction(async (tx) => {
          const session = await createSession(tx, channel)
          sessionId = session.id
          const message = await insertMessage(tx, session)
          await tx.jobs.enqueueLeased(
            { companyId: session.companyId, sessionId: session.id, messageId: message.id, availableAt: at() },
            { now: at(), leaseMs: LEASE_MS, token: 'rolled-back' },
          )
          throw expectedError()
        }),
      ).rejects.toThrow()
      expect(await storage.jobs.pending({ sessionId })).toBe(0)
      expect(await lease('later', at(LEASE_MS + 1))).toBeNull()
    })

    it('tells no listener of a job enqueued leased: nobody else may take it', async () => {
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)
      try {
        await receiveLeased('mine')
        await new Promise((resolve) => setTimeout(resolve, 20))
        expect(listener).not.toHaveBeenCalled()
      } finally {
        unsubscribe()
      }
    })

    it('enqueues several jobs at once in the order given, all or none', async () => {
      const first = await createSession(storage, channel)
      const second = await createSession(storage, channel)
      const stored = await storage.transaction(async (tx) =>
        tx.messages.insertMany([first, second, first].map((session) => newMessageInput(session))),
      )
      const job = (index: number) => ({
        companyId: channel.companyId,
        sessionId: stored[index]!.sessionId,
        messageId: stored[index]!.id,
        availableAt: at(),
      })
      await storage.transaction((tx) => tx.jobs.enqueueMany([job(0), job(1)]))
      // The second message of `first` already has no job; the batch repeats `second`'s: none is added.
      await expect(storage.jobs.enqueueMany([job(2), job(1)])).rejects.toThrow()
      await storage.jobs.enqueueMany([])

      const leased = [(await lease('worker-1'))!, (await lease('worker-2'))!]
      expect(leased.map((lease) => lease.messageId)).toEqual([stored[0]!.id, stored[1]!.id])
      expect(await lease('worker-3')).toBeNull()
      for (const { jobId, token } of leased) await storage.jobs.complete({ jobId, token })
      expect(await lease('worker-4')).toBeNull()
    })

    /** Stores one message for each session given, in one transaction, and the jobs of them. */
    const storeBatch = (sessions: readonly Session[]) =>
      storage.transaction((tx) => tx.messages.insertMany(sessions.map((session) => newMessageInput(session))))
    const leasable = (message: { id: string; sessionId: string }, token?: string) => ({
      companyId: channel.companyId,
      sessionId: message.sessionId,
      messageId: message.id,
      availableAt: at(),
      ...(token === undefined ? {} : { token }),
    })

    it("leases each batch job given a token that is its session's first, and enqueues the rest behind", async () => {
      const [first, second, third] = await Promise.all([1, 2, 3].map(() => createSession(storage, channel)))
      // `third` has a job queued already: its batch job waits behind it.
      const waiting = await receive(third!)
      const messages = await storeBatch([first!, second!, first!, third!, second!])
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)
      try {
        const leases = await storage.transaction((tx) =>
          tx.jobs.enqueueManyLeased(
            [
              leasable(messages[0]!, 'worker-a'),
              leasable(messages[1]!),
              leasable(messages[2]!, 'worker-c'),
              leasable(messages[3]!, 'worker-d'),
              leasable(messages[4]!, 'worker-e'),
            ],
            { now: at(), leaseMs: LEASE_MS },
          ),
        )
        expect(leases).toEqual([
          {
            jobId: expect.any(String),
            companyId: channel.companyId,
            sessionId: first!.id,
            messageId: messages[0]!.id,
            attempts: 0,
            token: 'worker-a',
          },
          null,
          null,
          null,
          null,
        ])
        // Jobs enqueued unleased are announced.
        await vi.waitFor(() => expect(listener).toHaveBeenCalled())
      } finally {
        unsubscribe()
      }
      // Free for any worker: second's first job, then third's earlier one; first's is held.
      const taken = [(await lease('worker-1'))!, (await lease('worker-2'))!]
      expect(taken.map((job) => job.messageId).sort()).toEqual([messages[1]!.id, waiting].sort())
      expect(await lease('worker-3')).toBeNull()
      expect(await storage.jobs.pending({ sessionId: first!.id })).toBe(2)
      expect(await storage.jobs.pending({ sessionId: second!.id })).toBe(2)
      expect(await storage.jobs.pending({ sessionId: third!.id })).toBe(2)
    })

    it('enqueues no job of a batch enqueued leased when one of its messages has a job already', async () => {
      const session = await createSession(storage, channel)
      const other = await createSession(storage, channel)
      const taken = await receive(session)
      const [fresh] = await storeBatch([other])
      await expect(
        storage.transaction((tx) =>
          tx.jobs.enqueueManyLeased(
            [leasable(fresh!, 'worker-a'), leasable({ id: taken, sessionId: session.id }, 'worker-b')],
            { now: at(), leaseMs: LEASE_MS },
          ),
        ),
      ).rejects.toThrow()
      expect(await storage.jobs.pending({ sessionId: other.id })).toBe(0)
      expect(
        await storage.transaction((tx) => tx.jobs.enqueueManyLeased([], { now: at(), leaseMs: LEASE_MS })),
      ).toEqual([])
    })

    it('leases the job of only one of many batches enqueuing leased for one session at once', async () => {
      const session = await createSession(storage, channel)
      const others = await Promise.all(Array.from({ length: 6 }, () => createSession(storage, channel)))
      const stored = await Promise.all(others.map((other) => storeBatch([other, session])))
      const leases = await Promise.all(
        stored.map((messages, index) =>
          storage.transaction((tx) =>
            tx.jobs.enqueueManyLeased(
              messages.map((message) => leasable(message, `ingest-${index}-${message.sessionId}`)),
              { now: at(), leaseMs: LEASE_MS },
            ),
          ),
        ),
      )
      // Every batch's job of a session of its own is leased; of the shared session's, only one.
      expect(leases.every((batch) => batch[0] !== null)).toBe(true)
      const shared = leases.flatMap((batch) => (batch[1] === null ? [] : [batch[1]!]))
      expect(shared).toHaveLength(1)
      const ran = await runBehind(shared[0]!)
      expect([...ran].sort()).toEqual(stored.map((messages) => messages[1]!.id).sort())
    })

    it('holds back the next job while the first one waits for its retry', async () => {
      const session = await createSession(storage, channel)
      const firstId = await receive(session)
      await receive(session)

      const first = (await lease('worker-1'))!
      expect(
        await storage.jobs.fail({
          jobId: first.jobId,
          token: first.token,
          retryAt: at(60_000),
          dead: false,
          error: 'boom',
        }),
      ).toBe(true)

      expect(await lease('worker-2', at(1000))).toBeNull()
      expect(await lease('worker-2', at(59_999))).toBeNull()
      const retried = await lease('worker-3', at(60_000))
      expect(retried).toMatchObject({
        jobId: first.jobId,
        messageId: firstId,
        attempts: 1,
        token: 'worker-3',
      })
    })

    it('does not lease a job before its time', async () => {
      const session = await createSession(storage, channel)
      await receive(session, at(5000))

      expect(await lease('early', at(4999))).toBeNull()
      expect(await lease('on-time', at(5000))).not.toBeNull()
    })

    it('leases jobs of different sessions in parallel, the oldest first', async () => {
      const first = await createSession(storage, channel)
      const second = await createSession(storage, channel)
      const third = await createSession(storage, channel)
      const secondMessage = await receive(second)
      const firstMessage = await receive(first)
      await receive(first)
      const thirdMessage = await receive(third)

      const leases = [(await lease('a'))!, (await lease('b'))!, (await lease('c'))!]
      expect(leases.map((leased) => leased.messageId)).toEqual([secondMessage, firstMessage, thirdMessage])
      expect(await lease('d')).toBeNull()
    })

    it("picks the oldest eligible job, whichever session's queue it heads", async () => {
      const first = await createSession(storage, channel)
      const second = await createSession(storage, channel)
      await receive(first)
      const older = await receive(second)
      await receive(first)

      const head = (await lease('a'))!
      await storage.jobs.complete({ jobId: head.jobId, token: 'a' })
      expect((await lease('b'))?.messageId).toBe(older)
    })

    it('hands an expired lease to a new worker and fences the old one out', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const next = await receive(session)

      const stale = (await lease('stale'))!
      expect(await lease('early', at(LEASE_MS - 1))).toBeNull()
      const fresh = (await lease('fresh', at(LEASE_MS + 1)))!
      expect(fresh).toMatchObject({ jobId: stale.jobId, token: 'fresh', attempts: 0 })

      const retryAt = at(LEASE_MS + 2)
      expect(
        await storage.jobs.renew({
          jobId: stale.jobId,
          token: 'stale',
          now: at(LEASE_MS + 2),
          leaseMs: LEASE_MS,
        }),
      ).toBe(false)
      expect(
        await storage.jobs.fail({ jobId: stale.jobId, token: 'stale', retryAt, dead: false, error: 'late' }),
      ).toBe(false)
      expect(await storage.jobs.complete({ jobId: stale.jobId, token: 'stale' })).toBe(false)
      expect(await lease('intruder', at(LEASE_MS + 2))).toBeNull()

      expect(await storage.jobs.complete({ jobId: fresh.jobId, token: 'fresh' })).toBe(true)
      expect((await lease('after', at(LEASE_MS + 3)))?.messageId).toBe(next)
    })

    it('renews a live lease for its holder only', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const leased = (await lease('holder'))!

      expect(
        await storage.jobs.renew({ jobId: leased.jobId, token: 'other', now: at(20_000), leaseMs: LEASE_MS }),
      ).toBe(false)
      expect(
        await storage.jobs.renew({
          jobId: leased.jobId,
          token: 'holder',
          now: at(20_000),
          leaseMs: LEASE_MS,
        }),
      ).toBe(true)
      expect(await lease('taker', at(LEASE_MS + 1))).toBeNull()
      expect(await lease('taker', at(20_000 + LEASE_MS - 1))).toBeNull()
      expect((await lease('taker', at(20_000 + LEASE_MS + 1)))?.jobId).toBe(leased.jobId)
    })

    it('frees a lease renewed for 0 ms at once, with no attempt counted, and still lets its holder complete', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const leased = (await lease('stopping'))!
      expect(
        await storage.jobs.renew({ jobId: leased.jobId, token: 'stopping', now: at(1_000), leaseMs: 0 }),
      ).toBe(true)
      // Given back: nobody has taken it yet, so the holder may still finish it.
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'stopping' })).toBe(true)

      await receive(session)
      const second = (await lease('stopping'))!
      await storage.jobs.renew({ jobId: second.jobId, token: 'stopping', now: at(1_000), leaseMs: 0 })
      const taken = (await lease('restarted', at(1_000)))!
      expect(taken).toMatchObject({ jobId: second.jobId, token: 'restarted', attempts: 0 })
      expect(await storage.jobs.complete({ jobId: second.jobId, token: 'stopping' })).toBe(false)
    })

    it('neither renews nor completes a finished job', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const leased = (await lease('holder'))!

      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'intruder' })).toBe(false)
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'holder' })).toBe(true)
      expect(await storage.jobs.complete({ jobId: leased.jobId, token: 'holder' })).toBe(false)
      expect(
        await storage.jobs.renew({ jobId: leased.jobId, token: 'holder', now: at(1), leaseMs: LEASE_MS }),
      ).toBe(false)
      expect(
        await storage.jobs.fail({
          jobId: leased.jobId,
          token: 'holder',
          retryAt: at(2),
          dead: false,
          error: 'late',
        }),
      ).toBe(false)
      expect(await lease('idle', at(CENTURY / 2))).toBeNull()
    })

    it('gives a failed job back at its retry time with one more attempt', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const first = (await lease('first'))!

      expect(
        await storage.jobs.fail({
          jobId: first.jobId,
          token: 'intruder',
          retryAt: at(1000),
          dead: false,
          error: 'no',
        }),
      ).toBe(false)
      expect(
        await storage.jobs.fail({
          jobId: first.jobId,
          token: 'first',
          retryAt: at(1000),
          dead: false,
          error: 'timeout',
        }),
      ).toBe(true)
      expect(await storage.jobs.complete({ jobId: first.jobId, token: 'first' })).toBe(false)
      expect(await lease('early', at(999))).toBeNull()

      const second = (await lease('second', at(1000)))!
      expect(second).toMatchObject({ jobId: first.jobId, attempts: 1 })
      await storage.jobs.fail({
        jobId: second.jobId,
        token: 'second',
        retryAt: at(2000),
        dead: false,
        error: 'timeout',
      })
      expect((await lease('third', at(2000)))?.attempts).toBe(2)
    })

    it('lets the next job run once a job is dead, and never runs the dead one again', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const next = await receive(session)
      const doomed = (await lease('worker'))!

      expect(
        await storage.jobs.fail({
          jobId: doomed.jobId,
          token: 'worker',
          retryAt: at(HOUR_MS),
          dead: true,
          error: 'gave up',
        }),
      ).toBe(true)
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)

      const following = (await lease('worker-2'))!
      expect(following.messageId).toBe(next)
      await storage.jobs.complete({ jobId: following.jobId, token: following.token })
      expect(await lease('idle', at(CENTURY / 2))).toBeNull()
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(0)
    })

    it('counts unfinished jobs, of one session or of all', async () => {
      const before = await storage.jobs.pending({})
      const first = await createSession(storage, channel)
      const second = await createSession(storage, channel)
      await receive(first)
      await receive(first)
      await receive(second)

      expect(await storage.jobs.pending({ sessionId: first.id })).toBe(2)
      expect(await storage.jobs.pending({ sessionId: second.id })).toBe(1)
      expect(await storage.jobs.pending({ sessionId: randomUUID() })).toBe(0)
      expect(await storage.jobs.pending({})).toBe(before + 3)

      const leased = (await lease('worker'))!
      expect(await storage.jobs.pending({ sessionId: first.id })).toBe(2)
      await storage.jobs.complete({ jobId: leased.jobId, token: 'worker' })
      expect(await storage.jobs.pending({ sessionId: first.id })).toBe(1)
      expect(await storage.jobs.pending({})).toBe(before + 2)
    })

    it('refuses a second job for the same message', async () => {
      const session = await createSession(storage, channel)
      const messageId = await receive(session)

      await expect(
        storage.transaction((tx) =>
          tx.jobs.enqueue({
            companyId: channel.companyId,
            sessionId: session.id,
            messageId,
            availableAt: at(),
          }),
        ),
      ).rejects.toThrow()
      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)
    })

    it('leaves no job behind when the enqueuing transaction rolls back', async () => {
      const session = await createSession(storage, channel)
      const failure = expectedError()

      await expect(
        storage.transaction(async (tx) => {
          const message = await insertMessage(tx, session)
          await tx.jobs.enqueue({
            companyId: channel.companyId,
            sessionId: session.id,
            messageId: message.id,
            availableAt: at(),
          })
          throw failure
        }),
      ).rejects.toBe(failure)

      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(0)
      expect(await lease('worker')).toBeNull()
    })

    it('keeps the lease when the transaction that completes the job rolls back', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const leased = (await lease('worker'))!
      const failure = expectedError()

      await expect(
        storage.transaction(async (tx) => {
          expect(await tx.jobs.complete({ jobId: leased.jobId, token: 'worker' })).toBe(true)
          throw failure
        }),
      ).rejects.toBe(failure)

      expect(await storage.jobs.pending({ sessionId: session.id })).toBe(1)
      expect(await lease('other')).toBeNull()
      expect(
        await storage.transaction((tx) => tx.jobs.complete({ jobId: leased.jobId, token: 'worker' })),
      ).toBe(true)
    })

    it('tells listeners once an enqueue commits, not before', async () => {
      const session = await createSession(storage, channel)
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)

      try {
        await storage.transaction(async (tx) => {
          const message = await insertMessage(tx, session)
          await tx.jobs.enqueue({
            companyId: channel.companyId,
            sessionId: session.id,
            messageId: message.id,
            availableAt: at(),
          })
          await nextTick()
          expect(listener).not.toHaveBeenCalled()
        })
        await vi.waitFor(() => expect(listener).toHaveBeenCalled())
      } finally {
        unsubscribe()
      }
    })

    it('does not tell listeners about an enqueue that rolled back', async () => {
      const session = await createSession(storage, channel)
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)

      try {
        await expect(
          storage.transaction(async (tx) => {
            const message = await insertMessage(tx, session)
            await tx.jobs.enqueue({
              companyId: channel.companyId,
              sessionId: session.id,
              messageId: message.id,
              availableAt: at(),
            })
            throw expectedError()
          }),
        ).rejects.toThrow()
        await new Promise((resolve) => setTimeout(resolve, 20))
        expect(listener).not.toHaveBeenCalled()
      } finally {
        unsubscribe()
      }
    })

    it("tells listeners when a completed job leaves its session's next job free to lease", async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const next = await receive(session)
      const first = (await lease('first'))!
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)

      try {
        expect(
          await storage.transaction((tx) => tx.jobs.complete({ jobId: first.jobId, token: 'first' })),
        ).toBe(true)
        // Workers that were idle hear of it; none asks for a job after each one it finishes.
        await vi.waitFor(() => expect(listener).toHaveBeenCalled())
        expect((await lease('second'))?.messageId).toBe(next)
      } finally {
        unsubscribe()
      }
    })

    /**
     * A session's job finishing in one transaction (`complete` as a turn's commit, or `fail` once
     * it is dead) while its next job is enqueued in another, the one or the other first: when both
     * have committed, the next job is leased to the enqueuing worker, or a listener is told of it
     * after the finish committed, so it does not wait for a worker's poll. A worker told while the
     * job before it is still queued leases nothing.
     *
     * Each transaction gives the other one `OTHER_TRANSACTION_MS` to get as far as it can before
     * it commits: a storage that makes the other wait (a lock, one transaction at a time) goes on
     * after that; one that lets it through has it done long before.
     */
    const OTHER_TRANSACTION_MS = 100
    const finishedWhileEnqueued = [
      { first: 'finish', finishing: 'complete', enqueuing: 'enqueueLeased' },
      { first: 'finish', finishing: 'complete', enqueuing: 'enqueue' },
      { first: 'enqueue', finishing: 'complete', enqueuing: 'enqueueLeased' },
      { first: 'finish', finishing: 'dead', enqueuing: 'enqueueLeased' },
      { first: 'enqueue', finishing: 'dead', enqueuing: 'enqueueLeased' },
    ] as const
    for (const { first, finishing, enqueuing } of finishedWhileEnqueued) {
      const ending = finishing === 'complete' ? 'completed' : 'made dead'
      const order = first === 'finish' ? `${ending} first` : `${enqueuing} first`
      it(`leaves no job waiting for the poll when it is enqueued (${enqueuing}) as the one before it is ${ending}, ${order}`, async () => {
        // Leased as it is enqueued, so no NOTIFY of this test's is on its way when listening starts.
        const { session, leased: before } = await receiveLeased('turn')
        let heard = 0
        let heardBeforeCommit = 0
        const wasHeard = deferred<void>()
        const unsubscribe = storage.jobs.onAvailable(() => {
          heard += 1
          wasHeard.resolve()
        })
        const sleep = () => new Promise<void>((resolve) => setTimeout(resolve, OTHER_TRANSACTION_MS))

        const finish = async (tx: Repositories): Promise<void> => {
          const done =
            finishing === 'complete'
              ? await tx.jobs.complete({ jobId: before.jobId, token: 'turn' })
              : await tx.jobs.fail({
                  jobId: before.jobId,
                  token: 'turn',
                  retryAt: at(HOUR_MS),
                  dead: true,
                  error: 'gave up',
                })
          expect(done).toBe(true)
        }
        const enqueue = async (tx: Repositories): Promise<Enqueued> => {
          const message = await insertMessage(tx, session)
          const job = {
            companyId: session.companyId,
            sessionId: session.id,
            messageId: message.id,
            availableAt: at(),
          }
          if (enqueuing === 'enqueue') {
            await tx.jobs.enqueue(job)
            return { messageId: message.id, leased: null }
          }
          return {
            messageId: message.id,
            leased: await tx.jobs.enqueueLeased(job, { now: at(), leaseMs: LEASE_MS, token: 'ingest' }),
          }
        }
        /** The enqueue committed and, unless it leased the job, a listener was told of it. */
        const toldOf = async (enqueued: Promise<Enqueued>): Promise<void> => {
          if ((await enqueued).leased === null) await wasHeard.promise
        }

        try {
          let enqueued: Promise<Enqueued>
          let finished: Promise<void>
          if (first === 'finish') {
            let started!: Promise<Enqueued>
            finished = storage.transaction(async (tx) => {
              await finish(tx)
              // Another transaction, on another connection; the storage may make it wait for this one.
              started = storage.transaction(enqueue)
              await Promise.race([toldOf(started), sleep()])
              heardBeforeCommit = heard
            })
            await finished
            enqueued = started
          } else {
            const tried = deferred<void>()
            const committed = deferred<Enqueued>()
            let started!: Promise<void>
            enqueued = storage.transaction(async (tx) => {
              const result = await enqueue(tx)
              // Another transaction, on another connection; the storage may make it wait for this one.
              started = storage.transaction(async (other) => {
                await finish(other).finally(tried.resolve)
                // As a slow turn would: it commits once the enqueue committed and told whom it told.
                await toldOf(committed.promise)
                heardBeforeCommit = heard
              })
              await Promise.race([tried.promise, sleep()])
              return result
            })
            enqueued.then(committed.resolve, committed.reject)
            await enqueued
            finished = started
          }
          const [{ messageId, leased }] = await Promise.all([enqueued, finished])

          if (leased !== null) {
            expect(leased).toMatchObject({ sessionId: session.id, messageId, token: 'ingest' })
            expect(await lease('other')).toBeNull()
          } else {
            await vi.waitFor(
              () => {
                if (heard === heardBeforeCommit) {
                  throw new Error(
                    'no listener was told of the next job after the one before it finished: it waits for the poll',
                  )
                }
              },
              { timeout: 1_000 },
            )
            expect((await lease('woken'))?.messageId).toBe(messageId)
          }
        } finally {
          unsubscribe()
        }
      })
    }

    it('tells listeners when a failed job is given back for a retry, until they unsubscribe', async () => {
      const session = await createSession(storage, channel)
      await receive(session)
      const listener = vi.fn()
      const unsubscribe = storage.jobs.onAvailable(listener)

      const first = (await lease('first'))!
      await storage.jobs.fail({
        jobId: first.jobId,
        token: 'first',
        retryAt: at(1000),
        dead: false,
        error: 'x',
      })
      await vi.waitFor(() => expect(listener).toHaveBeenCalled())

      unsubscribe()
      listener.mockClear()
      const second = (await lease('second', at(1000)))!
      await storage.jobs.fail({
        jobId: second.jobId,
        token: 'second',
        retryAt: at(2000),
        dead: false,
        error: 'x',
      })
      await receive(session)
      await new Promise((resolve) => setTimeout(resolve, 20))
      expect(listener).not.toHaveBeenCalled()
    })

    it('lets 50 concurrent workers run 20 sessions of 5 jobs: one lease per session, each job once, in order', async () => {
      const expected = new Map<string, string[]>()
      for (let index = 0; index < 20; index++) {
        const session = await createSession(storage, channel)
        const messageIds: string[] = []
        for (let job = 0; job < 5; job++) messageIds.push(await receive(session))
        expected.set(session.id, messageIds)
      }

      const processed = new Map<string, string[]>([...expected.keys()].map((sessionId) => [sessionId, []]))
      const holders = new Map<string, string>()
      const violations: string[] = []
      let done = 0
      let tokens = 0

      const worker = async (): Promise<void> => {
        for (let idle = 0; done < 100 && idle < 10_000; ) {
          tokens += 1
          const token = `token-${tokens}`
          const leased = await storage.jobs.lease({ now: at(), leaseMs: LEASE_MS, token })
          if (leased === null) {
            idle += 1
            await nextTick()
            continue
          }
          const holder = holders.get(leased.sessionId)
          if (holder !== undefined)
            violations.push(`${leased.sessionId} leased to ${token} while ${holder} held it`)
          holders.set(leased.sessionId, token)
          await nextTick()
          processed.get(leased.sessionId)?.push(leased.messageId)
          holders.delete(leased.sessionId)
          const completed = await storage.transaction((tx) =>
            tx.jobs.complete({ jobId: leased.jobId, token }),
          )
          if (!completed) violations.push(`${token} lost its lease`)
          done += 1
        }
      }
      await Promise.all(Array.from({ length: 50 }, worker))

      expect(violations).toEqual([])
      expect(done).toBe(100)
      expect(processed).toEqual(expected)
      for (const sessionId of expected.keys()) expect(await storage.jobs.pending({ sessionId })).toBe(0)
    })
  })
}
