import { afterEach, describe, expect, it } from 'vitest'
import type { HumanTransferOutcome, SendOutcome } from '../src/index.js'
import { createMemoryKnowledgeIndex, createSwitchboard, type Switchboard } from '../src/index.js'
import {
  type ConversationHarness,
  createConversationHarness,
  createRecordingConnector,
  createScriptedModel,
  handoff,
  type RecordingConnector,
  reply,
} from '../src/testing/index.js'
import { humanTeam } from './support/human-team.js'

// CONTRACT §8 and §11: a turn that hands the customer to a human commits the pause, then calls the
// platform's transfer. A process that dies in between must not leave the customer waiting for an
// operator who was never asked: another switchboard on the storage makes the transfer.

function deferred<T>() {
  let resolve: (value: T) => void = () => {}
  const promise = new Promise<T>((settle) => {
    resolve = settle
  })
  return { promise, resolve }
}

let harness: ConversationHarness
let survivor: Switchboard | undefined
/** Lets the calls of the "dead" switchboard answer at last, so that it can stop. */
let releaseHung: () => void = () => {}

afterEach(async () => {
  releaseHung()
  await survivor?.stop()
  survivor = undefined
  await harness.finish()
})

/**
 * The harness's switchboard "dies": it stops at once, so its sweeps and timers no longer run, while
 * the call it hangs in stays unanswered. Then a second switchboard starts on the same storage and
 * clock, as a process started after a crash.
 */
async function startSurvivor(): Promise<RecordingConnector> {
  await harness.switchboard.stop({ timeoutMs: 1 })
  const connector = createRecordingConnector({ humanTransfer: true, externalReference: 'request-42' })
  survivor = createSwitchboard({
    storage: harness.storage,
    model: createScriptedModel(),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock: harness.clock,
  })
  return connector
}

/** Moves the clock a second at a time, letting the sweeps that come due run, until `done`. */
async function advanceUntil(done: () => boolean, seconds = 120): Promise<void> {
  for (let tick = 0; tick < seconds && !done(); tick++) {
    await harness.clock.advance(1_000)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

/**
 * The next switchboard sends the handoff's announcement, then makes the transfer, once; the first
 * switchboard made none.
 */
async function expectAnnouncedThenTransferredBySurvivor(sessionId: string): Promise<void> {
  const platform = await startSurvivor()
  await advanceUntil(() => platform.transfers.length > 0)
  expect(platform.sent.map((sent) => sent.text)).toEqual(['A colleague will take over.'])
  expect(platform.transfers).toEqual([{ sessionId, groupId: 7, systemMessage: false, sentBefore: 1 }])
  expect(harness.connector.transfers).toEqual([])
}

describe('a transfer to a human whose switchboard stopped after the pause committed', () => {
  it('is made by the next switchboard when the first never heard back from the platform', async () => {
    harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
    const hung = deferred<HumanTransferOutcome>()
    const called = deferred<void>()
    harness.connector.transferToHuman = () => {
      called.resolve()
      return hung.promise
    }
    releaseHung = () => hung.resolve({ ok: true, externalReference: 'too-late' })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    const customer = harness.customer()
    const { session } = await customer.sends('I want to talk to a person')
    await called.promise

    const platform = await startSurvivor()
    await advanceUntil(() => platform.transfers.length > 0)

    expect(platform.transfers).toEqual([
      { sessionId: session.id, groupId: 7, systemMessage: false, sentBefore: 0 },
    ])
    expect(harness.connector.sent.map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    const transferred = await customer.session()
    expect(transferred.state).toBe('paused')
    expect(transferred.pauseState?.externalReference).toBe('request-42')

    // The first switchboard's answer comes at last: its claim was taken over, so it records nothing.
    releaseHung()
    await harness.switchboard.idle()
    expect((await customer.session()).pauseState?.externalReference).toBe('request-42')
    // Made once: later sweeps find nothing left to transfer.
    await harness.clock.advance(120_000)
    await survivor?.idle()
    expect(platform.transfers).toHaveLength(1)
  })

  it('is made after the announcement, by the next switchboard, when the first died before sending it', async () => {
    harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
    const hung = deferred<SendOutcome>()
    harness.connector.send = () => hung.promise
    releaseHung = () => hung.resolve({ ok: false, retryable: true, error: 'too late' })
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    const customer = harness.customer()
    const { session } = await customer.sends('I want to talk to a person')
    await expect.poll(async () => (await customer.session()).state).toBe('paused')

    await expectAnnouncedThenTransferredBySurvivor(session.id)
    expect((await customer.session()).pauseState?.externalReference).toBe('request-42')
    releaseHung()
    await harness.switchboard.idle()
    expect(harness.connector.transfers).toEqual([])
  })

  it('is not made once an operator resumed the session', async () => {
    await handOffToHumanWithHungAnnouncement()
    const sessionId = (await harness.customer().session()).id
    const platform = await startSurvivor()
    ;(await survivor!.sessions.resume({ companyId: harness.companyId, sessionId }))._unsafeUnwrap()

    await advanceUntil(() => platform.sent.length > 0)
    await harness.clock.advance(60_000)
    await survivor!.idle()

    expect(platform.sent.map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    expect(platform.transfers).toEqual([])
    expect((await harness.customer().session()).state).toBe('ongoing')
  })

  it('is not made once an operator gave the session back to an agent, paused', async () => {
    await handOffToHumanWithHungAnnouncement()
    const sessionId = (await harness.customer().session()).id
    const platform = await startSurvivor()
    const reassigned = await survivor!.sessions.reassign({
      companyId: harness.companyId,
      sessionId,
      agentId: harness.agent('reception'),
    })
    expect(reassigned._unsafeUnwrap().state).toBe('paused')

    await advanceUntil(() => platform.sent.length > 0)
    await harness.clock.advance(60_000)
    await survivor!.idle()

    expect(platform.sent.map((sent) => sent.text)).toEqual(['A colleague will take over.'])
    expect(platform.transfers).toEqual([])
  })

  it('is not made once an operator closed the session', async () => {
    await handOffToHumanWithHungAnnouncement()
    const sessionId = (await harness.customer().session()).id
    const platform = await startSurvivor()
    ;(await survivor!.sessions.close({ companyId: harness.companyId, sessionId }))._unsafeUnwrap()

    await harness.clock.advance(120_000)
    await survivor!.idle()

    expect(platform.sent).toEqual([])
    expect(platform.transfers).toEqual([])
    // Dropped, not left to be claimed again and again.
    const left = await harness.storage.humanTransfers.claimDue({
      now: new Date(harness.clock.now().getTime() + 3_600_000),
      limit: 10,
      leaseMs: 30_000,
      leaseToken: 'check',
    })
    expect(left).toEqual([])
  })
})

/** The handoff commits, and the first switchboard's send of the announcement never answers. */
async function handOffToHumanWithHungAnnouncement(): Promise<void> {
  harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
  const hung = deferred<SendOutcome>()
  harness.connector.send = () => hung.promise
  releaseHung = () => hung.resolve({ ok: false, retryable: false, error: 'too late' })
  harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
  const customer = harness.customer()
  await customer.sends('I want to talk to a person')
  await expect.poll(async () => (await customer.session()).state).toBe('paused')
}

describe('the record of a transfer that the database failed for a moment', () => {
  it('is written once the database is back: the transfer is made once, and its reference kept', async () => {
    harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
    const { storage, connector } = harness
    let failures = 0
    const transaction = storage.transaction.bind(storage)
    storage.transaction = (fn) => {
      if (failures > 0) {
        failures -= 1
        return Promise.reject(new Error('terminating connection due to administrator command'))
      }
      return transaction(fn)
    }
    const transfer = connector.transferToHuman!.bind(connector)
    connector.transferToHuman = async (request) => {
      const outcome = await transfer(request)
      failures = 2
      return { ...outcome, externalReference: 'request-42' }
    }
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    const customer = harness.customer()
    await customer.says('I want to talk to a person')

    expect((await customer.session()).pauseState?.externalReference).toBe('request-42')
    await harness.clock.advance(120_000)
    await harness.switchboard.idle()
    expect(connector.transfers).toHaveLength(1)
  })
})

describe('a transfer to a human under way when its switchboard stops', () => {
  // CONTRACT §11: a shutdown lets work in flight finish, and its storage is closed after stop().
  // A reassign's transfer whose outcome was not recorded by then is made again by the next process.
  it('is waited for by stop(), so its outcome is recorded before the storage closes', async () => {
    harness = await createConversationHarness({
      agents: { solo: {}, humans: { kind: 'human' } },
      entry: 'solo',
      humanTransfer: true,
    })
    harness.model.script(harness.agent('solo'), reply('hi'))
    const customer = harness.customer()
    await customer.says('hello')
    const sessionId = (await customer.session()).id
    const answer = deferred<HumanTransferOutcome>()
    const called = deferred<void>()
    harness.connector.transferToHuman = () => {
      called.resolve()
      return answer.promise
    }
    releaseHung = () => answer.resolve({ ok: true, externalReference: 'request-7' })

    const reassigning = harness.switchboard.sessions.reassign({
      companyId: harness.companyId,
      sessionId,
      agentId: harness.agent('humans'),
    })
    await called.promise
    const order: string[] = []
    const stopping = harness.switchboard.stop({ timeoutMs: 5_000 }).then(() => order.push('stopped'))
    await new Promise((resolve) => setTimeout(resolve, 20))
    order.push('platform answered')
    releaseHung()
    await stopping
    expect(order).toEqual(['platform answered', 'stopped'])
    expect((await customer.session()).pauseState?.externalReference).toBe('request-7')
    expect((await reassigning)._unsafeUnwrap().pauseState?.externalReference).toBe('request-7')

    // Nothing is left for the next process to transfer again.
    const platform = await startSurvivor()
    await harness.clock.advance(120_000)
    await survivor!.idle()
    expect(platform.transfers).toEqual([])
  })

  // CONTRACT §8: the announcement is delivered before the transfer call. stop() ends the turn's
  // wait for its announcement's retry; the transfer must still wait for the announcement.
  it('is not made while its announcement waits for a retry; the next switchboard sends it, then transfers', async () => {
    harness = await createConversationHarness({ agents: humanTeam, entry: 'reception', humanTransfer: true })
    const tried = deferred<void>()
    harness.connector.send = async () => {
      tried.resolve()
      return { ok: false, retryable: true, error: 'msgplatform answered 503' }
    }
    harness.model.script(harness.agent('reception'), handoff(harness.agent('humans'), 'wants a person'))
    const customer = harness.customer()
    const { session } = await customer.sends('I want to talk to a person')
    await tried.promise

    // The drain ends at its deadline (the retry is due on the harness's clock, which stands still).
    await harness.switchboard.stop({ timeoutMs: 100 })
    expect(harness.connector.transfers).toEqual([])
    expect((await customer.session()).state).toBe('paused')

    await expectAnnouncedThenTransferredBySurvivor(session.id)
  })
})
