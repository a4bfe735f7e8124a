import { randomUUID } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import type {
  IngestDecision,
  IngestOptions,
  IngestResult,
  Integration,
  MessageRepository,
  NewWebhookLog,
  Storage,
} from '../src/index.js'
import { type ConversationHarness, createConversationHarness, reply } from '../src/testing/index.js'
import { recordRoundTrips, recordStorageTrips } from './support/round-trips.js'

let harness: ConversationHarness
afterEach(async () => {
  await harness.finish()
})

/** How many customer messages each transaction stored, to tell messages stored together from alone. */
function recordStores(storage: Storage): number[] {
  const stores: number[] = []
  const transaction = storage.transaction.bind(storage)
  ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) =>
    transaction(async (tx) => {
      let stored = 0
      const messages: MessageRepository = {
        ...tx.messages,
        insert: (message, options) => {
          if (message.role === 'customer') stored += 1
          return tx.messages.insert(message, options)
        },
        insertMany: (batch, options) => {
          stored += batch.length
          return tx.messages.insertMany(batch, options)
        },
      }
      const result = await fn({ ...tx, messages })
      if (stored > 0) stores.push(stored)
      return result
    })
  return stores
}

async function integrationOf(storage: Storage, id: string): Promise<Integration> {
  const integration = await storage.integrations.get({ id })
  if (integration === null) throw new Error(`no integration ${id}`)
  return integration
}

function logOf(integration: Integration, result: IngestDecision, id = randomUUID()): NewWebhookLog {
  return {
    id,
    companyId: integration.companyId,
    integrationId: integration.id,
    receivedAt: new Date(),
    httpStatus: 200,
    outcome: result.duplicate ? 'duplicate' : result.queued ? 'queued' : 'stored_paused',
    sessionId: result.session.id,
    messageId: result.messageId,
  }
}

function decisionOf({ session, message, duplicate, queued }: IngestResult): IngestDecision {
  return { session, messageId: message.id, duplicate, queued }
}

async function logOutcomes(storage: Storage, integration: Integration): Promise<string[]> {
  const page = await storage.webhookLogs.list({
    companyId: integration.companyId,
    integrationId: integration.id,
    limit: 100,
  })
  return page.items.map((entry) => entry.outcome).reverse()
}

describe('ingest', () => {
  it('uses the integration its caller read, and stores the webhook log entry with the message', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi back'), reply('and again'))
    const integration = await integrationOf(harness.storage, harness.integrationId)
    const address = { integrationId: integration.id, clientId: 'dora', text: 'hi', externalId: 'ext-1' }
    const options: IngestOptions = { integration, webhookLog: (result) => logOf(integration, result) }

    expect((await harness.switchboard.ingest(address, options))._unsafeUnwrap().queued).toBe(true)
    expect((await harness.switchboard.ingest(address, options))._unsafeUnwrap().duplicate).toBe(true)
    expect(await logOutcomes(harness.storage, integration)).toEqual(['queued', 'duplicate'])

    // The integration given is the one used: as given it is switched off, so nothing is stored.
    const switchedOff = await harness.switchboard.ingest(
      { ...address, externalId: 'ext-2' },
      { integration: { ...integration, active: false } },
    )
    expect(switchedOff._unsafeUnwrapErr().code).toBe('INTEGRATION_INACTIVE')
    await expect(
      harness.switchboard.ingest({ ...address, integrationId: '999' }, { integration }),
    ).rejects.toThrow(TypeError)

    // The log entry cannot be stored (its id is taken): the message is not stored either.
    const taken = randomUUID()
    await harness.storage.webhookLogs.add({
      ...logOf(integration, decisionOf(await harness.customer('dora').sends('x'))),
      id: taken,
    })
    await expect(
      harness.switchboard.ingest(
        { ...address, clientId: 'eve', externalId: 'ext-3' },
        { integration, webhookLog: (result) => logOf(integration, result, taken) },
      ),
    ).rejects.toThrow()
    expect(
      await harness.storage.sessions.findOpen({ integrationId: integration.id, clientId: 'eve' }),
    ).toBeNull()
    expect(
      await harness.storage.messages.findByExternalId({ integrationId: integration.id, externalId: 'ext-3' }),
    ).toBeNull()
    await harness.switchboard.idle()
    expect(harness.customer('dora').replies()).toEqual(['hi back', 'and again'])
  })

  it('refuses, storing nothing, a message whose caller read the integration before it changed', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), ...Array.from({ length: 3 }, () => reply('ok')))
    const copy = await integrationOf(harness.storage, harness.integrationId)
    const remembered = await harness.switchboard.integration(copy.id, { remembered: true })
    expect(remembered).toEqual(copy)
    const updated = await harness.storage.integrations.update({
      companyId: copy.companyId,
      id: copy.id,
      patch: { webhookSecret: 'a-rotated-secret-0123456789' },
      at: new Date(Date.parse(copy.updatedAt) + 1000),
    })
    const say = (clientId: string, integration?: typeof copy) =>
      harness.switchboard.ingest(
        { integrationId: copy.id, clientId, text: 'hello' },
        integration === undefined ? {} : { integration },
      )

    // Alone, then in a batch (the first stored alone, the other three together, then one by one
    // once the batch finds a copy out of date): only the callers holding the old copy are refused.
    const annResult = await say('ann', copy)
    expect(annResult.isErr()).toBe(true)
    expect(annResult._unsafeUnwrapErr().code).toBe('CONFLICT')
    const [bob, cleo, dora, eve] = await Promise.all([
      say('bob', updated!),
      say('cleo', copy),
      say('dora', updated!),
      say('eve'),
    ])
    expect(cleo!.isErr()).toBe(true)
    expect(cleo!._unsafeUnwrapErr().code).toBe('CONFLICT')
    for (const stored of [bob, dora, eve]) expect(stored!._unsafeUnwrap().queued).toBe(true)
    for (const clientId of ['ann', 'cleo']) {
      expect(await harness.storage.sessions.findOpen({ integrationId: copy.id, clientId })).toBeNull()
    }
    // The remembered copy is the last one read: refreshed by a fresh read, not by the update.
    expect(await harness.switchboard.integration(copy.id, { remembered: true })).toEqual(copy)
    expect(await harness.switchboard.integration(copy.id)).toEqual(updated)
    expect(await harness.switchboard.integration(copy.id, { remembered: true })).toEqual(updated)
  })

  it("stores a new customer's session with the message and its job, in one round trip", async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('ok'))
    const transactions = recordRoundTrips(harness.storage)
    const ingested = await harness.switchboard.ingest({
      integrationId: harness.integrationId,
      clientId: 'ann',
      text: 'hello',
    })
    expect(transactions[0]).toEqual([
      ['sessions.findOpen', 'agents.get'],
      // Leased to this process's free worker, which runs it without looking for it.
      ['sessions.create', 'messages.insert', 'jobs.enqueueLeased'],
    ])
    const { session, message, queued } = ingested._unsafeUnwrap()
    expect(queued).toBe(true)
    expect(session).toEqual(await harness.storage.sessions.get({ id: session.id }))
    expect(message.sessionId).toBe(session.id)
    await harness.switchboard.idle()
    expect(harness.customer('ann').replies()).toEqual(['ok'])
  })

  it('sends a message, its job and its log entry together, alone or in a batch', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), ...Array.from({ length: 3 }, () => reply('ok')))
    const integration = await integrationOf(harness.storage, harness.integrationId)
    const transactions = recordRoundTrips(harness.storage)
    const webhookLog = (decision: IngestDecision) => logOf(integration, decision)
    await Promise.all(
      ['ann', 'bob', 'cleo'].map((clientId) =>
        harness.switchboard.ingest(
          { integrationId: integration.id, clientId, text: 'hello' },
          { integration, webhookLog },
        ),
      ),
    )
    const writes = (trip: string[]) =>
      trip.filter((call) => /^(messages\.insert|jobs\.enqueue|webhookLogs\.add)/.test(call)).length
    // The first alone, the other two together; each writes its rows in one round trip.
    expect(transactions).toHaveLength(2)
    for (const trips of transactions) {
      expect(trips.map(writes).filter((count) => count > 0)).toEqual([3])
    }
    await harness.switchboard.idle()
    expect(await logOutcomes(harness.storage, integration)).toEqual(['queued', 'queued', 'queued'])
  })

  it('stores messages that arrive together in one transaction, each as if it had come alone', async () => {
    harness = await createConversationHarness({
      agents: { solo: {}, desk: { kind: 'human' } },
      entry: 'solo',
    })
    const solo = harness.agent('solo')
    const integration = await integrationOf(harness.storage, harness.integrationId)
    const humanLine = await harness.storage.integrations.create({
      companyId: integration.companyId,
      type: integration.type,
      name: 'human line',
      active: true,
      entryAgentId: harness.agent('desk'),
      config: {},
      webhookSecret: null,
      at: new Date(),
    })
    const closedLine = await harness.storage.integrations.create({
      companyId: integration.companyId,
      type: integration.type,
      name: 'closed line',
      active: false,
      entryAgentId: solo,
      config: {},
      webhookSecret: null,
      at: new Date(),
    })
    // Known before the burst: a message already stored, and a paused customer.
    harness.model.script(solo, reply('to old'), reply('to paused'))
    await harness.customer('old').sends('earlier', { externalId: 'seen-before' })
    const paused = await harness.customer('paused').sends('hello')
    await harness.switchboard.idle()
    await harness.switchboard.sessions.pause({
      companyId: integration.companyId,
      sessionId: paused.session.id,
    })
    const ann = { integrationId: integration.id, clientId: 'ann' }
    const hana = { integrationId: integration.id, clientId: 'hana' }
    const lia = { integrationId: integration.id, clientId: 'lia' }
    // Turns of different sessions may run in any order: every answer is the same.
    harness.model.script(solo, ...Array.from({ length: 9 }, () => reply('ok')))
    const stores = recordStores(harness.storage)
    const webhookLog = (decision: IngestDecision) => logOf(integration, decision)

    const results = await Promise.all([
      harness.switchboard.ingest({ ...ann, text: 'first', externalId: 'a-1' }, { webhookLog }),
      harness.switchboard.ingest(
        { ...ann, text: 'second', channelId: 'c-2', transport: 'sms' },
        { webhookLog },
      ),
      harness.switchboard.ingest({ ...ann, text: 'first again', externalId: 'a-1' }, { webhookLog }),
      harness.switchboard.ingest({ ...ann, text: 'third', externalId: 'a-3' }, { webhookLog }),
      harness.switchboard.ingest({
        integrationId: integration.id,
        clientId: 'old',
        text: 'x',
        externalId: 'seen-before',
      }),
      harness.switchboard.ingest({ integrationId: integration.id, clientId: 'paused', text: 'still there?' }),
      harness.switchboard.ingest({ integrationId: humanLine.id, clientId: 'cleo', text: 'a person, please' }),
      harness.switchboard.ingest({ integrationId: closedLine.id, clientId: 'dan', text: 'hello?' }),
      harness.switchboard.ingest({ integrationId: '424242', clientId: 'eve', text: 'hello?' }),
      harness.switchboard.ingest({ integrationId: integration.id, clientId: 'bob', text: 'hi' }),
      harness.switchboard.ingest({ ...ann, text: 'fourth' }, { webhookLog }),
      harness.switchboard.ingest({ ...hana, text: 'h one', externalId: 'h-1' }),
      harness.switchboard.ingest({ ...hana, text: 'h one again', externalId: 'h-1' }),
      harness.switchboard.ingest({ ...hana, text: 'h two' }),
      harness.switchboard.ingest({ ...lia, text: 'from the app', channelId: 'l-1' }),
      harness.switchboard.ingest({ ...lia, text: 'from the web', channelId: 'l-2' }),
    ])
    await harness.switchboard.idle()

    // The first was stored alone; the rest, which came while it was, together (duplicates and
    // refusals store nothing).
    expect(stores).toEqual([1, 10])
    const [
      first,
      second,
      firstAgain,
      third,
      old,
      stillThere,
      cleo,
      dan,
      eve,
      bob,
      fourth,
      hanaOne,
      hanaAgain,
      hanaTwo,
      liaApp,
      liaWeb,
    ] = results
    const annSession = first!._unsafeUnwrap().session.id
    for (const result of [second, third, fourth]) {
      expect(result!._unsafeUnwrap()).toMatchObject({
        duplicate: false,
        queued: true,
        session: { id: annSession },
      })
    }
    expect(firstAgain!._unsafeUnwrap()).toMatchObject({
      duplicate: true,
      queued: false,
      message: { id: first!._unsafeUnwrap().message.id },
    })
    expect(old!._unsafeUnwrap()).toMatchObject({ duplicate: true, message: { text: 'earlier' } })
    expect(stillThere!._unsafeUnwrap()).toMatchObject({
      duplicate: false,
      queued: false,
      session: { state: 'paused' },
    })
    expect(cleo!._unsafeUnwrap()).toMatchObject({ duplicate: false, queued: false })
    expect(dan!._unsafeUnwrapErr().code).toBe('INTEGRATION_INACTIVE')
    expect(eve!._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect(bob!._unsafeUnwrap().queued).toBe(true)

    const customer = harness.customer('ann')
    expect(
      (await harness.storage.messages.list({ sessionId: annSession, limit: 100 }))
        .filter((message) => message.role === 'customer')
        .map((message) => message.text),
    ).toEqual(['first', 'second', 'third', 'fourth'])
    expect(customer.replies()).toEqual(['ok', 'ok', 'ok', 'ok'])
    expect((await harness.storage.sessions.get({ id: annSession }))?.customer).toEqual({
      clientId: 'ann',
      channelId: 'c-2',
      transport: 'sms',
    })
    expect(harness.customer('bob').replies()).toEqual(['ok'])
    // A customer new to the batch gets one session; a repeat within the batch is a duplicate.
    const hanaSession = hanaOne!._unsafeUnwrap().session.id
    expect(hanaTwo!._unsafeUnwrap().session.id).toBe(hanaSession)
    expect(hanaAgain!._unsafeUnwrap()).toMatchObject({
      duplicate: true,
      session: { id: hanaSession },
      message: { id: hanaOne!._unsafeUnwrap().message.id },
    })
    expect(
      (await harness.storage.messages.list({ sessionId: hanaSession, limit: 100 }))
        .filter((message) => message.role === 'customer')
        .map((message) => message.text),
    ).toEqual(['h one', 'h two'])
    expect(harness.customer('hana').replies()).toEqual(['ok', 'ok'])
    // Each result shows the session as its own message left it: the customer's channel then.
    expect(liaApp!._unsafeUnwrap().session.customer.channelId).toBe('l-1')
    expect(liaWeb!._unsafeUnwrap().session.customer.channelId).toBe('l-2')
    expect(liaWeb!._unsafeUnwrap().session.id).toBe(liaApp!._unsafeUnwrap().session.id)
    expect(await logOutcomes(harness.storage, integration)).toEqual([
      'queued',
      'queued',
      'duplicate',
      'queued',
      'queued',
    ])
  })

  it('hands the first job of each new session in a batch to a free worker, which reads nothing back', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), ...Array.from({ length: 4 }, () => reply('ok')))
    const leased: unknown[] = []
    const lease = harness.storage.jobs.lease
    harness.storage.jobs.lease = async (options) => {
      const found = await lease(options)
      if (found !== null) leased.push(found)
      return found
    }
    const transactions = recordRoundTrips(harness.storage)
    const outside = recordStorageTrips(harness.storage)
    const stores = recordStores(harness.storage)

    await Promise.all(
      ['ann', 'bob', 'cleo', 'bob'].map((clientId) =>
        harness.switchboard.ingest({ integrationId: harness.integrationId, clientId, text: 'hello' }),
      ),
    )
    await harness.switchboard.idle()

    // ann alone, the others together: bob's two messages, cleo's one.
    expect(stores[0]).toBe(1)
    expect(stores[1]).toBe(3)
    expect(transactions.filter((trips) => trips.flat().includes('jobs.enqueueManyLeased'))).toHaveLength(1)
    for (const clientId of ['ann', 'cleo']) expect(harness.customer(clientId).replies()).toEqual(['ok'])
    expect(harness.customer('bob').replies()).toEqual(['ok', 'ok'])
    // Only bob's second job, behind his first, was leased; no turn read its session back.
    expect(leased).toHaveLength(1)
    expect(outside.flat().filter((call) => call === 'messages.history')).toHaveLength(1)
  })

  it('stores messages one by one when their shared transaction fails, and only the bad one fails', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const integration = await integrationOf(harness.storage, harness.integrationId)
    const taken = randomUUID()
    harness.model.script(harness.agent('solo'), reply('ok'), reply('ok'), reply('ok'))
    const opener = await harness.customer('opener').sends('first')
    await harness.storage.webhookLogs.add({ ...logOf(integration, decisionOf(opener)), id: taken })
    const stores = recordStores(harness.storage)

    const [fay, bad, gus] = await Promise.allSettled([
      harness.switchboard.ingest({ integrationId: integration.id, clientId: 'fay', text: 'hi' }),
      harness.switchboard.ingest(
        { integrationId: integration.id, clientId: 'hal', text: 'hi' },
        { webhookLog: (result) => logOf(integration, result, taken) },
      ),
      harness.switchboard.ingest({ integrationId: integration.id, clientId: 'gus', text: 'hi' }),
    ])
    await harness.switchboard.idle()

    // fay alone; hal and gus together, which fails on hal's log entry; then each alone again.
    expect(stores).toEqual([1, 1])
    expect(fay.status === 'fulfilled' && fay.value.isOk()).toBe(true)
    expect(gus.status === 'fulfilled' && gus.value.isOk()).toBe(true)
    expect(bad.status).toBe('rejected')
    expect(
      await harness.storage.sessions.findOpen({ integrationId: integration.id, clientId: 'hal' }),
    ).toBeNull()
    expect(harness.customer('fay').replies()).toEqual(['ok'])
    expect(harness.customer('gus').replies()).toEqual(['ok'])
  })
})

describe('a store that loses races to other writers', () => {
  // Another process opening the customer's session first, or closing it while the message is
  // inserted, fails the store's transaction; ingest tries again. Under a storm of closes from
  // another process, three attempts lost in a row (a webhook answered 500 about once in four runs
  // of 80 messages); the attempts are now spaced out and there are more of them.
  /** Fails the storage's first `failures` transactions, the later ones run as they are. */
  const failingStores = (storage: Storage, failures: number): { failed: number } => {
    const seen = { failed: 0 }
    const transaction = storage.transaction.bind(storage)
    ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) =>
      transaction(async (tx) => {
        const result = await fn(tx)
        // Thrown after the store's writes, so the transaction rolls them back, as a lost race does.
        if (seen.failed < failures) {
          seen.failed += 1
          throw new Error('another writer got there first')
        }
        return result
      })
    return seen
  }

  it('stores the message after five lost races in a row, once, and answers it', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('here'))
    const seen = failingStores(harness.storage, 5)

    const result = await harness.switchboard.ingest({
      integrationId: harness.integrationId,
      clientId: 'ivy',
      text: 'hello?',
    })
    await harness.switchboard.idle()

    expect(result.isOk()).toBe(true)
    expect(seen.failed).toBe(5)
    expect(harness.customer('ivy').replies()).toEqual(['here'])
    const session = await harness.storage.sessions.findOpen({
      integrationId: harness.integrationId,
      clientId: 'ivy',
    })
    expect(await harness.storage.messages.list({ sessionId: session!.id, limit: 10 })).toHaveLength(2)
  })

  it('gives up after six attempts, with nothing stored', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const seen = failingStores(harness.storage, Number.POSITIVE_INFINITY)

    await expect(
      harness.switchboard.ingest({ integrationId: harness.integrationId, clientId: 'jan', text: 'hi' }),
    ).rejects.toThrow('another writer got there first')

    expect(seen.failed).toBe(6)
    expect(
      await harness.storage.sessions.findOpen({ integrationId: harness.integrationId, clientId: 'jan' }),
    ).toBeNull()
  })
})

describe('a store that committed but answered with an error', () => {
  // PostgreSQL may commit and lose the connection before it says so; ingest then tries again.
  it("gives back the new session's first job it had leased to itself, so it runs without waiting out the lease", async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('first'), reply('second'))
    const storage = harness.storage
    const transaction = storage.transaction.bind(storage)
    let failOnce = true
    ;(storage as { transaction: Storage['transaction'] }).transaction = async (fn) => {
      const result = await transaction(fn)
      if (!failOnce) return result
      failOnce = false
      throw new Error('connection lost during COMMIT')
    }
    const ingested = await harness.switchboard.ingest({
      integrationId: harness.integrationId,
      clientId: 'ann',
      text: 'hello',
    })
    expect(ingested.isOk()).toBe(true)
    // The manual clock stands still: a job still leased for 55 s would never run.
    await harness.switchboard.idle()
    // The retry stored the message again (no external id tells them apart); both are answered.
    expect(harness.customer('ann').replies()).toEqual(['first', 'second'])
  })
})

describe('a batch whose store committed but answered with an error', () => {
  it('gives back the jobs it had leased to its workers once the messages were stored again one by one', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), ...Array.from({ length: 5 }, () => reply('ok')))
    const storage = harness.storage
    const transaction = storage.transaction.bind(storage)
    let failOnce = true
    ;(storage as { transaction: Storage['transaction'] }).transaction = async (fn) => {
      let batch = false
      const result = await transaction((tx) =>
        fn({
          ...tx,
          messages: {
            ...tx.messages,
            insertMany: (messages, options) => {
              batch = true
              return tx.messages.insertMany(messages, options)
            },
          },
        }),
      )
      // The batch of bob and cleo, stored while ann's message was.
      if (!batch || !failOnce) return result
      failOnce = false
      throw new Error('connection lost during COMMIT')
    }
    const results = await Promise.all(
      ['ann', 'bob', 'cleo'].map((clientId) =>
        harness.switchboard.ingest({ integrationId: harness.integrationId, clientId, text: 'hello' }),
      ),
    )
    expect(results.every((result) => result.isOk())).toBe(true)
    // The manual clock stands still: a job still leased for 55 s would never run.
    await harness.switchboard.idle()
    // The batch did commit; the one-by-one retries stored bob's and cleo's messages again.
    expect(harness.customer('ann').replies()).toEqual(['ok'])
    expect(harness.customer('bob').replies()).toEqual(['ok', 'ok'])
    expect(harness.customer('cleo').replies()).toEqual(['ok', 'ok'])
  })
})

/** The storage's first transaction waits until the returned function is called, as one waiting for a lock would. */
function holdFirstTransaction(storage: Storage): () => void {
  let release = () => {}
  const gate = new Promise<void>((resolve) => {
    release = resolve
  })
  const transaction = storage.transaction.bind(storage)
  let calls = 0
  ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) => {
    calls += 1
    return calls === 1 ? gate.then(() => transaction(fn)) : transaction(fn)
  }
  return release
}

describe('a stuck store', () => {
  it('does not hold back the messages that arrive behind it for more than 100 ms', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('ok'), reply('ok'), reply('ok'))
    const release = holdFirstTransaction(harness.storage)
    const address = (clientId: string) => ({ integrationId: harness.integrationId, clientId, text: 'hi' })
    const stuck = harness.switchboard.ingest(address('ida'))
    let behindDone = false
    const behind = Promise.all([
      harness.switchboard.ingest(address('jo')),
      harness.switchboard.ingest(address('kim')),
    ])
    void behind.then(() => {
      behindDone = true
    })

    await harness.clock.advance(99)
    expect(behindDone).toBe(false)
    await harness.clock.advance(1)
    const stored = await behind
    expect(stored.map((result) => result._unsafeUnwrap().session.customer.clientId)).toEqual(['jo', 'kim'])

    release()
    expect((await stuck)._unsafeUnwrap().duplicate).toBe(false)
    await harness.switchboard.idle()
    expect(['ida', 'jo', 'kim'].map((clientId) => harness.customer(clientId).replies())).toEqual([
      ['ok'],
      ['ok'],
      ['ok'],
    ])
  })
  it("keeps a customer's messages in the order they came when the store of the first is stuck", async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('ok'), reply('ok'), reply('ok'))
    const release = holdFirstTransaction(harness.storage)
    const message = (clientId: string, text: string) => ({
      integrationId: harness.integrationId,
      clientId,
      text,
    })
    const first = harness.switchboard.ingest(message('ida', 'one'))
    let secondDone = false
    const second = harness.switchboard.ingest(message('ida', 'two'))
    void second.then(() => {
      secondDone = true
    })
    const other = harness.switchboard.ingest(message('jo', 'hi'))

    await harness.clock.advance(100)
    // Another customer's message does not wait for the stuck store; ida's second waits for her first.
    expect((await other)._unsafeUnwrap().session.customer.clientId).toBe('jo')
    expect(secondDone).toBe(false)

    release()
    await Promise.all([first, second])
    await harness.switchboard.idle()
    const texts = (await harness.customer('ida').messages())
      .filter((stored) => stored.role === 'customer')
      .map((stored) => stored.text)
    expect(texts).toEqual(['one', 'two'])
  })
})

describe('reading integrations', () => {
  it('answers reads made at the same time with one query, each with its own integration', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    const storage = harness.storage
    const second = await storage.integrations.create({
      ...(await integrationOf(storage, harness.integrationId)),
      name: 'second',
      at: new Date(),
    })
    const reads: string[][] = []
    const getMany = storage.integrations.getMany
    ;(storage.integrations as { getMany: typeof getMany }).getMany = (options) => {
      reads.push([...options.ids])
      return getMany(options)
    }

    const found = await Promise.all(
      [harness.integrationId, second.id, 'nope', harness.integrationId, second.id].map((id) =>
        harness.switchboard.integration(id),
      ),
    )

    expect(found.map((integration) => integration?.id ?? null)).toEqual([
      harness.integrationId,
      second.id,
      null,
      harness.integrationId,
      second.id,
    ])
    // The first read alone; every key asked for while it ran in the next, once, even one just read:
    // no caller gets a value read before it asked.
    expect(reads).toEqual([[harness.integrationId], [second.id, 'nope', harness.integrationId]])

    const failure = new Error('storage down')
    ;(storage.integrations as { getMany: typeof getMany }).getMany = () => Promise.reject(failure)
    await expect(harness.switchboard.integration(second.id)).rejects.toBe(failure)
  })
})

describe('a message from another channel while the session is being saved by others', () => {
  // Every attempt of the store loses the race for the session (a turn committing, another message
  // of the customer): the session's save, to follow the customer to the new channel, finds the
  // session changed. The message must still be stored, not refused with a 500 after three tries.
  it('is stored on the session as it is now, on the channel it came from', async () => {
    harness = await createConversationHarness({ agents: { solo: {} }, entry: 'solo' })
    harness.model.script(harness.agent('solo'), reply('hi'), reply('hi again'))
    const storage = harness.storage
    const opened = (
      await harness.switchboard.ingest({
        integrationId: harness.integrationId,
        clientId: 'ann',
        text: 'hello',
        channelId: 'sms',
      })
    )._unsafeUnwrap()
    await harness.switchboard.idle()
    const transaction = storage.transaction.bind(storage)
    let raced = 0
    let storing = true
    ;(storage as { transaction: Storage['transaction'] }).transaction = (fn) =>
      transaction(async (tx) => {
        let racing = true
        const save: typeof tx.sessions.save = async (session) => {
          if (storing && racing && session.id === opened.session.id) {
            racing = false
            raced += 1
            // Another writer saved the session just before: this save finds its version gone.
            const current = await tx.sessions.get({ id: session.id })
            await tx.sessions.save({ ...current!, updatedAt: new Date().toISOString() })
          }
          return tx.sessions.save(session)
        }
        return fn({ ...tx, sessions: { ...tx.sessions, save } })
      })
    const again = await harness.switchboard.ingest({
      integrationId: harness.integrationId,
      clientId: 'ann',
      text: 'hello from whatsapp',
      channelId: 'whatsapp',
    })
    storing = false
    expect(raced).toBeGreaterThan(0)
    const stored = again._unsafeUnwrap()
    expect(stored.session.id).toBe(opened.session.id)
    expect(stored.session.customer.channelId).toBe('whatsapp')
    await harness.switchboard.idle()
    expect(harness.customer('ann').replies()).toEqual(['hi', 'hi again'])
  })
})
