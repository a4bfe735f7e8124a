import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPgDb, type Db } from '@switchboard/adapter-postgres'

/** The PostgreSQL server used when `DATABASE_URL` is not set. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test'

/** One of the reference server's storages, made ready for one run of the bench. */
export interface BenchStorage {
  readonly label: string
  /** What the row measures against, e.g. the temporary folder or the server and schema. */
  readonly where: string
  /** The environment handed to the reference server's `readConfig`, besides PORT and LOG_LEVEL. */
  readonly environment: Readonly<Record<string, string>>
  /**
   * CPU time (µs) used so far by each database server process serving this bench, by process id,
   * where it can be read (a PostgreSQL server on this machine); `undefined` elsewhere.
   */
  sampleDatabaseCpu(): Promise<DatabaseCpu | undefined>
  /** Removes what this run made: the temporary folder, the schema. */
  cleanUp(): Promise<void>
}

/** CPU µs used so far, by server process id. */
export type DatabaseCpu = ReadonlyMap<number, number>

/** µs of CPU the server processes used between two samples (a process that ended in between is lost). */
export function databaseCpuBetween(before: DatabaseCpu, after: DatabaseCpu): number {
  let total = 0
  for (const [pid, microseconds] of after) total += microseconds - (before.get(pid) ?? 0)
  return total
}

const noDatabaseCpu = async (): Promise<undefined> => undefined

export function memoryStorage(): BenchStorage {
  return {
    label: 'memory',
    where: 'DATA_DIR=memory',
    environment: { DATA_DIR: 'memory' },
    sampleDatabaseCpu: noDatabaseCpu,
    cleanUp: async () => undefined,
  }
}

/** Embedded PGlite in a fresh temporary DATA_DIR, removed afterwards. */
export async function pgliteStorage(): Promise<BenchStorage> {
  const dataDir = await mkdtemp(join(tmpdir(), 'switchboard-bench-webhook-'))
  return {
    label: 'PGlite',
    where: `DATA_DIR=${dataDir} (temporary)`,
    environment: { DATA_DIR: dataDir },
    // PGlite runs in this process's main thread: its time is in main µs/req.
    sampleDatabaseCpu: noDatabaseCpu,
    cleanUp: () => rm(dataDir, { recursive: true, force: true }),
  }
}

/**
 * A PostgreSQL server, in a schema of the bench's own (`search_path` set in the URL) dropped
 * afterwards, so the bench neither sees nor leaves rows in anybody else's tables. The connections
 * carry an `application_name` of their own, so their server processes can be told apart.
 */
export async function postgresStorage(connectionString: string): Promise<BenchStorage> {
  const suffix = randomBytes(6).toString('hex')
  const schema = `bench_webhook_${suffix}`
  const applicationName = `switchboard_bench_webhook_${suffix}`
  const admin: Db = createPgDb({ connectionString, max: 1 })
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
  } catch (error) {
    await admin.close()
    throw error
  }
  const url = new URL(connectionString)
  url.searchParams.set('options', `-c search_path=${schema}`)
  url.searchParams.set('application_name', applicationName)
  const display = new URL(connectionString)
  display.password = display.password === '' ? '' : '***'
  return {
    label: 'PostgreSQL',
    where: `${display.toString()}, schema ${schema} (dropped afterwards)`,
    environment: {
      DATABASE_URL: url.toString(),
      // Required with DATABASE_URL; any 32 characters do for a bench.
      JWT_SECRET: randomBytes(32).toString('hex'),
    },
    async sampleDatabaseCpu() {
      const rows = await admin.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
        [applicationName],
      )
      const sample = new Map<number, number>()
      for (const { pid } of rows) {
        // The first field of schedstat is the time the process ran, in ns. Unreadable when the
        // server is on another machine (or in a container with process ids of its own).
        const schedstat = await readFile(`/proc/${pid}/schedstat`, 'utf8').catch(() => null)
        if (schedstat === null) return undefined
        sample.set(pid, Number(schedstat.split(' ')[0]) / 1000)
      }
      return sample
    },
    async cleanUp() {
      try {
        await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      } finally {
        await admin.close()
      }
    },
  }
}
