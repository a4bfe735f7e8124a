import {
  agentInputSchema,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type Repositories,
  type Storage,
  type Switchboard,
  signWebhookBody,
} from '@switchboard/core'
import { afterEach, expect, it } from 'vitest'
import { createMsgPlatformWebhookHandler } from './create-webhook-handler.js'

const SECRET = 'a-secret-of-16-chars-or-more'

let switchboard: Switchboard | undefined
afterEach(async () => {
  await switchboard?.stop()
})

/** Memory storage whose transactions fail while `outage.on` holds, as a database that went away. */
function createFlakyStorage() {
  const storage = createMemoryStorage()
  const outage = { on: false }
  const flaky: Storage = {
    ...storage,
    transaction: <T>(fn: (tx: Repositories) => Promise<T>) =>
      outage.on ? Promise.reject(new Error('storage outage')) : storage.transaction(fn),
  }
  return { storage: flaky, outage }
}

/**
 * A switchboard on `storage` with an msgplatform integration, the session of customer c-1 on it,
 * and `deliver`, which hands the handler `hook` signed, under `webhookId`.
 */
async function customerWithSession(storage: Storage, hook: object, webhookId: string) {
  switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
  })
  const agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Support' }),
    companyId: 1,
    at: new Date(),
  })
  const integration = await storage.integrations.create({
    companyId: 1,
    type: 'msgplatform',
    name: 'Shop',
    active: true,
    entryAgentId: agent.id,
    config: { apiBaseUrl: 'http://127.0.0.1:9', apiToken: 'token' },
    webhookSecret: SECRET,
    at: new Date(),
  })
  const session = (
    await switchboard.openSession({ integrationId: integration.id, clientId: 'c-1' })
  )._unsafeUnwrap()
  const handler = createMsgPlatformWebhookHandler({ switchboard })
  const rawBody = JSON.stringify(hook)
  const deliver = () =>
    handler.handle({
      integrationId: integration.id,
      rawBody: Buffer.from(rawBody),
      headers: { 'x-webhook-signature': signWebhookBody(rawBody, SECRET), 'webhook-id': webhookId },
    })
  return { session, deliver }
}

it('processes the retry of a status hook that failed, though it carries the same webhook-id', async () => {
  const { storage, outage } = createFlakyStorage()
  const { session, deliver } = await customerWithSession(
    storage,
    { hook_type: 'dialog_transferred', client_id: 'c-1', operator_id: 5 },
    'msg_retried',
  )

  outage.on = true
  await expect(deliver()).rejects.toThrow('storage outage')
  outage.on = false
  expect(await deliver()).toEqual({ status: 200, body: { ok: true } })
  expect(await deliver()).toEqual({ status: 200, body: { ok: true, duplicate: true } })

  const transferred = await storage.sessions.get({ id: session.id })
  expect(transferred?.metadata.sharedContext.journey.map((entry) => entry.step)).toEqual([
    'Dialog transferred on the platform to operator 5',
  ])
})

it('closes the session on the retry of a close hook whose process lost the database after taking its webhook-id', async () => {
  const memory = createMemoryStorage()
  const outage = { on: false }
  // The database goes away the moment the hook's webhook-id is recorded on its own, as when the
  // process dies right then: nothing after that reaches it, the id's forget neither.
  const storage: Storage = {
    ...memory,
    transaction: <T>(fn: (tx: Repositories) => Promise<T>) =>
      outage.on ? Promise.reject(new Error('storage outage')) : memory.transaction(fn),
    webhookDeliveries: {
      async record(options) {
        if (outage.on) throw new Error('storage outage')
        const recorded = await memory.webhookDeliveries.record(options)
        outage.on = true
        return recorded
      },
      async forget(options) {
        if (outage.on) throw new Error('storage outage')
        return memory.webhookDeliveries.forget(options)
      },
    },
  }
  const { session, deliver } = await customerWithSession(
    storage,
    { hook_type: 'close_dialog', client_id: 'c-1' },
    'msg_close',
  )

  // The platform sends the hook until it is answered 200 (a failure is a 500 at the edge).
  let answer = await deliver().catch(() => null)
  outage.on = false
  if (answer === null) answer = await deliver()
  expect(answer).toEqual({ status: 200, body: { ok: true } })
  expect((await memory.sessions.get({ id: session.id }))?.state).toBe('closed')
  expect(await deliver()).toEqual({ status: 200, body: { ok: true, duplicate: true } })
})
