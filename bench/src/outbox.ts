/**
 * The cost of delivering replies while a backlog waits in the outbox (a platform that is down:
 * its replies wait for their retries). Memory: one claim of another session's reply, against a
 * backlog of 1,000 (the baseline), 10,000 and 50,000 other sessions' replies. PostgreSQL (in a
 * schema of its own, dropped afterwards): one sweep (`claimDue`, run every 5 s by each process)
 * while 100 (the baseline), 1,000 and 5,000 sessions each hold 40 replies, their heads waiting for
 * a retry and the rest due behind them. Prints milliseconds (median of 5) and each as a multiple
 * of the baseline of the same storage, measured in the same run.
 *
 *   npm run bench:outbox -w @switchboard/bench                          PostgreSQL at 127.0.0.1:5432/test
 *   DATABASE_URL=postgres://… npm run bench:outbox -w @switchboard/bench
 */
import { randomUUID } from 'node:crypto'
import { createPostgresStorage, type Db } from '@switchboard/adapter-postgres'
import { createMemoryStorage } from '@switchboard/core'
import { inPostgresSchema } from './postgres-schema.js'

const ROUNDS = 5

function median(times: number[]): number {
  return times.sort((left, right) => left - right)[Math.floor(times.length / 2)]!
}

function report(name: string, label: string, ms: number, baseline: number, baselineLabel: string): void {
  const ratio = (ms / baseline).toFixed(1)
  console.log(
    `${name.padEnd(10)} ${label.padEnd(34)} ${ms.toFixed(3).padStart(9)} ms  ${ratio.padStart(7)} × ${baselineLabel}`,
  )
}

async function measureMemory(): Promise<void> {
  let baseline = Number.NaN
  for (const backlog of [1_000, 10_000, 50_000]) {
    const storage = createMemoryStorage()
    const now = new Date()
    for (let index = 0; index < backlog; index++) {
      await storage.outbox.add({
        messageId: randomUUID(),
        sessionId: randomUUID(),
        companyId: 1,
        integrationId: '1',
        availableAt: new Date(now.getTime() + 60_000),
      })
    }
    const times: number[] = []
    for (let round = 0; round < ROUNDS * 20; round++) {
      const messageId = randomUUID()
      await storage.outbox.add({
        messageId,
        sessionId: randomUUID(),
        companyId: 2,
        integrationId: '2',
        availableAt: now,
      })
      const start = performance.now()
      await storage.outbox.claim({ messageId, now, leaseMs: 30_000, leaseToken: 'bench' })
      times.push(performance.now() - start)
    }
    const ms = median(times)
    if (backlog === 1_000) baseline = ms
    report('memory', `claim, backlog ${backlog}`, ms, baseline, 'the backlog of 1000')
  }
}

async function measurePostgres(db: Db): Promise<void> {
  const storage = await createPostgresStorage({ db })
  let baseline = Number.NaN
  try {
    for (const sessions of [100, 1_000, 5_000]) {
      await db.query('TRUNCATE outbox, jobs, messages, sessions CASCADE')
      await db.query(
        `INSERT INTO sessions (id, company_id, integration_id, client_id, customer, state, active_agent_id,
          entry_agent_id, metadata, created_at, updated_at, version)
        SELECT gen_random_uuid(), 1, 1, 'c' || i, '{}'::jsonb, 'ongoing', 1, 1, '{}'::json, now(), now(), 1
        FROM generate_series(1, $1::integer) i`,
        [sessions],
      )
      await db.query(
        `INSERT INTO messages (id, company_id, session_id, integration_id, role, text, at, delivery)
        SELECT gen_random_uuid(), 1, s.id, 1, 'agent', 'reply', now(), 'pending'
        FROM sessions s, generate_series(1, 40)`,
      )
      // Added in the order of the messages, as turns add them; then each session's head waits for a retry.
      const ids = await db.query('SELECT id, session_id FROM messages ORDER BY sequence')
      for (let index = 0; index < ids.length; index += 1_000) {
        await db.query(
          `INSERT INTO outbox (message_id, company_id, session_id, integration_id, available_at)
          SELECT message_id, 1, session_id, 1, now() - interval '1 minute'
          FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS added (message_id, session_id, position)
          ORDER BY position`,
          [
            ids.slice(index, index + 1_000).map((row) => row.id),
            ids.slice(index, index + 1_000).map((row) => row.session_id),
          ],
        )
      }
      await db.query(
        `UPDATE outbox SET available_at = now() + interval '1 hour', attempts = 4
        WHERE insertion IN (SELECT min(insertion) FROM outbox GROUP BY session_id)`,
      )
      await db.query('ANALYZE outbox')
      const times: number[] = []
      for (let round = 0; round < ROUNDS; round++) {
        const start = performance.now()
        await storage.outbox.claimDue({
          now: new Date(),
          limit: 50,
          leaseMs: 30_000,
          leaseToken: `bench${round}`,
        })
        times.push(performance.now() - start)
      }
      const ms = median(times)
      if (sessions === 100) baseline = ms
      report('postgres', `sweep, backlog ${sessions * 40}`, ms, baseline, 'the backlog of 4000')
    }
  } finally {
    await storage.close()
  }
}

await measureMemory()

await inPostgresSchema('outbox', measurePostgres)
