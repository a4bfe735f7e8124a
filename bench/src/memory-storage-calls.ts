import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { agentInputSchema, createMemoryStorage, type Session, type Storage } from '@switchboard/core'

/**
 * The storage calls of one core-turn scenario A turn, replayed on the memory storage without the
 * runtime around them, so a change to the memory storage shows up clearly instead of inside the
 * noise of a whole turn. The sequence is the one a real turn made (logged from core-turn in
 * session 5, less the delivery's reads and transaction that session 6 removed). Prints CPU µs
 * per replayed turn and per kind of call; CPU rather than wall time, as the machine is often
 * shared.
 *
 *   npx tsx --conditions=source bench/src/memory-storage-calls.ts   core from its sources
 *   npx tsx bench/src/memory-storage-calls.ts                       core from dist (build it first)
 */

const COMPANY_ID = 1
const ROUNDS = 9
const ROUND_MS = 300
const WARM_UP_MS = 1500

interface Fixture {
  readonly storage: Storage
  readonly integrationId: string
  readonly agentId: number
  next: number
  /** The one session the save row keeps saving. */
  saved: Session | null
}

async function openFixture(): Promise<Fixture> {
  const storage = createMemoryStorage()
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'support', systemPrompt: 'You answer customers of the pro plan.' }),
    companyId: COMPANY_ID,
    at: new Date(),
  })
  const integration = await storage.integrations.create({
    companyId: COMPANY_ID,
    type: 'bench',
    name: 'bench',
    active: true,
    entryAgentId: agent.id,
    config: {},
    webhookSecret: null,
    at: new Date(),
  })
  return { storage, integrationId: integration.id, agentId: agent.id, next: 0, saved: null }
}

function newSession(
  fixture: Fixture,
  clientId: string,
  at: string,
): Parameters<Storage['sessions']['create']>[0] {
  const { integrationId, agentId } = fixture
  return {
    id: randomUUID(),
    companyId: COMPANY_ID,
    integrationId,
    customer: { clientId },
    state: 'ongoing',
    activeAgentId: agentId,
    entryAgentId: agentId,
    metadata: {
      agentPath: [{ agentId, agentName: 'support', timestamp: at, via: 'initial' }],
      sharedContext: { facts: {}, journey: [] },
      errors: [],
    },
    createdAt: at,
    updatedAt: at,
  }
}

/** What `ingest`, `processJob` and the outbox delivery ask of the storage for one message. */
async function turn(fixture: Fixture): Promise<void> {
  const { storage, integrationId, agentId } = fixture
  const clientId = `customer-${fixture.next++}`
  const now = new Date()
  const at = now.toISOString()

  const integration = (await storage.integrations.get({ id: integrationId }))!
  const { session, message } = await storage.transaction(async (tx) => {
    let session = await tx.sessions.findOpen({ integrationId, clientId })
    if (session === null) {
      await tx.agents.get({ companyId: COMPANY_ID, id: integration.entryAgentId })
      session = await tx.sessions.create(newSession(fixture, clientId, at))
    }
    const message = await tx.messages.insert({
      id: randomUUID(),
      companyId: COMPANY_ID,
      sessionId: session.id,
      integrationId,
      role: 'customer',
      text: 'Hi, I am Ann. What does the pro plan cost?',
      at: now,
    })
    await tx.agents.get({ companyId: COMPANY_ID, id: session.activeAgentId })
    await tx.jobs.enqueue({
      companyId: COMPANY_ID,
      sessionId: session.id,
      messageId: message.id,
      availableAt: now,
    })
    return { session, message }
  })

  const lease = (await storage.jobs.lease({ now, leaseMs: 30_000, token: randomUUID() }))!
  const started = (await storage.sessions.get({ id: lease.sessionId }))!
  await storage.messages.get({ id: lease.messageId })
  await storage.agents.get({ companyId: COMPANY_ID, id: started.activeAgentId })
  await storage.jobs.lease({ now, leaseMs: 30_000, token: randomUUID() })
  await storage.integrations.get({ id: started.integrationId })
  await storage.messages.history({ sessionId: session.id, currentSequence: message.sequence, limit: 20 })

  const replyId = randomUUID()
  await storage.transaction(async (tx) => {
    const current = (await tx.sessions.get({ id: session.id }))!
    await tx.jobs.complete({ jobId: lease.jobId, token: lease.token })
    await tx.billing.recordUsage({
      id: randomUUID(),
      companyId: COMPANY_ID,
      sessionId: session.id,
      model: 'gpt-4o-mini',
      inputTokens: 10,
      outputTokens: 5,
      costUsd: 0.000_01,
      at: now,
    })
    await tx.messages.insert({
      id: replyId,
      companyId: COMPANY_ID,
      sessionId: session.id,
      integrationId,
      role: 'agent',
      text: 'Hi Ann, the pro plan is 20 USD a month.',
      agentId,
      at: now,
      delivery: 'pending',
    })
    await tx.outbox.add({
      messageId: replyId,
      sessionId: session.id,
      companyId: COMPANY_ID,
      integrationId,
      availableAt: now,
    })
    const next: Session = {
      ...current,
      metadata: { ...current.metadata, routing: { reason: 'resolved', depth: 0, at } },
      updatedAt: at,
    }
    await tx.sessions.save(next)
  })

  const leaseToken = randomUUID()
  await storage.outbox.claim({ messageId: replyId, now, leaseMs: 30_000, leaseToken })
  await storage.messages.get({ id: replyId })
  await storage.jobs.lease({ now, leaseMs: 30_000, token: randomUUID() })
  await storage.outbox.remove({ messageId: replyId, leaseToken, delivery: 'sent' })
}

/** Median CPU µs per call of `body`, over rounds that each start on a fresh fixture. */
async function measure(body: (fixture: Fixture) => Promise<unknown>): Promise<number> {
  const warmUpEnd = performance.now() + WARM_UP_MS
  let fixture = await openFixture()
  while (performance.now() < warmUpEnd) for (let index = 0; index < 100; index++) await body(fixture)
  const perCall: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    fixture = await openFixture()
    let calls = 0
    const cpuStart = process.cpuUsage()
    const start = performance.now()
    while (performance.now() - start < ROUND_MS) {
      for (let index = 0; index < 100; index++) await body(fixture)
      calls += 100
    }
    const cpu = process.cpuUsage(cpuStart)
    perCall.push((cpu.user + cpu.system) / calls)
  }
  perCall.sort((left, right) => left - right)
  return perCall[Math.floor(perCall.length / 2)]!
}

async function main(): Promise<void> {
  const rows: Array<[string, (fixture: Fixture) => Promise<unknown>]> = [
    ['storage calls of one turn (scenario A)', turn],
    ['empty transaction', (fixture) => fixture.storage.transaction(async () => undefined)],
    ['sessions.get outside a transaction', (fixture) => fixture.storage.sessions.get({ id: 'none' })],
    [
      'sessions.save outside a transaction',
      async (fixture) => {
        const at = '2025-01-01T00:00:00.000Z'
        fixture.saved ??= await fixture.storage.sessions.create(newSession(fixture, 'regular', at))
        fixture.saved = await fixture.storage.sessions.save({ ...fixture.saved, updatedAt: at })
      },
    ],
  ]
  console.log(
    `memory storage calls, CPU µs, median of ${ROUNDS} rounds of ${ROUND_MS} ms (node ${process.version})`,
  )
  for (const [label, body] of rows)
    console.log(`${label.padEnd(42)} ${(await measure(body)).toFixed(2).padStart(8)}`)
}

await main()
