import { mkdir } from 'node:fs/promises'
import { PGlite } from '@electric-sql/pglite'
import { assertChannelName, type Db, type DbClient, type DbRow } from './db.js'
import { storableParameters } from './storable-text.js'

export interface PgliteDbOptions {
  /** A folder for the database files (created on first open), or `memory` to keep nothing. */
  readonly dataDir: string
  /** Told about a notification handler that threw; by default such errors are dropped. */
  readonly onError?: (error: unknown) => void
}

/**
 * A `Db` on embedded PGlite: real PostgreSQL compiled to WebAssembly, in this process, on one
 * connection. PGlite runs one transaction at a time and makes every statement outside it wait
 * (its own transaction mutex), so no reader ever sees a transaction half done. The flip side, as
 * with the memory storage: inside `transaction(fn)`, use the client `fn` gets; a statement sent to
 * the `Db` itself there waits for the transaction that waits for it.
 */
export async function createPgliteDb(options: PgliteDbOptions): Promise<Db> {
  const { dataDir, onError = () => {} } = options
  // PGlite creates the last folder of the path only.
  if (dataDir !== 'memory') await mkdir(dataDir, { recursive: true })
  const pglite = await PGlite.create(dataDir === 'memory' ? {} : { dataDir })
  let closed = false

  const assertOpen = (): void => {
    if (closed) throw new Error('The database is closed')
  }

  return {
    kind: 'pglite',

    async query<Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) {
      assertOpen()
      const result = await pglite.query<Row>(sql, storableParameters(params))
      return result.rows
    },

    async transaction(fn) {
      assertOpen()
      return pglite.transaction(async (transaction) => {
        /** The first statement that failed: the transaction is aborted, whatever `fn` does next. */
        const failures: unknown[] = []
        const client: DbClient = {
          async query<Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) {
            if (transaction.closed)
              throw new Error('The transaction is already over; use the storage instead')
            try {
              const result = await transaction.query<Row>(sql, storableParameters(params))
              return result.rows
            } catch (error) {
              failures.push(error)
              throw error
            }
          },
        }
        const result = await fn(client)
        // Thrown here, PGlite rolls back instead of sending a COMMIT that would answer ROLLBACK.
        if (failures.length > 0) throw failures[0]
        return result
      })
    },

    async listen(channel, handler) {
      assertChannelName(channel)
      assertOpen()
      // PGlite calls handlers in microtasks of their own, where a throw would crash the process.
      const stop = await pglite.listen(channel, (payload) => {
        try {
          handler(payload)
        } catch (error) {
          onError(error)
        }
      })
      let listening = true
      return async () => {
        if (!listening || closed) return
        listening = false
        await stop()
      }
    },

    async notify(channel, payload) {
      assertChannelName(channel)
      assertOpen()
      await pglite.query('SELECT pg_notify($1, $2)', [channel, payload])
    },

    async close() {
      if (closed) return
      closed = true
      await pglite.close()
    },
  }
}
