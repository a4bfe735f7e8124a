import { createFakePasswordHasher } from '@switchboard/core/testing'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import { modelCommands, newModel, settle, setUpCompany, type World } from './support/http-model.js'
import { type IsolatedStorage, isolatedStorage, onPostgres } from './support/isolated-storage.js'

/*
 * Random sequences of what customers, the platform and operators do to the reference server, over
 * HTTP, checked against a model of what CONTRACT §5, §6 and §8 and the spec's transition table
 * say must follow (test/support/http-model.ts). The offline model answers (CONTRACT §10): each
 * agent knows one passage per word, so a reply names the agent that wrote it and the word it
 * answers.
 *
 * HTTP_MODEL_RUNS (default 6) sets the number of runs, HTTP_MODEL_COMMANDS (default 25) the
 * longest sequence, HTTP_MODEL_SEED replays a run (fast-check prints the seed and path of a
 * failure). The audit ran HTTP_MODEL_RUNS=300 and more, and HTTP_MODEL_COMMANDS=60, on PostgreSQL
 * and on PGlite. With DATABASE_URL the server runs on PostgreSQL in a schema of its own, else on
 * PGlite in a temporary folder.
 */

const RUNS = Number(process.env.HTTP_MODEL_RUNS ?? 6)
const COMMANDS = Number(process.env.HTTP_MODEL_COMMANDS ?? 25)
const SEED = process.env.HTTP_MODEL_SEED === undefined ? undefined : Number(process.env.HTTP_MODEL_SEED)

describe('the reference server over HTTP, against a model of sessions, messages and replies', () => {
  let storage: IsolatedStorage | undefined
  let service: ReferenceServer
  let platform: FakePlatform
  let runs = 0

  beforeAll(async () => {
    platform = await startFakePlatform()
    storage = await isolatedStorage('http-model')
    const { environment } = storage
    service = await startReferenceServer(readConfig({ PORT: '0', LOG_LEVEL: 'silent', ...environment }), {
      passwordHasher: createFakePasswordHasher(),
    })
  })

  afterAll(async () => {
    await service?.close()
    await platform?.close()
    await storage?.remove()
  })

  it(`keeps every session, message and reply the model expects (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.commands(modelCommands(), { maxCommands: COMMANDS, size: 'max' }),
        async (sequence) => {
          runs += 1
          const real = await setUpCompany(service.url, platform, runs)
          const model = newModel(runs)
          const world: World = { real, nodes: [real], services: [service] }
          await fc.asyncModelRun(() => ({ model, real: world }), sequence)
          await settle(world, model)
        },
      ),
      { numRuns: RUNS, ...(SEED === undefined ? {} : { seed: SEED }) },
    )
  }, 600_000)
})
