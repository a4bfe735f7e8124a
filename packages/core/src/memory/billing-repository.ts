import { isoTimestamp } from '../domain/iso-timestamp.js'
import type { BillingRepository, UsageRecord } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isTimePosition, takePage } from './paging.js'
import { storedText } from './snapshot.js'
import type { Statement } from './undo-log.js'

interface StoredUsage {
  readonly record: UsageRecord
  readonly atMs: number
  /** Breaks ties between records of the same instant: the later recorded lists first. */
  readonly order: number
}

export interface BillingTable {
  /** Balances in nano-dollars: integers add up exactly, as the NUMERIC column of a database does. */
  readonly balances: Map<number, number>
  /** Each company's usage in the order it was recorded. */
  readonly usageByCompany: Map<number, StoredUsage[]>
  readonly usageIds: Map<string, number>
  /** Like a database sequence, not taken back by a rollback. */
  lastOrder: number
}

export function createBillingTable(): BillingTable {
  return { balances: new Map(), usageByCompany: new Map(), usageIds: new Map(), lastOrder: 0 }
}

const NANOS_PER_DOLLAR = 1_000_000_000

function toNanos(amountUsd: number): number {
  if (!Number.isFinite(amountUsd)) throw new RangeError(`An amount must be a finite number, got ${amountUsd}`)
  return Math.round(amountUsd * NANOS_PER_DOLLAR)
}

export function createBillingRepository(options: {
  billing: BillingTable
  statement: Statement
}): BillingRepository {
  const { billing, statement } = options

  const balanceOf = (companyId: number): number => billing.balances.get(companyId) ?? 0

  return {
    getBalance: ({ companyId }) => statement(() => balanceOf(companyId) / NANOS_PER_DOLLAR),

    adjust: ({ companyId, amountUsd }) =>
      statement((log) => {
        log.set(billing.balances, companyId, balanceOf(companyId) + toNanos(amountUsd))
      }),

    recordUsage: (input) =>
      statement((log) => {
        if (billing.usageIds.has(input.id)) throw new Error(`Usage record ${input.id} already exists`)
        const costNanos = toNanos(input.costUsd)
        billing.lastOrder += 1
        // Strings and numbers only: nothing to copy, only to freeze.
        const record = Object.freeze<UsageRecord>({
          id: input.id,
          at: isoTimestamp(input.at),
          model: storedText(input.model),
          inputTokens: input.inputTokens,
          outputTokens: input.outputTokens,
          costUsd: costNanos / NANOS_PER_DOLLAR,
          sessionId: input.sessionId,
        })
        const stored: StoredUsage = { record, atMs: input.at.getTime(), order: billing.lastOrder }
        log.insert(billing.usageIds, record.id, input.companyId)
        const records = billing.usageByCompany.get(input.companyId)
        if (records === undefined) {
          log.insert(billing.usageByCompany, input.companyId, [stored])
        } else {
          records.push(stored)
          log.record(() => records.pop())
        }
        log.set(billing.balances, input.companyId, balanceOf(input.companyId) - costNanos)
        return record
      }),

    listUsage: ({ companyId, limit, cursor }) =>
      statement(() => {
        let isAfterCursor = (_stored: StoredUsage): boolean => true
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isTimePosition(position)) return emptyPage<UsageRecord>()
          const [atMs, order] = position as [number, number]
          isAfterCursor = (stored) => stored.atMs < atMs || (stored.atMs === atMs && stored.order < order)
        }
        const remaining = (billing.usageByCompany.get(companyId) ?? [])
          .filter(isAfterCursor)
          .sort((left, right) => right.atMs - left.atMs || right.order - left.order)
        const page = takePage(remaining, limit, (stored) => encodeCursor([stored.atMs, stored.order]))
        return { items: page.items.map((stored) => stored.record), nextCursor: page.nextCursor }
      }),
  }
}
