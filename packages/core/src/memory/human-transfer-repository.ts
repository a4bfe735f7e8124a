import type { HumanTransferRepository, PendingHumanTransfer } from '../ports/storage.js'
import type { OutboxTable } from './outbox-repository.js'
import type { Statement, UndoLog } from './undo-log.js'

interface HumanTransferRecord {
  readonly transfer: PendingHumanTransfer
  readonly after: readonly string[]
  readonly leasedUntil: number
  /** Insertion order: `claimDue` takes the earliest added first. */
  readonly order: number
}

export interface HumanTransferTable {
  readonly rows: Map<string, HumanTransferRecord>
  lastOrder: number
}

export function createHumanTransferTable(): HumanTransferTable {
  return { rows: new Map(), lastOrder: 0 }
}

export function createHumanTransferRepository(options: {
  transfers: HumanTransferTable
  /** The outbox the messages a transfer follows leave. */
  outbox: OutboxTable
  statement: Statement
}): HumanTransferRepository {
  const { transfers, outbox, statement } = options

  const isClaimable = (record: HumanTransferRecord, now: number, leaseToken: string | null): boolean =>
    (record.leasedUntil <= now || record.transfer.leaseToken === leaseToken) &&
    !record.after.some((messageId) => outbox.rows.has(messageId))

  const lease = (
    log: UndoLog,
    record: HumanTransferRecord,
    claim: { now: Date; leaseMs: number; leaseToken: string },
  ): PendingHumanTransfer => {
    const transfer = Object.freeze({ ...record.transfer, leaseToken: claim.leaseToken })
    log.set(transfers.rows, transfer.id, {
      ...record,
      transfer,
      leasedUntil: claim.now.getTime() + claim.leaseMs,
    })
    return transfer
  }

  return {
    add: ({ after, leasedUntil, ...input }) =>
      statement((log) => {
        if (transfers.rows.has(input.id)) throw new Error(`Human transfer ${input.id} exists already`)
        transfers.lastOrder += 1
        const transfer: PendingHumanTransfer = Object.freeze({
          id: input.id,
          sessionId: input.sessionId,
          companyId: input.companyId,
          integrationId: input.integrationId,
          agentId: input.agentId,
          ...(input.operatorId === undefined ? {} : { operatorId: input.operatorId }),
          ...(input.groupId === undefined ? {} : { groupId: input.groupId }),
          systemMessage: input.systemMessage,
          pauses: input.pauses,
          leaseToken: input.leaseToken,
        })
        log.set(transfers.rows, input.id, {
          transfer,
          after: Object.freeze([...after]),
          leasedUntil: leasedUntil.getTime(),
          order: transfers.lastOrder,
        })
      }),

    claim: ({ id, now, leaseMs, leaseToken }) =>
      statement((log) => {
        const record = transfers.rows.get(id)
        if (record === undefined || !isClaimable(record, now.getTime(), leaseToken)) return null
        return lease(log, record, { now, leaseMs, leaseToken })
      }),

    claimDue: ({ now, limit, leaseMs, leaseToken }) =>
      statement((log) =>
        [...transfers.rows.values()]
          .filter((record) => isClaimable(record, now.getTime(), null))
          .sort((left, right) => left.order - right.order)
          .slice(0, Math.max(Math.floor(limit), 0))
          .map((record) => lease(log, record, { now, leaseMs, leaseToken })),
      ),

    remove: ({ id, leaseToken }) =>
      statement((log) => {
        const record = transfers.rows.get(id)
        if (record === undefined || record.transfer.leaseToken !== leaseToken) return false
        log.delete(transfers.rows, id)
        return true
      }),
  }
}
