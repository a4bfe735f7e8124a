import { randomBytes } from 'node:crypto'
import { createPgDb, type Db } from '@switchboard/adapter-postgres'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { checkWebchatModel, type ModelService, startModelService } from './support/webchat-model.js'

/**
 * A model-based test of the webchat protocol (CONTRACT §7, §8, §11) against the reference server
 * over real sockets: random sequences of visitors connecting (new, or resuming with their token,
 * in up to two tabs), sending messages (new, without an id, repeated, cut off with their socket,
 * racing an operator's change), sending bad frames, asking for history and going away (cleanly or
 * not), and of operators pausing, resuming, closing and writing, with waits for the server to be
 * idle. After each wait, and at the end of a run, it checks:
 * - storage: every acked message stored once, in the session the model expects; every repeat
 *   acked with the original id; every reply answering a message of its session, at most once, and
 *   certain for a message of an ongoing session no change followed; none for one stored paused;
 *   no delivery left pending; sessions in the states the model expects, one open per visitor;
 * - every open socket: the session and state frames the model expects, in order; every message it
 *   must get as it happens (replies, other tabs' messages, operators'), once, not blocked, replies
 *   in the order written; none of its own messages back; typing off; the connection still open;
 * - history: exactly the session's messages after `since`, blocked replies left out.
 * What a race leaves open (a reply blocked by a pause mid-turn, where a message racing a close
 * lands, whether a cut-off message was stored) the model allows both ways and learns from what it
 * sees. Rate limits are left to webchat-operators.test.ts: runs this short never reach them, though
 * the model would expect RATE_LIMITED if they did.
 *
 * With DATABASE_URL, it runs on PostgreSQL too. For a longer local run: WEBCHAT_MODEL_RUNS=200
 * WEBCHAT_MODEL_COMMANDS=60; WEBCHAT_MODEL_DEBUG=1 prints what the runs exercised.
 * webchat-cluster-model.test.ts runs the same model against two servers on one PostgreSQL.
 */
const RUNS = Number(process.env.WEBCHAT_MODEL_RUNS ?? 10)
const MAX_COMMANDS = Number(process.env.WEBCHAT_MODEL_COMMANDS ?? 30)

const databaseUrl = process.env.DATABASE_URL

describe.each([
  ['in memory', undefined],
  ['on PostgreSQL', databaseUrl === undefined || databaseUrl === '' ? null : databaseUrl],
])('the webchat protocol as a model predicts it, %s', (_name, connectionString) => {
  let service: ModelService | undefined
  let admin: Db | undefined
  const schema = `switchboard_webchat_model_${randomBytes(6).toString('hex')}`

  beforeAll(async () => {
    if (connectionString === null) return
    const environment: Record<string, string> = {}
    if (connectionString !== undefined) {
      admin = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
      const url = new URL(connectionString)
      url.searchParams.set('options', `-c search_path=${schema}`)
      environment.DATABASE_URL = url.toString()
      environment.JWT_SECRET = randomBytes(32).toString('hex')
    }
    service = await startModelService(environment)
  })
  afterAll(async () => {
    await service?.close()
    await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
    await admin?.close()
  })

  it.runIf(connectionString !== null)(
    'holds for random visitors and operators',
    () =>
      checkWebchatModel(service!, {
        runs: RUNS,
        maxCommands: MAX_COMMANDS,
        debug: process.env.WEBCHAT_MODEL_DEBUG !== undefined,
      }),
    60_000 + RUNS * MAX_COMMANDS * 500,
  )
})
