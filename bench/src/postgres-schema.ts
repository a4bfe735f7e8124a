import { randomBytes } from 'node:crypto'
import { createPgDb, type Db, migrate } from '@switchboard/adapter-postgres'

/**
 * Runs `measure` on a migrated PostgreSQL database in a schema of the bench's own (`search_path`
 * set in the URL), dropped afterwards, so a bench neither sees nor leaves rows in anybody else's
 * tables. `DATABASE_URL`, else the local server's `test` database. When the server cannot be
 * reached it says why and exits with 1.
 */
export async function inPostgresSchema(name: string, measure: (db: Db) => Promise<void>): Promise<void> {
  const connectionString = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const schema = `bench_${name}_${randomBytes(6).toString('hex')}`
  const admin: Db = createPgDb({ connectionString, max: 1 })
  try {
    await admin.query(`CREATE SCHEMA ${schema}`)
  } catch (error) {
    await admin.close()
    console.log(`postgres   skipped: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  }
  try {
    const url = new URL(connectionString)
    url.searchParams.set('options', `-c search_path=${schema}`)
    const db: Db = createPgDb({ connectionString: url.toString() })
    try {
      await migrate({ db })
      await measure(db)
    } finally {
      await db.close()
    }
  } finally {
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin.close()
  }
}
