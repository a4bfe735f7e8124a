import { existsSync } from 'node:fs'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PGlite } from '@electric-sql/pglite'
import { ConfigError, describeOptionValue as describeValue } from '@switchboard/core'
import { assertChannelName, type Db, type DbClient, type DbRow } from './db.js'
import { migrate } from './migrate.js'
import { refusalOf } from './refusals.js'
import { statementsUnderWay } from './statements-under-way.js'
import { storableParameters } from './storable-text.js'

/**
 * The template this package's build writes (`npm run build`). The same URL from `src` and from
 * `dist`, which both sit one folder below the package.
 */
const BUILT_TEMPLATE = new URL('../dist/pglite-template.tar.gz', import.meta.url)

export interface PgliteDbOptions {
  /** A folder for the database files (created on first open), or `memory` to keep nothing. */
  readonly dataDir: string
  /** Told about a notification handler that threw; by default such errors are dropped. */
  readonly onError?: (error: unknown) => void
  /**
   * A new, empty database as `writePgliteTemplate` dumped it, which a database not created yet
   * starts from: PGlite takes several seconds to initialise and migrate a database, one or two to
   * load this. By default the one this package's build writes, if it is there; `null` initialises
   * every new database. Ignored for a database that exists.
   */
  readonly template?: string | URL | null
}

/**
 * Writes a dump (compressed, about 3 MB) of a new PGlite database with Switchboard's schema and
 * no data, for `template`. A database started from an older dump gets the migrations it lacks when
 * it is opened, as any database does. It holds the `postgres` database only: without the
 * templates, `CREATE DATABASE` fails in a database started from it.
 */
export async function writePgliteTemplate(path: string | URL): Promise<void> {
  const pglite = await PGlite.create()
  try {
    // Applied here, they cost a new database nothing at its first start (over a second on PGlite).
    await migrate({ db: wrapPglite(pglite, () => {}) })
    // PGlite serves the one database, `postgres`; the templates for CREATE DATABASE are two thirds
    // of the files a new database unpacks (the dump loads in 1.4 s without them, 2.0 s with).
    for (const template of ['template1', 'template0']) {
      await pglite.query(`ALTER DATABASE ${template} IS_TEMPLATE false`)
      await pglite.query(`DROP DATABASE ${template}`)
    }
    // Written out now, so a database loaded from the dump has nothing to recover at its first open.
    await pglite.query('CHECKPOINT')
    const dump = await pglite.dumpDataDir('gzip')
    // Written whole or not at all: a build cut short must not leave a truncated template that every
    // new database would then fail to load.
    const target = path instanceof URL ? fileURLToPath(path) : path
    const partial = `${target}.${process.pid}.partial`
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()))
    await rename(partial, target)
  } finally {
    await pglite.close()
  }
}

/** The template to load into a new database, or undefined to initialise it. */
async function readTemplate(template: string | URL | null): Promise<Blob | undefined> {
  if (template === null) return undefined
  try {
    return new Blob([await readFile(template)])
  } catch (error) {
    // A build that wrote no template (run from sources before any build) initialises instead; a
    // template the caller named must be there.
    if (template === BUILT_TEMPLATE && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

/**
 * A `Db` on embedded PGlite: real PostgreSQL compiled to WebAssembly, in this process, on one
 * connection. PGlite runs one transaction at a time and makes every statement outside it wait
 * (its own transaction mutex), so no reader ever sees a transaction half done. The flip side, as
 * with the memory storage: inside `transaction(fn)`, use the client `fn` gets; a statement sent to
 * the `Db` itself there waits for the transaction that waits for it.
 */
export async function createPgliteDb(options: PgliteDbOptions): Promise<Db> {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError(
      `createPgliteDb needs an options object with a dataDir (a folder path or "memory"), got ${describeValue(options)}`,
    )
  }
  const { dataDir, onError = () => {}, template = BUILT_TEMPLATE } = options
  if (typeof dataDir !== 'string' || dataDir === '') {
    throw new ConfigError(
      `createPgliteDb: dataDir must be a folder path or "memory", got ${describeValue(dataDir)}`,
    )
  }
  const inMemory = dataDir === 'memory'
  // PGlite creates the last folder of the path only.
  if (!inMemory) await mkdir(dataDir, { recursive: true })
  // PGlite refuses to load a template over a database that exists; PG_VERSION marks one.
  const created = !inMemory && existsSync(join(dataDir, 'PG_VERSION'))
  const loadDataDir = created ? undefined : await readTemplate(template)
  const pglite = await PGlite.create({
    ...(inMemory ? {} : { dataDir }),
    ...(loadDataDir === undefined ? {} : { loadDataDir }),
  })
  return wrapPglite(pglite, onError)
}

/**
 * PGlite's errors carry the statement's parameters (`params`, `queryOptions`), which pg's do not: a
 * logged error would then print API tokens, webhook secrets and customers' messages.
 */
function withoutParameters(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) {
    delete (error as { params?: unknown }).params
    delete (error as { queryOptions?: unknown }).queryOptions
  }
  return error
}

/**
 * PGlite runs each statement synchronously on this thread, so a chain of statements never let the
 * event loop read the requests waiting on other sockets: each webhook was stored alone, a whole
 * transaction apiece. Letting the loop poll first, the requests that arrived meanwhile reach the
 * ingest queue and are stored together in the next transaction.
 */
const ioFirst = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

function wrapPglite(pglite: PGlite, onError: (error: unknown) => void): Db {
  let closed = false

  const assertOpen = (): void => {
    if (closed) throw new Error('The database is closed')
  }

  return {
    kind: 'pglite',

    async query<Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) {
      await ioFirst()
      // Checked after the wait: the database may have been closed meanwhile.
      assertOpen()
      try {
        const result = await pglite.query<Row>(sql, storableParameters(params))
        return result.rows
      } catch (error) {
        throw refusalOf(withoutParameters(error))
      }
    },

    async transaction(fn) {
      await ioFirst()
      // Checked after the wait: the database may have been closed meanwhile.
      assertOpen()
      return pglite.transaction(async (transaction) => {
        /** The first statement that failed: the transaction is aborted, whatever `fn` does next. */
        const failures: unknown[] = []
        const underWay = statementsUnderWay()
        let open = true
        const client: DbClient = {
          query<Row extends object = DbRow>(sql: string, params: readonly unknown[] = []) {
            if (!open || transaction.closed)
              return Promise.reject(new Error('The transaction is already over; use the storage instead'))
            return underWay.track(
              transaction.query<Row>(sql, storableParameters(params)).then(
                (result) => result.rows,
                (error: unknown) => {
                  const failure = refusalOf(withoutParameters(error))
                  failures.push(failure)
                  throw failure
                },
              ),
            )
          },
        }
        const result = await fn(client)
        await underWay.settled()
        // Refused from now on: one started later would run before PGlite's COMMIT with nobody
        // waiting for it.
        open = false
        // Thrown here, PGlite rolls back instead of sending a COMMIT that would answer ROLLBACK.
        if (failures.length > 0) throw failures[0]
        return result
      })
    },

    // The database runs in this process: no connection to lose, so `onReconnect` is never called.
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
