import { ConfigError, describeOptionValue as describeValue, missingMembers } from '@switchboard/core'

export type DbKind = 'postgres' | 'pglite'

export type DbRow = Record<string, unknown>

/** Runs one SQL statement at a time: the database itself, or one transaction's connection. */
export interface DbClient {
  /**
   * One statement with `$1…` parameters; answers its rows. Pass dates as ISO strings, arrays and
   * objects as JSON text cast in SQL (`$1::jsonb`): both drivers then send the same text.
   */
  query<Row extends object = DbRow>(sql: string, params?: readonly unknown[]): Promise<Row[]>
}

/** The connection of one transaction. */
export interface TransactionClient extends DbClient {
  /**
   * Optional: the statements started so far are the transaction's last. COMMIT goes out right
   * behind them, without waiting for their answers; a statement started later is refused. The
   * transaction commits when they all succeed, and nothing of it when one fails.
   */
  readonly commitBehindStatements?: () => void
}

export interface ListenOptions {
  readonly onReconnect?: () => void
}

/**
 * The little of PostgreSQL that Switchboard needs, the same for a server reached through `pg` and
 * for embedded PGlite, so every repository runs the same SQL on both.
 */
export interface Db extends DbClient {
  readonly kind: DbKind
  /** BEGIN, `fn` on one connection, COMMIT; ROLLBACK and rethrow when `fn` throws. */
  transaction<T>(fn: (client: TransactionClient) => Promise<T>): Promise<T>
  /**
   * LISTEN on `channel` (a lowercase SQL identifier); resolves once notifications sent from now on
   * will reach `handler`. The returned function stops this handler. `onReconnect` is called each
   * time the LISTEN connection broke and listens again: notifications sent meanwhile were lost.
   */
  listen(
    channel: string,
    handler: (payload: string) => void,
    options?: ListenOptions,
  ): Promise<() => Promise<void>>
  notify(channel: string, payload: string): Promise<void>
  close(): Promise<void>
}

const CHANNEL_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/** Channel names go into LISTEN unquoted, so only plain identifiers are accepted. */
export function assertChannelName(channel: string): void {
  if (!CHANNEL_NAME.test(channel)) {
    throw new Error(
      `Invalid notification channel "${channel}": use lowercase letters, digits and _ (at most 63)`,
    )
  }
}

const DB_METHODS = ['query', 'transaction', 'listen', 'notify', 'close'] as const

/**
 * The `db` option of `factory`, checked before its first use: missing, it failed as "Invalid value
 * used as weak map key"; given a `pg.Pool` (the mistake most likely), deep in the migration.
 */
export function assertDbOption(factory: string, options: { readonly db: Db } | undefined): void {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError(`${factory} needs an options object with a db, got ${describeValue(options)}`)
  }
  const given = missingMembers((options as { db: unknown }).db, DB_METHODS)
  if (given !== null) {
    throw new ConfigError(`${factory}: db must be a Db (from createPgDb() or createPgliteDb()), got ${given}`)
  }
}
