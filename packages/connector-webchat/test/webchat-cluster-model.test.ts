import { afterAll, beforeAll, describe, it } from 'vitest'
import {
  type IsolatedStorage,
  isolatedStorage,
  onPostgres,
} from '../../../examples/reference-server/test/support/isolated-storage.js'
import { checkWebchatModel, type ModelService, startModelService } from './support/webchat-model.js'

/*
 * The webchat model of webchat-model.test.ts against two reference servers (or more) on one
 * PostgreSQL schema, as ARCHITECTURE.md scales out: fast-check picks the server of each tab, so a
 * visitor's tabs often sit on different servers and a visitor resumes on the other one after a
 * disconnect, and the server each operator request goes to; a turn runs on whichever server's
 * workers take its job. The invariants are the one-server test's, judged per socket whichever
 * server holds it: acks, storage, history, state frames, typing ending off, and every message a
 * socket must get arriving once and in order. The order holds across servers too, as the design
 * promises it: a session's outgoing messages leave the outbox one after the other (only its
 * earliest waiting one can be claimed, by any process) and PostgreSQL hands notifications to
 * every listener in commit order.
 *
 * The servers run in this process, each with its own pool, event bus, workers and remembered
 * integrations, as in examples/reference-server/test/http-cluster-model.test.ts: they share
 * nothing but the database. WEBCHAT_CLUSTER_MODEL_RUNS (default 8) sets the runs,
 * WEBCHAT_CLUSTER_MODEL_COMMANDS (default 25) the longest sequence, WEBCHAT_CLUSTER_MODEL_SERVERS
 * (default 2) the servers; WEBCHAT_CLUSTER_MODEL_SEED with WEBCHAT_CLUSTER_MODEL_PATH replays a
 * failing run (timing decides some, so a replay may pass); WEBCHAT_MODEL_DEBUG=1 prints what the
 * runs exercised. Only a real server can be shared, so it runs with DATABASE_URL only (CI sets it).
 */
const RUNS = Number(process.env.WEBCHAT_CLUSTER_MODEL_RUNS ?? 8)
const MAX_COMMANDS = Number(process.env.WEBCHAT_CLUSTER_MODEL_COMMANDS ?? 25)
const SERVERS = Number(process.env.WEBCHAT_CLUSTER_MODEL_SERVERS ?? 2)
const SEED = process.env.WEBCHAT_CLUSTER_MODEL_SEED
const PATH = process.env.WEBCHAT_CLUSTER_MODEL_PATH

describe.runIf(onPostgres)(
  'the webchat protocol as a model predicts it, on servers sharing PostgreSQL',
  () => {
    let storage: IsolatedStorage | undefined
    let service: ModelService | undefined

    beforeAll(async () => {
      storage = await isolatedStorage('webchat-cluster-model')
      service = await startModelService({ ...storage.environment }, SERVERS)
    })
    afterAll(async () => {
      await service?.close()
      await storage?.remove()
    })

    it(
      'holds for random visitors and operators, whichever server each socket and request reaches',
      () =>
        checkWebchatModel(service!, {
          runs: RUNS,
          maxCommands: MAX_COMMANDS,
          seed: SEED === undefined ? undefined : Number(SEED),
          path: PATH,
          debug: process.env.WEBCHAT_MODEL_DEBUG !== undefined,
        }),
      60_000 + RUNS * MAX_COMMANDS * 500,
    )
  },
)
