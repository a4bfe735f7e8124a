import { ConfigError } from '@switchboard/core'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import {
  createPgDb,
  createPgliteDb,
  createPostgresEventBus,
  createPostgresKnowledgeIndex,
  createPostgresStorage,
} from '../src/index.js'

/** What a caller from plain JavaScript may pass, whatever the types say. */
type AnyOptions = Parameters<typeof createPostgresStorage>[0]

describe('the adapter, given options it cannot work with', () => {
  it.each([
    ['createPostgresStorage', createPostgresStorage],
    ['createPostgresEventBus', createPostgresEventBus],
    ['createPostgresKnowledgeIndex', createPostgresKnowledgeIndex],
  ] as const)('%s names a missing or wrong db', async (name, create) => {
    const start = (options: unknown) =>
      (create as (options: AnyOptions) => Promise<unknown>)(options as AnyOptions)
    const expected = `${name}: db must be a Db (from createPgDb() or createPgliteDb())`
    await expect(start({})).rejects.toThrow(ConfigError)
    await expect(start({})).rejects.toThrow(`${expected}, got undefined`)
    await expect(start(undefined)).rejects.toThrow(`${name} needs an options object with a db, got undefined`)
    // The mistake a pg user makes first: the pool itself.
    const pool = new pg.Pool()
    try {
      await expect(start({ db: pool })).rejects.toThrow(`${expected}, got an object without transaction()`)
    } finally {
      await pool.end()
    }
  })

  it('createPgliteDb names a missing dataDir', async () => {
    const start = (options: unknown) => createPgliteDb(options as Parameters<typeof createPgliteDb>[0])
    const expected = `createPgliteDb: dataDir must be a folder path or "memory"`
    await expect(start(undefined)).rejects.toThrow(ConfigError)
    await expect(start(undefined)).rejects.toThrow(
      'createPgliteDb needs an options object with a dataDir (a folder path or "memory"), got undefined',
    )
    await expect(start({})).rejects.toThrow(`${expected}, got undefined`)
    await expect(start({ dataDir: '' })).rejects.toThrow(`${expected}, got ""`)
  })

  it('createPgDb needs its options', () => {
    expect(() => createPgDb(undefined as unknown as Parameters<typeof createPgDb>[0])).toThrow(
      'createPgDb needs an options object (a pg PoolConfig such as { connectionString }), got undefined',
    )
  })
})
