import type { Db } from './db.js'
import { MIGRATIONS, type Migration } from './migrations.js'

/**
 * The key of the advisory lock that makes processes starting at once apply migrations one after
 * the other. Any constant works; this one spells nothing and is unlikely to meet an app's own.
 */
const MIGRATION_LOCK_KEY = 7_301_284_615_993_402

export interface MigrateResult {
  /** Versions this call applied, in order; empty when the schema was already current. */
  readonly applied: readonly number[]
}

/**
 * Brings the schema up to date in one transaction: either every missing migration is applied
 * and recorded in `schema_migrations`, or none is. Two processes starting at the same moment
 * queue on `pg_advisory_xact_lock`; the second then finds everything applied.
 */
export async function migrate(options: {
  db: Db
  migrations?: readonly Migration[]
}): Promise<MigrateResult> {
  const { db, migrations = MIGRATIONS } = options
  return db.transaction(async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY])
    // Looked up rather than CREATE TABLE IF NOT EXISTS, which would log a notice on every start.
    const [found] = await client.query<{ exists: boolean }>(
      "SELECT to_regclass('schema_migrations') IS NOT NULL AS exists",
    )
    if (found?.exists !== true) {
      await client.query(
        `CREATE TABLE schema_migrations (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`,
      )
    }
    const rows = await client.query<{ version: number }>('SELECT version FROM schema_migrations')
    const done = new Set(rows.map((row) => Number(row.version)))
    const applied: number[] = []
    for (const migration of [...migrations].sort((left, right) => left.version - right.version)) {
      if (done.has(migration.version)) continue
      for (const statement of migration.statements) await client.query(statement)
      await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
        migration.version,
        migration.name,
      ])
      applied.push(migration.version)
    }
    return { applied }
  })
}

const migrated = new WeakMap<Db, Promise<unknown>>()

/** Migrates a `Db` once per process, however many repositories, buses and indexes share it. */
export function ensureMigrated(db: Db): Promise<unknown> {
  let pending = migrated.get(db)
  if (pending === undefined) {
    pending = migrate({ db })
    // A failed attempt (the database was down) must not be remembered.
    pending.catch(() => migrated.delete(db))
    migrated.set(db, pending)
  }
  return pending
}
