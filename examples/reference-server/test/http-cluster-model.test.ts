import { createFakePasswordHasher } from '@switchboard/core/testing'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import {
  modelCommands,
  newModel,
  settle,
  setUpCompany,
  throughServer,
  type World,
} from './support/http-model.js'
import { type IsolatedStorage, isolatedStorage, onPostgres } from './support/isolated-storage.js'

/*
 * The HTTP model test (test/support/http-model.ts) against two servers (or more) on one
 * PostgreSQL, as CONTRACT §1 and §11 allow: fast-check sends each command to either server, splits
 * a customer's messages, a burst, a race or a clash of operators between them, delivers one
 * message or status hook to both at once (a platform retry reaching the other process while the
 * first try is under way), changes the integration through one server while the other remembers
 * it, and restarts a server while messages reach it. Besides what the one-server test checks (no
 * 500, each message stored once and in order, one reply per answered message from the right
 * agent, delivered once), once things settle every server reads every session, message list and
 * webhook log alike.
 *
 * The servers run in this process, each with its own connection pool, workers, event bus and
 * remembered integrations: nothing of the service is shared between them but the database (the
 * SDK's only module-level state is a timestamp formatting cache), so they are separate processes
 * as far as the contract can tell, and this test can ask each whether it is idle rather than guess.
 *
 * HTTP_CLUSTER_MODEL_RUNS (default 6) sets the number of runs, HTTP_CLUSTER_MODEL_COMMANDS
 * (default 25) the longest sequence, HTTP_CLUSTER_MODEL_SERVERS (default 2) the servers;
 * HTTP_CLUSTER_MODEL_SEED with HTTP_CLUSTER_MODEL_PATH replays a failing run (fast-check prints
 * both; timing decides some failures, so a replay may pass). Only a real server can be shared, so
 * it runs with DATABASE_URL only (CI sets it).
 */

const RUNS = Number(process.env.HTTP_CLUSTER_MODEL_RUNS ?? 6)
const COMMANDS = Number(process.env.HTTP_CLUSTER_MODEL_COMMANDS ?? 25)
const SEED =
  process.env.HTTP_CLUSTER_MODEL_SEED === undefined ? undefined : Number(process.env.HTTP_CLUSTER_MODEL_SEED)
const PATH = process.env.HTTP_CLUSTER_MODEL_PATH
const SERVERS = Number(process.env.HTTP_CLUSTER_MODEL_SERVERS ?? 2)

// Only a real server can be shared by processes; CI always sets DATABASE_URL, so this never skips there.
describe.runIf(onPostgres)('reference servers on one PostgreSQL, against the HTTP model', () => {
  let storage: IsolatedStorage | undefined
  const services: ReferenceServer[] = []
  let platform: FakePlatform
  let startServer: () => Promise<ReferenceServer>
  let runs = 0

  beforeAll(async () => {
    platform = await startFakePlatform()
    storage = await isolatedStorage('http-cluster-model')
    const config = readConfig({ PORT: '0', LOG_LEVEL: 'silent', ...storage.environment })
    startServer = () => startReferenceServer(config, { passwordHasher: createFakePasswordHasher() })
    // Started together: both migrate the empty schema at the same moment.
    services.push(...(await Promise.all(Array.from({ length: SERVERS }, startServer))))
  })

  afterAll(async () => {
    await Promise.all(services.map((service) => service.close()))
    await platform?.close()
    await storage?.remove()
  })

  it(
    'keeps every session, message and reply the model expects, whichever server is asked',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.commands(modelCommands(SERVERS), { maxCommands: COMMANDS, size: 'max' }),
          async (sequence) => {
            runs += 1
            const real = await setUpCompany(services[runs % SERVERS]!.url, platform, runs)
            const nodes = services.map((service) => throughServer(real, service.url))
            const model = newModel(runs)
            // A restart replaces a server in `services` and `nodes`, in place.
            const world: World = { real: nodes[0]!, nodes, services, startServer }
            await fc.asyncModelRun(() => ({ model, real: world }), sequence)
            for (const node of nodes) await settle({ ...world, real: node }, model)
          },
        ),
        {
          numRuns: RUNS,
          ...(SEED === undefined ? {} : { seed: SEED }),
          ...(PATH === undefined ? {} : { path: PATH, endOnFailure: true }),
        },
      )
    },
    Math.max(600_000, RUNS * COMMANDS * 500),
  )
})
