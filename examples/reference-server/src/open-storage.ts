import { join } from 'node:path'
import {
  createPgDb,
  createPgliteDb,
  createPostgresEventBus,
  createPostgresKnowledgeIndex,
  createPostgresStorage,
  type Db,
} from '@switchboard/adapter-postgres'
import {
  createMemoryEventBus,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  type EventBus,
  type KnowledgeIndex,
  type Storage,
} from '@switchboard/core'
import type { Logger } from 'pino'
import type { ServerConfig } from './config.js'

/** Where the service keeps everything, and how to let go of it. */
export interface OpenedStorage {
  readonly storage: Storage
  readonly knowledge: KnowledgeIndex
  readonly eventBus: EventBus
  close(): Promise<void>
}

/**
 * CONTRACT §1: `DATABASE_URL` selects a PostgreSQL server; otherwise PGlite keeps the same schema
 * in `DATA_DIR`; `DATA_DIR=memory` keeps nothing.
 */
export async function openStorage(config: ServerConfig, logger: Logger): Promise<OpenedStorage> {
  if (config.databaseUrl === undefined && config.dataDir === 'memory') {
    const storage = createMemoryStorage()
    const eventBus = createMemoryEventBus()
    return {
      storage,
      knowledge: createMemoryKnowledgeIndex(),
      eventBus,
      async close() {
        await eventBus.close()
        await storage.close()
      },
    }
  }

  const onError = (error: unknown) => logger.error({ err: error }, 'database connection error')
  const db: Db =
    config.databaseUrl !== undefined
      ? createPgDb({ connectionString: config.databaseUrl, max: 10, onError })
      : await createPgliteDb({ dataDir: join(config.dataDir, 'pglite'), onError })
  try {
    const storage = await createPostgresStorage({ db })
    const knowledge = await createPostgresKnowledgeIndex({ db })
    const eventBus = await createPostgresEventBus({ db })
    return {
      storage,
      knowledge,
      eventBus,
      async close() {
        await eventBus.close()
        await storage.close()
        await db.close()
      },
    }
  } catch (error) {
    await db.close()
    throw error
  }
}
