import { randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  createMemoryKnowledgeIndex,
  createOfflineProvider,
  createSwitchboard,
  type KnowledgeIndex,
  type Storage,
} from '@switchboard/core'
import {
  runEventBusConformance,
  runJobQueueConformance,
  runKnowledgeIndexConformance,
  runStorageConformance,
  seedChannel,
} from '@switchboard/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createPgliteDb,
  createPostgresEventBus,
  createPostgresKnowledgeIndex,
  createPostgresStorage,
  type Db,
  type DbClient,
  MIGRATIONS,
  migrate,
  writePgliteTemplate,
} from '../src/index.js'
import { runAdapterCases } from './support/adapter-cases.js'
import { runDurabilityCases } from './support/durability-cases.js'

// One PGlite for the whole file: each instance costs seconds and hundreds of megabytes. It is
// file-backed, so the last test can reopen it as a restarted process would.
let dataDir: string
let db: Db
let storage: Storage
let knowledge: KnowledgeIndex

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'switchboard-pglite-'))
  db = await createPgliteDb({ dataDir })
  storage = await createPostgresStorage({ db })
  knowledge = await createPostgresKnowledgeIndex({ db })
})

afterAll(async () => {
  await storage?.close()
  await db?.close()
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
})

const createCompany = (into: Storage, companyName: string) =>
  into.companies.create({ companyName, publicId: randomUUID(), at: new Date('2030-01-01T00:00:00.000Z') })

// The suites share the storage, so they must not close it after each test.
const shared = { cleanup: async () => {} }

runStorageConformance('PGlite', () => storage, shared)
runJobQueueConformance('PGlite', () => storage, shared)
runEventBusConformance('PGlite', () => createPostgresEventBus({ db }), {
  // PGlite is one connection in one process: a second bus on it is the closest to another process.
  createSecondBus: () => createPostgresEventBus({ db }),
})
runKnowledgeIndexConformance('PGlite', () => knowledge)

describe('PGlite adapter', () => {
  runAdapterCases({ db: () => db, storage: () => storage })
  runDurabilityCases({ db: () => db, storage: () => storage })

  // PGlite runs statements synchronously on this thread: unless it lets the event loop poll
  // before a transaction, the requests waiting on other sockets are read only once the store under
  // way is over, so each message was stored alone, a transaction apiece, under any load.
  it('stores messages that arrive on other connections while one is stored together, not a transaction each', async () => {
    let transactions = 0
    const counted: Db = {
      ...db,
      transaction: (fn) => {
        transactions += 1
        return db.transaction(fn)
      },
    }
    const countedStorage = await createPostgresStorage({ db: counted })
    const { integration } = await seedChannel(countedStorage, { agent: { kind: 'human' } })
    const switchboard = createSwitchboard({
      storage: countedStorage,
      model: createOfflineProvider(),
      knowledge: createMemoryKnowledgeIndex(),
      concurrency: 0,
    })
    const server = createServer((request, response) => {
      const clientId = request.url!.slice(1)
      void switchboard
        .ingest({ integrationId: integration.id, clientId, text: 'hello' }, { integration })
        .then((stored) => response.writeHead(stored.isOk() ? 200 : 500).end())
    })
    server.listen(0, '127.0.0.1')
    await new Promise<void>((resolve) => server.once('listening', resolve))
    const { port } = server.address() as AddressInfo
    const CUSTOMERS = 20
    const sockets = await Promise.all(
      Array.from(
        { length: CUSTOMERS },
        () =>
          new Promise<Socket>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1', () => resolve(socket))
            socket.on('error', reject)
          }),
      ),
    )
    /** One request on each connection, all written in one go; the statuses they are answered with. */
    const round = (name: string) =>
      Promise.all(
        sockets.map(
          (socket, index) =>
            new Promise<number>((resolve) => {
              socket.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().split(' ')[1])))
              socket.write(`POST /${name}-${index} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n`)
            }),
        ),
      )
    try {
      // A server accepts one new connection per turn of the event loop, so the first round arrives
      // one by one; on connections it knows, as a platform's kept-alive ones, requests sent at once
      // are all there on its next read of the sockets.
      expect(await round('first')).toEqual(Array(CUSTOMERS).fill(200))
      const before = transactions
      const statuses = await round('second')
      expect(statuses).toEqual(Array(CUSTOMERS).fill(200))
      const stored = await countedStorage.sessions.list({ companyId: integration.companyId, limit: 100 })
      expect(stored.items).toHaveLength(2 * CUSTOMERS)
      expect(transactions - before).toBeLessThanOrEqual(CUSTOMERS / 4)
    } finally {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await switchboard.stop()
    }
  })

  it('migrates an empty schema from scratch, once, when asked twice at the same time', async () => {
    const schema = `migration_${Date.now()}`
    await db.query(`CREATE SCHEMA ${schema}`)
    // PGlite has one connection, so the fresh schema is chosen per transaction, not per session.
    const inSchema: Db = {
      ...db,
      transaction: (fn) =>
        db.transaction(async (client: DbClient) => {
          await client.query(`SET LOCAL search_path TO ${schema}`)
          return fn(client)
        }),
    }
    try {
      const results = await Promise.all([migrate({ db: inSchema }), migrate({ db: inSchema })])
      expect(results.map((result) => result.applied).sort()).toEqual([
        [],
        MIGRATIONS.map((migration) => migration.version),
      ])
      const tables = await db.query<{ count: unknown }>(
        'SELECT count(*) AS count FROM information_schema.tables WHERE table_schema = $1',
        [schema],
      )
      expect(Number(tables[0]?.count)).toBeGreaterThan(15)
    } finally {
      await db.query(`DROP SCHEMA ${schema} CASCADE`)
    }
  })

  it('keeps everything in its data folder across a restart', async () => {
    const company = await createCompany(storage, 'Restart Ltd')
    await storage.close()
    await db.close()

    db = await createPgliteDb({ dataDir })
    storage = await createPostgresStorage({ db })
    // The suites above may run after this one (--sequence.shuffle): none may hold the closed db.
    knowledge = await createPostgresKnowledgeIndex({ db })
    expect(await storage.companies.get({ id: company.id })).toEqual(company)
  })
})

describe('a PGlite template', () => {
  let folder: string
  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'switchboard-pglite-template-'))
  })
  afterAll(async () => {
    if (folder !== undefined) await rm(folder, { recursive: true, force: true })
  })

  it('starts a new database with the schema, which keeps what it was given across a reopen', async () => {
    const template = join(folder, 'template.tar.gz')
    await writePgliteTemplate(template)
    const newDir = join(folder, 'data')

    let opened = await createPgliteDb({ dataDir: newDir, template })
    // Every migration is in the dump already: opening applies none. PGlite's one database is all
    // there is: the templates for CREATE DATABASE were left out.
    expect((await migrate({ db: opened })).applied).toEqual([])
    expect(await opened.query('SELECT datname FROM pg_database')).toEqual([{ datname: 'postgres' }])
    let opening = await createPostgresStorage({ db: opened })
    const company = await createCompany(opening, 'Template Ltd')
    await opening.close()
    await opened.close()

    // The database exists now: the template is not loaded over it.
    opened = await createPgliteDb({ dataDir: newDir, template })
    opening = await createPostgresStorage({ db: opened })
    expect(await opening.companies.get({ id: company.id })).toEqual(company)
    await opening.close()
    await opened.close()

    const inMemory = await createPgliteDb({ dataDir: 'memory', template })
    expect(await inMemory.query('SELECT 1 AS one')).toEqual([{ one: 1 }])
    await inMemory.close()

    // An empty folder made beforehand takes the template too; nothing is left beside it.
    const emptyDir = join(folder, 'made-empty')
    await mkdir(emptyDir)
    const inEmpty = await createPgliteDb({ dataDir: emptyDir, template })
    expect((await migrate({ db: inEmpty })).applied).toEqual([])
    await inEmpty.close()
    expect((await readdir(folder)).sort()).toEqual(['data', 'made-empty', 'template.tar.gz'])
  }, 60_000)

  it('refuses a template it was told to use that is not there', async () => {
    // A folder of its own: the test above lists everything in `folder`, and may run after this.
    const elsewhere = await mkdtemp(join(tmpdir(), 'switchboard-pglite-refused-'))
    try {
      await expect(
        createPgliteDb({ dataDir: join(elsewhere, 'other'), template: join(elsewhere, 'missing.tar.gz') }),
      ).rejects.toThrow(/ENOENT/)
    } finally {
      await rm(elsewhere, { recursive: true, force: true })
    }
  })
})
