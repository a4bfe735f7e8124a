import type { Writable } from 'node:stream'
import {
  ConfigError,
  describeOptionValue as describeValue,
  TransactionConflictError,
} from '@switchboard/core'
import pg from 'pg'
import { assertChannelName, type Db, type DbRow, type ListenOptions, type TransactionClient } from './db.js'
import { LeanQuery } from './lean-query.js'
import { createMutex } from './mutex.js'
import { refusalOf } from './refusals.js'
import { statementsUnderWay } from './statements-under-way.js'
import { storableParameters } from './storable-text.js'

export interface PgDbOptions extends pg.PoolConfig {
  /**
   * Told about errors nobody awaits: an idle pooled connection or the LISTEN connection that
   * broke, a notification handler that threw. By default they are dropped; the pool replaces the
   * connection and the LISTEN connection reconnects.
   */
  readonly onError?: (error: unknown) => void
}

const RECONNECT_FIRST_DELAY_MS = 250
/**
 * Statements with parameters are prepared once per connection under a name: the server then
 * parses and plans each only once, which is most of its work for the short statements the
 * repositories run. The repositories' SQL is a fixed set of texts; the cap keeps a caller that
 * builds texts on the fly from growing every connection's cache without end.
 */
const PREPARED_STATEMENTS_MAX = 1000
const RECONNECT_MAX_DELAY_MS = 10_000
const IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000

/** A `Db` on a PostgreSQL server: a `pg.Pool` for statements, one more connection for LISTEN. */
export function createPgDb(options: PgDbOptions): Db {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError(
      `createPgDb needs an options object (a pg PoolConfig such as { connectionString }), got ${describeValue(options)}`,
    )
  }
  const { onError = () => {}, ...poolConfig } = options
  // Pipelined connections send a statement without waiting for the answer to the one before:
  // BEGIN goes out with a transaction's first statement, and statements a caller starts together
  // (Promise.all on one transaction) share the round trip.
  // A transaction left idle (a process stalled mid-transaction, a network cut the server does not
  // see) is ended by the server after a minute, so its rows and session locks do not hold every
  // other process's work on those sessions until TCP gives up, hours later. Ours never wait
  // between statements that long; a caller may set another time, or 0 for none.
  const pool = new pg.Pool({
    pipeline: true,
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_TIMEOUT_MS,
    ...poolConfig,
  })
  // Without a listener, an idle connection that breaks would crash the process.
  pool.on('error', onError)
  const listener = createListener(poolConfig, onError)
  let closed = false

  const statementNames = createStatementNames()

  const run = async <Row extends object>(
    queryable: pg.Pool | pg.PoolClient,
    sql: string,
    params: readonly unknown[] = [],
  ): Promise<Row[]> => {
    try {
      if (params.length === 0) return (await queryable.query(sql)).rows as Row[]
      const query = new LeanQuery(sql, storableParameters(params), statementNames.nameOf(sql))
      return await new Promise<Row[]>((resolve, reject) => {
        // With a callback, the pool releases its connection once the query is answered.
        ;(queryable as unknown as Submitting<Row>).query(query, (error, result) => {
          if (error) reject(error)
          else resolve(result.rows)
        })
      })
    } catch (error) {
      throw refusalOf(error)
    }
  }

  return {
    kind: 'postgres',

    query: <Row extends object = DbRow>(sql: string, params?: readonly unknown[]) => {
      if (closed) return Promise.reject(new Error('The database is closed'))
      return run<Row>(pool, sql, params)
    },

    async transaction(fn) {
      if (closed) throw new Error('The database is closed')
      const connection = await pool.connect()
      // The pool stops listening to a connection it lends out. One that breaks mid-transaction (the
      // server restarts, an administrator cuts it) emits an error event besides failing the
      // statement; unheard, that event would crash the process.
      connection.on('error', onError)
      const release = (error?: Error | boolean) => {
        connection.off('error', onError)
        connection.release(error)
      }
      let open = true
      /** The first statement that failed: PostgreSQL then answers COMMIT with a rollback. */
      const failures: unknown[] = []
      const underWay = statementsUnderWay()
      /** COMMIT sent behind the last statements, before their answers (`commitBehindStatements`). */
      let committing: Promise<pg.QueryResult> | null = null
      const client: TransactionClient = {
        query<Row extends object = DbRow>(sql: string, params?: readonly unknown[]) {
          // The connection is back in the pool by now, serving somebody else's transaction, or
          // COMMIT has gone out already.
          if (!open)
            return Promise.reject(new Error('The transaction is already over; use the storage instead'))
          holdWritesThisTick(connection)
          return underWay.track(
            run<Row>(connection, sql, params).catch((error: unknown) => {
              failures.push(error)
              throw error
            }),
          )
        },
        commitBehindStatements() {
          if (!open) return
          open = false
          // In the write of the statements started this tick, which the server runs first: one of
          // them that fails makes it answer ROLLBACK, and nothing is committed.
          holdWritesThisTick(connection)
          committing = connection.query('COMMIT')
          // Read below, or given up with the transaction's failure.
          committing.catch(() => {})
        },
      }
      try {
        // Not awaited before `fn` runs: its first statement follows BEGIN in the same round trip.
        // BEGIN fails only on a broken connection, where the statements after it fail as well.
        holdWritesThisTick(connection)
        const begun = connection.query('BEGIN')
        const result = await Promise.all([begun, fn(client)]).then(([, value]) => value)
        await underWay.settled()
        // Refused from now on: one started later would go out before COMMIT with nobody waiting
        // for it, and if it failed, COMMIT would answer ROLLBACK.
        open = false
        // A statement failed and `fn` went on: the transaction is aborted, and its COMMIT would
        // answer ROLLBACK without an error, as if all went well.
        if (failures.length > 0) throw failures[0]
        const committed = await (committing ?? connection.query('COMMIT'))
        // The answer to the COMMIT of a transaction that a statement aborted.
        if (committed.command === 'ROLLBACK') throw new Error('The transaction was rolled back')
        release()
        return result
      } catch (error) {
        open = false
        try {
          // Its answer first: a ROLLBACK sent now finds no transaction left, and only warns.
          if (committing !== null) await (committing as Promise<unknown>).catch(() => {})
          await connection.query('ROLLBACK')
          release()
        } catch (rollbackError) {
          // A connection that cannot roll back is broken: drop it instead of pooling it.
          release(rollbackError instanceof Error ? rollbackError : true)
        }
        // The first statement that failed is the cause: later ones only say the transaction aborted.
        // An error of the function's own (not a statement's) is its reason, as on every storage.
        const cause = failures.length > 0 && failures.includes(error) ? failures[0] : error
        throw asTransactionConflict(cause)
      }
    },

    listen: (channel, handler, options) => {
      if (closed) return Promise.reject(new Error('The database is closed'))
      return listener.listen(channel, handler, options)
    },

    async notify(channel, payload) {
      assertChannelName(channel)
      await run(pool, 'SELECT pg_notify($1, $2)', [channel, payload])
    },

    async close() {
      if (closed) return
      closed = true
      await listener.close()
      await pool.end()
    },
  }
}

interface Subscription {
  readonly handler: (payload: string) => void
  readonly onReconnect?: (() => void) | undefined
}

interface Listener {
  listen(
    channel: string,
    handler: (payload: string) => void,
    options?: ListenOptions,
  ): Promise<() => Promise<void>>
  close(): Promise<void>
}

/**
 * One connection outside the pool that holds every LISTEN of this `Db`; pooled connections come
 * and go, so they cannot. When it breaks it reconnects with backoff and listens again;
 * notifications sent meanwhile are lost, which is why job workers poll as well, and why the
 * subscriptions that were waiting for it are told (`onReconnect`) once it listens again.
 */
function createListener(config: pg.ClientConfig, onError: (error: unknown) => void): Listener {
  const channels = new Map<string, Set<Subscription>>()
  const mutex = createMutex()
  let client: pg.Client | null = null
  let closed = false
  let reconnectTimer: ReturnType<typeof setTimeout> | null = null
  let reconnectDelay = RECONNECT_FIRST_DELAY_MS

  const deliver = (channel: string, payload: string): void => {
    for (const subscription of [...(channels.get(channel) ?? [])]) {
      try {
        subscription.handler(payload)
      } catch (error) {
        onError(error)
      }
    }
  }

  /** The connection listens again: every subscription but `fresh` may have missed notifications. */
  const reconnected = (fresh?: Subscription): void => {
    for (const subscriptions of [...channels.values()]) {
      for (const subscription of [...subscriptions]) {
        if (subscription === fresh || subscription.onReconnect === undefined) continue
        try {
          subscription.onReconnect()
        } catch (error) {
          onError(error)
        }
      }
    }
  }

  const lost = (which: pg.Client): void => {
    if (client !== which) return
    client = null
    which.end().catch(() => {})
    scheduleReconnect()
  }

  const connect = async (): Promise<pg.Client> => {
    const next = new pg.Client(config)
    next.on('notification', (message) => deliver(message.channel, message.payload ?? ''))
    next.on('error', (error) => {
      onError(error)
      lost(next)
    })
    next.on('end', () => lost(next))
    try {
      await next.connect()
      for (const channel of channels.keys()) await next.query(`LISTEN ${channel}`)
    } catch (error) {
      next.end().catch(() => {})
      throw error
    }
    return next
  }

  const scheduleReconnect = (): void => {
    if (closed || reconnectTimer !== null || channels.size === 0) return
    reconnectTimer = setTimeout(() => {
      reconnectTimer = null
      mutex
        .run(async () => {
          if (closed || client !== null || channels.size === 0) return false
          client = await connect()
          reconnectDelay = RECONNECT_FIRST_DELAY_MS
          return true
        })
        .then((listening) => {
          if (listening) reconnected()
        })
        .catch((error: unknown) => {
          onError(error)
          reconnectDelay = Math.min(reconnectDelay * 2, RECONNECT_MAX_DELAY_MS)
          scheduleReconnect()
        })
    }, reconnectDelay)
    // Waiting to reconnect is no reason to keep the process alive.
    reconnectTimer.unref?.()
  }

  const unlisten = (channel: string, subscription: Subscription): Promise<void> =>
    mutex.run(async () => {
      const subscriptions = channels.get(channel)
      if (subscriptions === undefined || !subscriptions.delete(subscription)) return
      if (subscriptions.size > 0) return
      channels.delete(channel)
      if (client !== null && !closed) {
        await client.query(`UNLISTEN ${channel}`).catch(onError)
      }
    })

  return {
    async listen(channel, handler, options) {
      assertChannelName(channel)
      const subscription: Subscription = { handler, onReconnect: options?.onReconnect }
      let waited = false
      const stop = await mutex.run(async () => {
        if (closed) throw new Error('The database is closed')
        const existing = channels.get(channel)
        const subscriptions = existing ?? new Set<Subscription>()
        subscriptions.add(subscription)
        if (existing === undefined) channels.set(channel, subscriptions)
        try {
          if (client === null) {
            // Others waiting for the connection that broke get it back with this one.
            waited = [...channels.values()].some((others) =>
              [...others].some((other) => other !== subscription),
            )
            // A new connection listens to every channel in the map, this one included.
            client = await connect()
            reconnectDelay = RECONNECT_FIRST_DELAY_MS
          } else if (existing === undefined) {
            await client.query(`LISTEN ${channel}`)
          }
        } catch (error) {
          subscriptions.delete(subscription)
          if (subscriptions.size === 0) channels.delete(channel)
          // Channels listened to before still want their connection back.
          scheduleReconnect()
          throw error
        }
        return () => unlisten(channel, subscription)
      })
      if (waited) reconnected(subscription)
      return stop
    },

    close: () =>
      mutex.run(async () => {
        closed = true
        if (reconnectTimer !== null) clearTimeout(reconnectTimer)
        channels.clear()
        const current = client
        client = null
        await current?.end().catch(() => {})
      }),
  }
}

/**
 * Lets the statements started on `connection` until the current tick ends leave in one socket
 * write: pg writes each statement on its own, and a write costs more than the statement's own
 * work in this process (BEGIN with a transaction's first reads, or statements started together,
 * were two to three writes). Nothing waits longer: the writes go before the event loop moves on.
 */
function holdWritesThisTick(connection: pg.PoolClient): void {
  const stream = (connection as unknown as { connection?: { stream?: Partial<Writable> } }).connection?.stream
  if (stream?.cork === undefined || stream.uncork === undefined || held.has(stream)) return
  held.add(stream)
  stream.cork()
  process.nextTick(() => {
    held.delete(stream)
    stream.uncork?.()
  })
}

const held = new WeakSet<object>()

/** `query` of a pg pool or client given a submittable query and a callback. */
interface Submitting<Row> {
  query(query: LeanQuery, callback: (error: Error | undefined, result: { rows: Row[] }) => void): void
}

/** Names for prepared statements, one per distinct SQL text, until the cap is reached. */
function createStatementNames(): { nameOf(sql: string): string | undefined } {
  const names = new Map<string, string>()
  return {
    nameOf(sql) {
      const known = names.get(sql)
      if (known !== undefined || names.size >= PREPARED_STATEMENTS_MAX) return known
      const name = `switchboard_${names.size + 1}`
      names.set(sql, name)
      return name
    },
  }
}

/** PostgreSQL's codes for a transaction given up because of concurrent ones: run again, it may pass. */
const CONFLICT_CODES: ReadonlySet<unknown> = new Set(['40P01', '40001'])

/** A deadlock or a serialization failure as core's `TransactionConflictError`, the cause kept. */
function asTransactionConflict(error: unknown): unknown {
  if (
    typeof error !== 'object' ||
    error === null ||
    !CONFLICT_CODES.has((error as { code?: unknown }).code)
  ) {
    return error
  }
  return new TransactionConflictError((error as Error).message, { cause: error })
}
