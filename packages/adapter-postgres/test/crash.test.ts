import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  type Clock,
  type Completion,
  createMemoryKnowledgeIndex,
  createSwitchboard,
  createSystemClock,
  type LlmProvider,
  type Storage,
  type Switchboard,
} from '@switchboard/core'
import { createRecordingConnector, seedChannel } from '@switchboard/core/testing'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createPgDb, createPostgresStorage, type Db } from '../src/index.js'
import { seedHandoffToHuman } from './support/seed-handoff-to-human.js'

const connectionString = process.env.DATABASE_URL
/** Renewed every third of it, so a worker whose timers run a second late still keeps its lease. */
const LEASE_MS = 2000
const worker = new URL('./support/hanging-worker.ts', import.meta.url).pathname
const transferWorker = new URL('./support/hanging-transfer-worker.ts', import.meta.url).pathname

/** Answers every message at once with a text that names it, so replies can be matched to messages. */
const answeringModel: LlmProvider = {
  name: 'answering',
  async complete(request): Promise<Completion> {
    const current = request.messages[request.messages.length - 1]
    return {
      text: `answer to ${current?.content}`,
      toolCalls: [],
      usage: { inputTokens: 1, outputTokens: 1 },
    }
  },
}

function startHangingWorker(schema: string) {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', worker], {
    env: { ...process.env, DATABASE_URL: connectionString, SCHEMA: schema, LEASE_MS: String(LEASE_MS) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const modelCalled = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /model-called (.*)\n/.exec(stdout)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code, signal) => reject(new Error(`worker exited (${code ?? signal}): ${stderr}`)))
  })
  return { child, modelCalled }
}

// Only a real server has other processes; CI always sets DATABASE_URL, so this never skips there.
describe.runIf(connectionString !== undefined && connectionString !== '')(
  'a worker process killed mid-turn',
  () => {
    const schema = `switchboard_crash_${randomBytes(6).toString('hex')}`
    let admin: Db
    let db: Db
    let storage: Storage
    const children: ChildProcess[] = []

    beforeAll(async () => {
      admin = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
      db = createPgDb({ connectionString, max: 10, options: `-c search_path=${schema}` })
      storage = await createPostgresStorage({ db })
    })

    afterAll(async () => {
      for (const child of children) child.kill('SIGKILL')
      await storage?.close()
      await db?.close()
      await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await admin?.close()
    })

    it('loses its job to another process once the lease runs out; the customer gets one reply per message', async () => {
      const { integration } = await seedChannel(storage)
      const switchboards: Switchboard[] = []
      // The channel as the customer sees it, shared by both switchboards of this process: each
      // sweeps the outbox every five polls, so the front sends a reply the survivor committed
      // whenever its sweep claims it before the survivor's own claim. Counted on the survivor's
      // connector alone, such a reply went missing ("expected 1 to be 2" on a loaded machine).
      const connector = createRecordingConnector()
      const start = (concurrency: number) => {
        const switchboard = createSwitchboard({
          storage,
          model: answeringModel,
          knowledge: createMemoryKnowledgeIndex(),
          connectors: [connector],
          leaseMs: LEASE_MS,
          pollMs: 100,
          concurrency,
        })
        switchboards.push(switchboard)
        return switchboard
      }
      try {
        const front = start(0)
        const receive = (text: string) =>
          front.ingest({ integrationId: integration.id, clientId: 'customer', text, externalId: text })
        const first = (await receive('first'))._unsafeUnwrap()

        const hanging = startHangingWorker(schema)
        children.push(hanging.child)
        expect(await hanging.modelCalled).toBe('first')
        // Arrives while the killed-to-be worker holds the session: it must wait for the first.
        const second = (await receive('second'))._unsafeUnwrap()

        // This process polls the queue the whole time; the worker's renewals keep it out for a
        // lease and a half, and the second message may not overtake the first.
        const survivor = start(2)
        // Named as they start: a read of each message here could answer out of order.
        const texts = new Map([
          [first.message.id, 'first'],
          [second.message.id, 'second'],
        ])
        const turns: { text: string; at: number }[] = []
        survivor.events.on('turn-started', ({ messageId }) => {
          turns.push({ text: texts.get(messageId) ?? messageId, at: Date.now() })
        })
        await new Promise((resolve) => setTimeout(resolve, 1.5 * LEASE_MS))
        expect(turns).toEqual([])

        hanging.child.kill('SIGKILL')
        const killedAt = Date.now()
        await expect
          .poll(() => connector.sent.length, { timeout: 15_000, interval: 50 })
          .toBe(2)
          .catch(async (error: unknown) => {
            // Say what the queue and the outbox held, so a failure tells whether a job or a reply
            // stopped, and where.
            const jobs = await db.query(
              `SELECT id, state, attempts, last_error, available_at, leased_until, lease_token IS NOT NULL AS leased
              FROM ${schema}.jobs ORDER BY id`,
            )
            const outbox = await db.query(
              `SELECT message_id, attempts, available_at, leased_until FROM ${schema}.outbox ORDER BY insertion`,
            )
            const messages = await storage.messages.list({ sessionId: first.session.id, limit: 10 })
            const replies = messages.map((message) => [message.role, message.text, message.delivery ?? null])
            throw new Error(
              `${error instanceof Error ? error.message : String(error)}; turns ${JSON.stringify(turns)}; at ${new Date().toISOString()} jobs ${JSON.stringify(jobs)}, outbox ${JSON.stringify(outbox)}, messages ${JSON.stringify(replies)}`,
            )
          })
        await survivor.idle()
        // A lease, a poll and some slack for a loaded machine.
        expect(turns[0]!.at - killedAt).toBeLessThan(LEASE_MS + 5_000)
        expect(turns.map((turn) => turn.text)).toEqual(['first', 'second'])

        expect(connector.sent.map((sent) => sent.text)).toEqual(['answer to first', 'answer to second'])
        const messages = await storage.messages.list({ sessionId: first.session.id, limit: 10 })
        expect(messages.map((message) => [message.role, message.text, message.delivery ?? null])).toEqual([
          ['customer', 'first', null],
          ['customer', 'second', null],
          ['agent', 'answer to first', 'sent'],
          ['agent', 'answer to second', 'sent'],
        ])
        const jobs = await db.query<{ state: string }>('SELECT state FROM jobs ORDER BY id')
        expect(jobs.map((job) => job.state)).toEqual(['done', 'done'])
        expect(await db.query('SELECT message_id FROM outbox')).toEqual([])
      } finally {
        await Promise.all(switchboards.map((switchboard) => switchboard.stop()))
      }
    }, 40_000)

    it("makes a transfer to a human from another process when the one that paused the session died before the platform's answer", async () => {
      const at = new Date()
      const { integration, human } = await seedHandoffToHuman(storage, at)
      const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', transferWorker], {
        env: {
          ...process.env,
          DATABASE_URL: connectionString,
          SCHEMA: schema,
          HUMAN_AGENT_ID: String(human.id),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      children.push(child)
      let stdout = ''
      let stderr = ''
      child.stderr!.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const output = (line: string) =>
        new Promise<void>((resolve, reject) => {
          child.stdout!.on('data', (chunk: Buffer) => {
            stdout += chunk.toString()
            if (stdout.includes(`${line}\n`)) resolve()
          })
          child.once('exit', (code, signal) =>
            reject(new Error(`worker exited (${code ?? signal}): ${stderr}`)),
          )
        })
      const ready = output('ready')
      const transferCalled = output('transfer-called')
      await ready

      const switchboards: Switchboard[] = []
      try {
        // Takes the message in; the worker process runs its turn.
        const front = createSwitchboard({
          storage,
          model: answeringModel,
          knowledge: createMemoryKnowledgeIndex(),
          connectors: [createRecordingConnector({ humanTransfer: true })],
          concurrency: 0,
        })
        switchboards.push(front)
        const ingested = await front.ingest({
          integrationId: integration.id,
          clientId: 'customer',
          text: 'I want to talk to a person',
        })
        const sessionId = ingested._unsafeUnwrap().session.id
        await transferCalled
        await front.stop()
        child.kill('SIGKILL')
        expect((await storage.sessions.get({ id: sessionId }))?.state).toBe('paused')

        // Two minutes ahead, past the dead process's claim: its first sweep may take the transfer.
        const system = createSystemClock()
        const ahead: Clock = { now: () => new Date(Date.now() + 120_000), setTimer: system.setTimer }
        const platform = createRecordingConnector({ humanTransfer: true, externalReference: 'request-42' })
        const survivor = createSwitchboard({
          storage,
          model: answeringModel,
          knowledge: createMemoryKnowledgeIndex(),
          connectors: [platform],
          clock: ahead,
          pollMs: 100,
          concurrency: 0,
        })
        switchboards.push(survivor)
        await expect.poll(() => platform.transfers.length, { timeout: 15_000, interval: 50 }).toBe(1)
        await survivor.idle()

        expect(platform.transfers).toEqual([{ sessionId, groupId: 7, systemMessage: false, sentBefore: 0 }])
        const session = await storage.sessions.get({ id: sessionId })
        expect(session?.state).toBe('paused')
        expect(session?.pauseState?.externalReference).toBe('request-42')
        const messages = await storage.messages.list({ sessionId, limit: 10 })
        expect(messages.map((message) => [message.role, message.text, message.delivery ?? null])).toEqual([
          ['customer', 'I want to talk to a person', null],
          ['system', 'A colleague will take over.', 'sent'],
        ])
        expect(await db.query('SELECT id FROM human_transfers')).toEqual([])
      } finally {
        await Promise.all(switchboards.map((switchboard) => switchboard.stop()))
      }
    }, 40_000)
  },
)
