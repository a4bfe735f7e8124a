import { randomBytes } from 'node:crypto'
import { createPgDb, type Db } from '@switchboard/adapter-postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { inSchema } from '../../../test-support/in-schema.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import { call, sendWebhook, setUpTenant, type Tenant } from './support/http-client.js'
import { type ServerProcess, startServerProcess } from './support/server-process.js'

const connectionString = process.env.DATABASE_URL
const SESSIONS = 200
/** One word per message; the offline model answers each with the one passage that holds it. */
const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'foxtrot'] as const
const answerTo = (word: string) => `Answer ${word}.`
const OWNER = { email: 'owner@two-processes.test', password: 'correct horse battery' }

// Only a real server can be shared by processes; CI always sets DATABASE_URL, so this never skips there.
describe.runIf(connectionString !== undefined && connectionString !== '')(
  'two server processes on one PostgreSQL',
  () => {
    const schema = `switchboard_two_${randomBytes(6).toString('hex')}`
    let admin: Db
    let db: Db
    let platform: FakePlatform
    const servers: ServerProcess[] = []

    beforeAll(async () => {
      admin = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
      db = createPgDb({ connectionString, max: 2, options: `-c search_path=${schema}` })
      platform = await startFakePlatform()
    })

    afterAll(async () => {
      for (const server of servers) server.child.kill('SIGKILL')
      await platform?.close()
      await db?.close()
      await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await admin?.close()
    })

    it(`answers ${SESSIONS} sessions × ${WORDS.length} concurrent messages in order, each exactly once`, async () => {
      const environment = {
        DATABASE_URL: inSchema(connectionString!, schema),
        JWT_SECRET: randomBytes(32).toString('hex'),
        DATA_DIR: 'memory',
      }
      // Started together: both migrate the empty schema at the same moment.
      servers.push(startServerProcess(environment), startServerProcess(environment))
      const urls = await Promise.all(servers.map((server) => server.listening))
      for (const url of urls) {
        expect(await call(`${url}/api/health`)).toEqual({
          status: 200,
          body: { ok: true, storage: 'postgres' },
        })
      }
      const tenant: Tenant = await setUpTenant(urls[0]!, {
        ...OWNER,
        knowledge: WORDS.map(answerTo).join('\n\n'),
        platformUrl: platform.url,
      })
      // A token from one process works on the other: they share the secret and the database.
      expect((await call(`${urls[1]}/api/agents`, { token: tenant.token })).status).toBe(200)

      // Every customer writes its messages one after another, each as soon as the last was
      // acknowledged, alternating between the processes; all customers write at once.
      const started = Date.now()
      const refused: string[] = []
      await Promise.all(
        Array.from({ length: SESSIONS }, async (_, session) => {
          for (const [index, word] of WORDS.entries()) {
            const answer = await sendWebhook(urls[(session + index) % 2]!, tenant, {
              clientId: `customer-${session}`,
              text: word,
              messageId: `${session}-${index}`,
            })
            if (answer.status !== 200 || answer.body.ok !== true) {
              refused.push(`${session}-${index}: ${answer.status} ${JSON.stringify(answer.body)}`)
            }
          }
        }),
      )
      expect(refused).toEqual([])
      const acknowledgedMs = Date.now() - started
      await platform.waitForReplies(SESSIONS * WORDS.length, 45_000)
      const answeredMs = Date.now() - started
      // Printed for the record: how long the load took on this machine.
      console.info(
        `two processes: ${SESSIONS * WORDS.length} messages acknowledged in ${acknowledgedMs} ms, answered in ${answeredMs} ms`,
      )

      // A reply reaches the platform before its sender hears back and marks it sent.
      await expect
        .poll(
          async () =>
            Number(
              (
                await db.query<{ count: unknown }>(
                  `SELECT count(*) AS count FROM messages WHERE delivery = 'pending'`,
                )
              )[0]?.count,
            ),
          { timeout: 10_000, interval: 50 },
        )
        .toBe(0)
      const rows = await db.query<{ client_id: string; role: string; text: string; delivery: string | null }>(
        `SELECT sessions.client_id, messages.role, messages.text, messages.delivery
      FROM messages JOIN sessions ON sessions.id = messages.session_id
      ORDER BY messages.sequence`,
      )
      const bySession = new Map<string, { customer: string[]; agent: string[] }>()
      for (const row of rows) {
        const entry = bySession.get(row.client_id) ?? { customer: [], agent: [] }
        bySession.set(row.client_id, entry)
        if (row.role === 'customer') entry.customer.push(row.text)
        else entry.agent.push(row.text)
        // A reply is stored after the message it answers: its turn saw it committed.
        if (row.role === 'agent') {
          expect(entry.agent.length, `${row.client_id} answered ahead of its messages`).toBeLessThanOrEqual(
            entry.customer.length,
          )
          expect(row.delivery).toBe('sent')
        }
      }
      expect(bySession.size).toBe(SESSIONS)
      for (const [clientId, entry] of bySession) {
        expect(entry.customer, clientId).toEqual([...WORDS])
        // Turns of one session committed in arrival order, one reply each.
        expect(entry.agent, clientId).toEqual(WORDS.map(answerTo))
      }

      // The platform got each reply once: no turn ran twice, no delivery was repeated.
      const delivered = new Map<string, number>()
      for (const reply of platform.replies) {
        const key = `${reply.clientId} ${reply.text}`
        delivered.set(key, (delivered.get(key) ?? 0) + 1)
      }
      expect(delivered.size).toBe(SESSIONS * WORDS.length)
      expect([...delivered.values()].every((count) => count === 1)).toBe(true)

      const [jobs] = await db.query<{ done: string; other: string }>(
        `SELECT count(*) FILTER (WHERE state = 'done') AS done, count(*) FILTER (WHERE state <> 'done') AS other FROM jobs`,
      )
      expect({ done: Number(jobs?.done), other: Number(jobs?.other) }).toEqual({
        done: SESSIONS * WORDS.length,
        other: 0,
      })
      expect(await db.query('SELECT message_id FROM outbox')).toEqual([])

      expect(await Promise.all(servers.map((server) => server.stop()))).toEqual([0, 0])
    }, 120_000)
  },
)
