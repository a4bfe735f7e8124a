import { describe, expect, it, vi } from 'vitest'
import {
  type Clock,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type Storage,
} from '../src/index.js'
import { createManualClock, createRecordingConnector, seedChannel } from '../src/testing/index.js'

// Node's timers run on a monotonic clock in whole milliseconds: about one in five fires a
// millisecond before `Date.now()` reaches the time it was set for (measured on Node 20). A retry
// whose timer fired early found its message or job not yet due and left it to the next sweep or
// poll (seen as deliveries tried at 0, 4.8, 9.8 and 13.8 s instead of 0, 1, 3 and 7 s).

const ANSWER = "I don't have information about that yet."

/** A manual clock whose timers fire 2 ms before the time they were set for. */
function earlyTimers() {
  const manual = createManualClock()
  const clock: Clock = {
    now: () => manual.now(),
    setTimer: (callback, ms) => manual.setTimer(callback, ms > 2 ? ms - 2 : ms),
  }
  return { manual, clock }
}

async function start(storage: Storage, clock: Clock) {
  const connector = createRecordingConnector({ type: 'early' })
  const { integration } = await seedChannel(storage, { type: 'early' })
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    clock,
    // No poll or sweep in the tests' time: only a retry's own timer finds its work again.
    pollMs: 60_000,
  })
  const says = (text: string) => switchboard.ingest({ integrationId: integration.id, clientId: 'ann', text })
  const opensSession = () => switchboard.openSession({ integrationId: integration.id, clientId: 'ann' })
  return { connector, switchboard, says, opensSession }
}

describe('a retry timer that fires early', () => {
  it('of a delivery waits out the rest of its delay, then sends', async () => {
    const { manual, clock } = earlyTimers()
    const { connector, switchboard, says } = await start(createMemoryStorage(), clock)
    try {
      connector.failNextSends(1)
      await says('hello')
      await switchboard.idle()
      expect(connector.sent).toEqual([])

      await manual.advance(1000)
      await switchboard.idle()

      expect(connector.sent.map((sent) => sent.text)).toEqual([ANSWER])
    } finally {
      await switchboard.stop()
    }
  })

  it('of a failed job waits out the rest of its delay, then runs it', async () => {
    const { manual, clock } = earlyTimers()
    const storage = createMemoryStorage()
    const history = storage.messages.history
    let failures = 1
    storage.messages.history = async (options) => {
      if (failures-- > 0) throw new Error('the database went away for a moment')
      return history(options)
    }
    const { connector, switchboard, says, opensSession } = await start(storage, clock)
    try {
      // A session open already: its job reads the history (a new session's first job has none).
      await opensSession()
      await says('hello')
      await switchboard.idle()
      expect(failures).toBe(0)
      expect(connector.sent).toEqual([])

      await manual.advance(1000)

      // Not `idle()`: it looks for due jobs itself.
      await vi.waitFor(() => expect(connector.sent.map((sent) => sent.text)).toEqual([ANSWER]), {
        timeout: 2000,
      })
    } finally {
      await switchboard.stop()
    }
  })
})
