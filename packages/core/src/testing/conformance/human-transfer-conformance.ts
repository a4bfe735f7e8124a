import { randomUUID } from 'node:crypto'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Message, Session } from '../../domain/session.js'
import type { HumanTransferRepository, PendingHumanTransfer, Storage } from '../../ports/storage.js'
import {
  at,
  type Channel,
  cleanUp,
  companyIdSource,
  createChannel,
  createSession,
  expectedError,
  insertMessage,
  type StorageConformanceOptions,
} from './storage-fixtures.js'

const HOUR = 3_600_000
const CENTURY = 100 * 365 * 24 * HOUR

type NewTransfer = Parameters<HumanTransferRepository['add']>[0]

/** The pending transfers to a human: kept with the pause, claimed with leases, behind their announcement. */
export function runHumanTransferConformance(
  name: string,
  createStorage: () => Promise<Storage> | Storage,
  options?: StorageConformanceOptions,
): void {
  const newCompanyId = companyIdSource(options)

  describe(`${name}: human transfer storage conformance`, () => {
    let storage: Storage
    let channel: Channel
    let session: Session

    beforeEach(async () => {
      storage = await createStorage()
      channel = await createChannel(storage, await newCompanyId(storage))
      session = await createSession(storage, channel, { state: 'paused' })
    })

    afterEach(async () => {
      await cleanUp(storage, options)
    })

    const newTransfer = (overrides: Partial<NewTransfer> = {}): NewTransfer => ({
      id: randomUUID(),
      sessionId: session.id,
      companyId: session.companyId,
      integrationId: session.integrationId,
      agentId: channel.agent.id,
      systemMessage: true,
      pauses: 1,
      after: [],
      leaseToken: 'pauser',
      leasedUntil: at(30_000),
      ...overrides,
    })

    /** What a claim answers for `transfer`, claimed by `leaseToken`. */
    const claimed = (transfer: NewTransfer, leaseToken: string): PendingHumanTransfer => {
      const { after: _after, leasedUntil: _leasedUntil, ...rest } = transfer
      return { ...rest, leaseToken }
    }

    /** `id` claimed for 30 s by `leaseToken` at `now`. */
    const claim = (id: string, leaseToken: string, now: Date) =>
      storage.humanTransfers.claim({ id, now, leaseMs: 30_000, leaseToken })

    /** Claims whatever an earlier test or run left due, so that only this test's transfers are. */
    const drainDue = async (now: Date): Promise<void> => {
      for (;;) {
        const left = await storage.humanTransfers.claimDue({
          now,
          limit: 100,
          leaseMs: CENTURY,
          leaseToken: randomUUID(),
        })
        if (left.length < 100) return
      }
    }

    const addReply = async (): Promise<Message> => {
      const message = await insertMessage(storage, session, { role: 'system', delivery: 'pending' })
      await storage.outbox.add({
        messageId: message.id,
        sessionId: session.id,
        companyId: session.companyId,
        integrationId: session.integrationId,
        availableAt: at(),
      })
      return message
    }

    it('is held by the process that added it until that lease runs out, then claimed by a sweep', async () => {
      await drainDue(at(HOUR))
      const transfer = newTransfer({ operatorId: 12, groupId: 7, systemMessage: false })
      await storage.humanTransfers.add(transfer)

      expect(
        await storage.humanTransfers.claimDue({
          now: at(29_999),
          limit: 10,
          leaseMs: 30_000,
          leaseToken: 'sweeper',
        }),
      ).toEqual([])
      expect(await claim(transfer.id, 'other', at(1000))).toBeNull()
      // Its holder claims it again, for the call: a lease from now.
      expect(await claim(transfer.id, 'pauser', at(1000))).toEqual(claimed(transfer, 'pauser'))
      expect(
        await storage.humanTransfers.claimDue({
          now: at(30_999),
          limit: 10,
          leaseMs: 30_000,
          leaseToken: 'sweeper',
        }),
      ).toEqual([])

      const swept = await storage.humanTransfers.claimDue({
        now: at(31_000),
        limit: 10,
        leaseMs: 30_000,
        leaseToken: 'sweeper',
      })
      expect(swept).toEqual([claimed(transfer, 'sweeper')])
      // The holder whose lease ran out can neither claim it back nor remove it.
      expect(await claim(transfer.id, 'pauser', at(32_000))).toBeNull()
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'pauser' })).toBe(false)
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'sweeper' })).toBe(true)
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'sweeper' })).toBe(false)
      expect(await claim(transfer.id, 'pauser', at(HOUR))).toBeNull()
    })

    it('answers a transfer without operator or group with neither key', async () => {
      const transfer = newTransfer()
      await storage.humanTransfers.add(transfer)
      const found = await claim(transfer.id, 'pauser', at())
      expect(found).toEqual(claimed(transfer, 'pauser'))
      expect(found !== null && ('operatorId' in found || 'groupId' in found)).toBe(false)
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'pauser' })).toBe(true)
    })

    it('waits while a message it follows is in the outbox, however long its lease ran out', async () => {
      await drainDue(at(HOUR))
      const announcement = await addReply()
      const earlier = await insertMessage(storage, session, { role: 'agent', delivery: 'sent' })
      // One message in the outbox, one that left it before.
      const transfer = newTransfer({ after: [earlier.id, announcement.id], leasedUntil: at() })
      await storage.humanTransfers.add(transfer)

      expect(await claim(transfer.id, 'pauser', at(HOUR))).toBeNull()
      expect(
        await storage.humanTransfers.claimDue({
          now: at(HOUR),
          limit: 10,
          leaseMs: 30_000,
          leaseToken: 'sweeper',
        }),
      ).toEqual([])

      await storage.outbox.claim({
        messageId: announcement.id,
        now: at(),
        leaseMs: 30_000,
        leaseToken: 'sender',
      })
      expect(
        await storage.outbox.remove({ messageId: announcement.id, leaseToken: 'sender', delivery: 'sent' }),
      ).toBe(true)
      expect(
        await storage.humanTransfers.claimDue({
          now: at(HOUR),
          limit: 10,
          leaseMs: 30_000,
          leaseToken: 'sweeper',
        }),
      ).toEqual([claimed(transfer, 'sweeper')])
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'sweeper' })).toBe(true)
    })

    it('claims the earliest added first, at most the limit, each once', async () => {
      await drainDue(at(HOUR))
      const transfers = [newTransfer(), newTransfer(), newTransfer()]
      for (const transfer of transfers) await storage.humanTransfers.add({ ...transfer, leasedUntil: at() })

      const first = await storage.humanTransfers.claimDue({
        now: at(1),
        limit: 2,
        leaseMs: 30_000,
        leaseToken: 'first',
      })
      const second = await storage.humanTransfers.claimDue({
        now: at(2),
        limit: 2,
        leaseMs: 30_000,
        leaseToken: 'second',
      })
      expect(first.map((transfer) => transfer.id)).toEqual([transfers[0]!.id, transfers[1]!.id])
      expect(second.map((transfer) => transfer.id)).toEqual([transfers[2]!.id])
      expect(
        await storage.humanTransfers.claimDue({ now: at(3), limit: 0, leaseMs: 30_000, leaseToken: 'none' }),
      ).toEqual([])
      for (const transfer of first) {
        expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'first' })).toBe(true)
      }
      expect(await storage.humanTransfers.remove({ id: transfers[2]!.id, leaseToken: 'second' })).toBe(true)
    })

    it('adds and removes with its transaction: nothing of one rolled back stays', async () => {
      const transfer = newTransfer()
      await expect(
        storage.transaction(async (tx) => {
          await tx.humanTransfers.add(transfer)
          throw expectedError()
        }),
      ).rejects.toThrow('rolled back on purpose')
      expect(await claim(transfer.id, 'pauser', at(HOUR))).toBeNull()

      await storage.transaction((tx) => tx.humanTransfers.add(transfer))
      await expect(
        storage.transaction(async (tx) => {
          expect(await tx.humanTransfers.remove({ id: transfer.id, leaseToken: 'pauser' })).toBe(true)
          throw expectedError()
        }),
      ).rejects.toThrow('rolled back on purpose')
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'pauser' })).toBe(true)
    })

    it('refuses a second transfer with the same id, and finds none for an id that is not a UUID', async () => {
      const transfer = newTransfer()
      await storage.humanTransfers.add(transfer)
      await expect(storage.humanTransfers.add(transfer)).rejects.toThrow()
      expect(await claim('not-a-uuid', 'pauser', at())).toBeNull()
      expect(await storage.humanTransfers.remove({ id: 'not-a-uuid', leaseToken: 'pauser' })).toBe(false)
      expect(await storage.humanTransfers.remove({ id: transfer.id, leaseToken: 'pauser' })).toBe(true)
    })
  })
}
