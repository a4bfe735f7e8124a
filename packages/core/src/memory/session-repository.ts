import { timeOfIsoTimestamp } from '../domain/iso-timestamp.js'
import type { Session } from '../domain/session.js'
import type { SessionRepository } from '../ports/storage.js'
import { decodeCursor, emptyPage, encodeCursor, isTimePosition, takePage } from './paging.js'
import { snapshotSession } from './snapshot.js'
import type { Statement, UndoLog } from './undo-log.js'

interface StoredSession {
  readonly session: Session
  /** Breaks ties between sessions created in the same millisecond: the later one lists first. */
  readonly order: number
  readonly createdAtMs: number
}

export interface SessionTable {
  readonly rows: Map<string, StoredSession>
  /**
   * The open (not closed) session of each customer, by integration, then by client id: maps of
   * maps rather than one keyed by a string made of both ids, which every look-up had to build,
   * flatten and hash anew (a new customer's message looks its customer up twice).
   */
  readonly openByIntegration: Map<string, Map<string, string>>
  lastOrder: number
}

export function createSessionTable(): SessionTable {
  return { rows: new Map(), openByIntegration: new Map(), lastOrder: 0 }
}

function isOpen(session: Session): boolean {
  return session.state !== 'closed'
}

export function createSessionRepository(options: {
  sessions: SessionTable
  statement: Statement
}): SessionRepository {
  const { sessions, statement } = options

  const openSessionId = (integrationId: string, clientId: string): string | undefined =>
    sessions.openByIntegration.get(integrationId)?.get(clientId)

  /** Records `session` as its customer's open one. */
  const setOpen = (log: UndoLog, session: Session): void => {
    let customers = sessions.openByIntegration.get(session.integrationId)
    if (customers === undefined) {
      customers = new Map()
      log.insert(sessions.openByIntegration, session.integrationId, customers)
    }
    log.set(customers, session.customer.clientId, session.id)
  }

  /** Throws when another session of the session's customer is open. */
  const assertNoOtherOpen = (session: Session): void => {
    const openId = openSessionId(session.integrationId, session.customer.clientId)
    if (openId !== undefined && openId !== session.id) {
      throw new Error(
        `Customer ${session.customer.clientId} already has open session ${openId} on integration ${session.integrationId}`,
      )
    }
  }

  return {
    create: (input) =>
      statement((log) => {
        if (sessions.rows.has(input.id)) throw new Error(`Session ${input.id} already exists`)
        const session = snapshotSession(input, 1)
        if (isOpen(session)) assertNoOtherOpen(session)
        sessions.lastOrder += 1
        log.insert(sessions.rows, session.id, {
          session,
          order: sessions.lastOrder,
          createdAtMs: timeOfIsoTimestamp(session.createdAt),
        })
        if (isOpen(session)) setOpen(log, session)
        return session
      }),

    // `lock` needs nothing here: one transaction runs at a time.
    get: ({ id, companyId }) =>
      statement(() => {
        const stored = sessions.rows.get(id)
        if (stored === undefined) return null
        return companyId === undefined || stored.session.companyId === companyId ? stored.session : null
      }),

    findOpen: ({ integrationId, clientId }) =>
      statement(() => {
        const id = openSessionId(integrationId, clientId)
        return id === undefined ? null : (sessions.rows.get(id)?.session ?? null)
      }),

    findOpenMany: ({ integrationId, clientIds }) =>
      statement(() => {
        const found: Session[] = []
        for (const clientId of new Set(clientIds)) {
          const id = openSessionId(integrationId, clientId)
          const stored = id === undefined ? undefined : sessions.rows.get(id)
          if (stored !== undefined) found.push(stored.session)
        }
        return found
      }),

    save: (input) =>
      statement((log) => {
        const stored = sessions.rows.get(input.id)
        if (stored === undefined || stored.session.version !== input.version) return null
        const previous = stored.session
        const session = snapshotSession(input, input.version + 1, previous)
        // Most saves keep the session open for the same customer: its entry is already right.
        const sameCustomer =
          isOpen(session) === isOpen(previous) &&
          session.integrationId === previous.integrationId &&
          session.customer.clientId === previous.customer.clientId
        if (!sameCustomer) {
          if (isOpen(session)) assertNoOtherOpen(session)
          if (isOpen(previous)) {
            const customers = sessions.openByIntegration.get(previous.integrationId)
            if (customers !== undefined) log.delete(customers, previous.customer.clientId)
          }
          if (isOpen(session)) setOpen(log, session)
        }
        const row: StoredSession = {
          session,
          order: stored.order,
          createdAtMs:
            session.createdAt === previous.createdAt
              ? stored.createdAtMs
              : timeOfIsoTimestamp(session.createdAt),
        }
        log.replace(sessions.rows, session.id, row, stored)
        return session
      }),

    list: ({ companyId, state, integrationId, limit, cursor }) =>
      statement(() => {
        let isAfterCursor = (_stored: StoredSession): boolean => true
        if (cursor !== undefined) {
          const position = decodeCursor(cursor)
          if (!isTimePosition(position)) return emptyPage<Session>()
          const [createdAtMs, order] = position as [number, number]
          isAfterCursor = (stored) =>
            stored.createdAtMs < createdAtMs || (stored.createdAtMs === createdAtMs && stored.order < order)
        }
        const remaining = [...sessions.rows.values()]
          .filter(
            (stored) =>
              stored.session.companyId === companyId &&
              (state === undefined || stored.session.state === state) &&
              (integrationId === undefined || stored.session.integrationId === integrationId) &&
              isAfterCursor(stored),
          )
          .sort((left, right) => right.createdAtMs - left.createdAtMs || right.order - left.order)
        const page = takePage(remaining, limit, (stored) => encodeCursor([stored.createdAtMs, stored.order]))
        return { items: page.items.map((stored) => stored.session), nextCursor: page.nextCursor }
      }),
  }
}
