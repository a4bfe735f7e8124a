import { randomBytes } from 'node:crypto'
import { createPgDb, type Db } from '@switchboard/adapter-postgres'
import { createFakePasswordHasher } from '@switchboard/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import { type Answer, sendWebhook, setUpTenant } from './support/http-client.js'

const connectionString = process.env.DATABASE_URL
/** The advisory lock a trigger on `jobs` waits for, so an ingest stops midway when the test says. */
const HOLD_KEY = 861_204_337

/**
 * The database "stops" for this server only: it connects as a role of its own, which the test
 * forbids to log in while it cuts the role's connections. The machine's shared cluster, and every
 * other test on it, keep running.
 */
describe.runIf(connectionString !== undefined && connectionString !== '')(
  'the database failing mid-ingest',
  () => {
    const name = `switchboard_outage_${randomBytes(6).toString('hex')}`
    let admin: Db
    /** Holds the advisory lock on a connection of its own. */
    let blocker: Db
    let server: ReferenceServer
    let platform: FakePlatform

    const cutConnections = () =>
      admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [name])

    beforeAll(async () => {
      admin = createPgDb({ connectionString, max: 1 })
      blocker = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE ROLE ${name} LOGIN`)
      await admin.query(`CREATE SCHEMA ${name} AUTHORIZATION ${name}`)
      const url = new URL(connectionString!)
      url.username = name
      url.password = ''
      url.searchParams.set('options', `-c search_path=${name}`)
      platform = await startFakePlatform()
      const config = readConfig({
        PORT: '0',
        DATABASE_URL: url.toString(),
        JWT_SECRET: randomBytes(32).toString('hex'),
        DATA_DIR: 'memory',
        LOG_LEVEL: 'silent',
      })
      server = await startReferenceServer(config, { passwordHasher: createFakePasswordHasher() })
    })

    afterAll(async () => {
      // Whatever happened, the role may log in again so the server can close cleanly.
      await admin?.query(`ALTER ROLE ${name} LOGIN`)
      await server?.close()
      await platform?.close()
      await blocker?.close()
      await admin?.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`)
      await cutConnections()
      await admin?.query(`DROP ROLE IF EXISTS ${name}`)
      await admin?.close()
    })

    it('answers 500 and keeps nothing half-written; the platform retry is stored once, and answered', async () => {
      const tenant = await setUpTenant(server.url, {
        email: 'owner@outage.test',
        password: 'correct horse battery',
        knowledge: 'Opening hours are 9 to 5.\n\nDelivery takes three days.',
        platformUrl: platform.url,
      })
      const webhook = (clientId: string, messageId: string, text: string) =>
        sendWebhook(server.url, tenant, { clientId, messageId, text })
      expect(await webhook('known', 'known-1', 'opening hours?')).toEqual({ status: 200, body: { ok: true } })
      await platform.waitForReplies(1)

      await admin.query(
        `CREATE FUNCTION ${name}.hold_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(${HOLD_KEY}); RETURN NEW; END $$`,
      )
      await admin.query(
        `CREATE TRIGGER hold_jobs BEFORE INSERT ON ${name}.jobs FOR EACH ROW EXECUTE FUNCTION ${name}.hold_jobs()`,
      )
      await blocker.query('SELECT pg_advisory_lock($1)', [HOLD_KEY])

      // A message of an open session, and a new customer's first message: each ingest has written
      // its rows (and the new session) and waits at its job when the database goes away.
      const answers: Answer[] = []
      const inFlight = [webhook('known', 'known-2', 'delivery?'), webhook('new', 'new-1', 'delivery?')].map(
        (request) => request.then((answer) => answers.push(answer)),
      )
      await expect
        .poll(
          async () =>
            (
              await admin.query(
                `SELECT pid FROM pg_stat_activity WHERE usename = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'`,
                [name],
              )
            ).length,
          { timeout: 10_000, interval: 20 },
        )
        .toBe(2)
      // Nothing is committed yet, so nothing may be acknowledged yet.
      expect(answers).toEqual([])

      await admin.query(`ALTER ROLE ${name} NOLOGIN`)
      await cutConnections()
      await Promise.all(inFlight)
      const internalError = {
        status: 500,
        body: { error: { code: 'INTERNAL_ERROR', message: 'internal server error' } },
      }
      expect(answers).toEqual([internalError, internalError])
      // While the database stays away, the retry cannot be stored either.
      expect(await webhook('new', 'new-1', 'delivery?')).toEqual(internalError)

      await admin.query(`ALTER ROLE ${name} LOGIN`)
      await blocker.query('SELECT pg_advisory_unlock($1)', [HOLD_KEY])
      await admin.query(`DROP TRIGGER hold_jobs ON ${name}.jobs`)

      const count = async (sql: string) => Number((await admin.query<{ count: unknown }>(sql))[0]?.count)
      expect(
        await count(`SELECT count(*) FROM ${name}.messages WHERE external_id IN ('known-2', 'new-1')`),
      ).toBe(0)
      expect(await count(`SELECT count(*) FROM ${name}.sessions WHERE client_id = 'new'`)).toBe(0)
      expect(
        await count(
          `SELECT count(*) FROM ${name}.messages message WHERE role = 'customer'
        AND NOT EXISTS (SELECT 1 FROM ${name}.jobs job WHERE job.message_id = message.id)`,
        ),
      ).toBe(0)
      expect(
        await count(
          `SELECT count(*) FROM ${name}.sessions session
        WHERE NOT EXISTS (SELECT 1 FROM ${name}.messages message WHERE message.session_id = session.id)`,
        ),
      ).toBe(0)

      // The platform retries once the service answers again: stored now, once, and answered.
      expect(await webhook('known', 'known-2', 'delivery?')).toEqual({ status: 200, body: { ok: true } })
      expect(await webhook('new', 'new-1', 'delivery?')).toEqual({ status: 200, body: { ok: true } })
      await platform.waitForReplies(3)
      expect(platform.replies).toEqual([
        { clientId: 'known', text: 'Opening hours are 9 to 5.' },
        expect.objectContaining({ text: 'Delivery takes three days.' }),
        expect.objectContaining({ text: 'Delivery takes three days.' }),
      ])
      expect(new Set(platform.replies.slice(1).map((reply) => reply.clientId))).toEqual(
        new Set(['known', 'new']),
      )
      expect(await count(`SELECT count(*) FROM ${name}.messages WHERE role = 'customer'`)).toBe(3)
    }, 60_000)
  },
)
