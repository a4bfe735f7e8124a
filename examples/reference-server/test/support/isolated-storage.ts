import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPgDb } from '@switchboard/adapter-postgres'

const connectionString = process.env.DATABASE_URL

/** True when the tests run on the PostgreSQL server of `DATABASE_URL` rather than on PGlite. */
export const onPostgres = connectionString !== undefined && connectionString !== ''

export interface IsolatedStorage {
  /** The settings that point a reference server (`readConfig`) at this storage. */
  readonly environment: Readonly<Record<string, string>>
  /** Drops the schema or removes the folder. */
  remove(): Promise<void>
}

/**
 * Storage of a test's own: with `DATABASE_URL`, a schema of its own on that server (first on the
 * `search_path`), so it neither sees nor leaves rows in other tests' tables; else PGlite in a
 * temporary folder.
 */
export async function isolatedStorage(name: string): Promise<IsolatedStorage> {
  if (!onPostgres) {
    const dataDir = await mkdtemp(join(tmpdir(), `switchboard-${name}-`))
    return {
      environment: { DATA_DIR: dataDir },
      remove: () => rm(dataDir, { recursive: true, force: true }),
    }
  }
  const schema = `switchboard_${name.replaceAll('-', '_')}_${randomBytes(6).toString('hex')}`
  const admin = createPgDb({ connectionString, max: 1 })
  await admin.query(`CREATE SCHEMA ${schema}`)
  const url = new URL(connectionString!)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return {
    environment: { DATABASE_URL: url.toString(), JWT_SECRET: randomBytes(32).toString('hex') },
    async remove() {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await admin.close()
    },
  }
}
