import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { truncate } from './session.js'
import {
  type SessionCommand,
  type SessionStateSnapshot,
  transition,
  validateResumeNote,
} from './session-state-machine.js'

const at = new Date('2026-11-21T10:00:00.000Z')
const ongoing: SessionStateSnapshot = { state: 'ongoing' }
const paused: SessionStateSnapshot = { state: 'paused', pauseState: { pausedAt: at.toISOString() } }
const closed: SessionStateSnapshot = { state: 'closed' }

describe('session state machine: the rows of the transition table', () => {
  it('ongoing → pause → paused, with the pause metadata', () => {
    const next = transition(ongoing, { type: 'pause', at, reason: 'takeover', externalReference: 'ticket-9' })
    expect(next._unsafeUnwrap()).toEqual({
      state: 'paused',
      pauseState: { pausedAt: '2026-11-21T10:00:00.000Z', reason: 'takeover', externalReference: 'ticket-9' },
    })
  })

  it('paused → resume → ongoing without pause metadata', () => {
    expect(transition(paused, { type: 'resume' })._unsafeUnwrap()).toEqual({ state: 'ongoing' })
  })

  it('ongoing → close → closed, and paused → close → closed', () => {
    expect(transition(ongoing, { type: 'close' })._unsafeUnwrap().state).toBe('closed')
    expect(transition(paused, { type: 'close' })._unsafeUnwrap().state).toBe('closed')
  })

  it('resume of an ongoing or closed session is INVALID_STATE, not a no-op', () => {
    expect(transition(ongoing, { type: 'resume' })._unsafeUnwrapErr().code).toBe('INVALID_STATE')
    expect(transition(closed, { type: 'resume' })._unsafeUnwrapErr().code).toBe('INVALID_STATE')
  })

  it('no transition leaves closed', () => {
    const commands: SessionCommand[] = [
      { type: 'pause', at },
      { type: 'resume' },
      { type: 'close' },
      { type: 'transfer', at },
      { type: 'external-transfer-recorded' },
    ]
    for (const command of commands)
      expect(transition(closed, command)._unsafeUnwrapErr().code).toBe('INVALID_STATE')
  })

  it('a transfer to a human pauses from ongoing and keeps an existing pause', () => {
    expect(transition(ongoing, { type: 'transfer', at })._unsafeUnwrap()).toEqual({
      state: 'paused',
      pauseState: { pausedAt: at.toISOString() },
    })
    const earlier = {
      state: 'paused',
      pauseState: { pausedAt: '2026-01-01T00:00:00.000Z', reason: 'r' },
    } as const
    expect(transition(earlier, { type: 'transfer', at })._unsafeUnwrap()).toEqual(earlier)
  })

  it('dialog_transferred leaves a paused session paused', () => {
    expect(transition(paused, { type: 'external-transfer-recorded' })._unsafeUnwrap()).toEqual(paused)
  })

  it('pausing a paused session is INVALID_STATE', () => {
    expect(transition(paused, { type: 'pause', at })._unsafeUnwrapErr().code).toBe('INVALID_STATE')
  })

  it('bounds the pause reason (500) and external reference (200)', () => {
    expect(transition(ongoing, { type: 'pause', at, reason: 'x'.repeat(500) }).isOk()).toBe(true)
    expect(transition(ongoing, { type: 'pause', at, reason: 'x'.repeat(501) })._unsafeUnwrapErr().code).toBe(
      'VALIDATION_ERROR',
    )
    expect(transition(ongoing, { type: 'pause', at, externalReference: 'x'.repeat(200) }).isOk()).toBe(true)
    expect(
      transition(ongoing, { type: 'pause', at, externalReference: 'x'.repeat(201) })._unsafeUnwrapErr().code,
    ).toBe('VALIDATION_ERROR')
  })

  it('counts those bounds and the resume note in characters: an emoji is one', () => {
    const emoji = (count: number) => '😀'.repeat(count)
    expect(transition(ongoing, { type: 'pause', at, reason: emoji(500) }).isOk()).toBe(true)
    expect(transition(ongoing, { type: 'pause', at, reason: emoji(501) }).isErr()).toBe(true)
    expect(transition(ongoing, { type: 'pause', at, externalReference: emoji(200) }).isOk()).toBe(true)
    expect(transition(ongoing, { type: 'pause', at, externalReference: emoji(201) }).isErr()).toBe(true)
    expect(validateResumeNote(emoji(500)).isOk()).toBe(true)
    expect(validateResumeNote(emoji(501)).isErr()).toBe(true)
    expect(truncate(`${emoji(3)}x`, 2)).toBe(emoji(2))
  })
})

const commandArbitrary: fc.Arbitrary<SessionCommand> = fc.oneof(
  fc.record({
    type: fc.constant('pause' as const),
    at: fc.constant(at),
    reason: fc.option(fc.string({ maxLength: 600 }), { nil: undefined }),
  }),
  fc.constant({ type: 'resume' as const }),
  fc.constant({ type: 'close' as const }),
  fc.constant({ type: 'transfer' as const, at }),
  fc.constant({ type: 'external-transfer-recorded' as const }),
)

describe('session state machine: properties', () => {
  it('keeps its invariants over any sequence of commands', () => {
    fc.assert(
      fc.property(fc.array(commandArbitrary, { maxLength: 30 }), (commands) => {
        let current: SessionStateSnapshot = ongoing
        for (const command of commands) {
          const next = transition(current, command)
          if (current.state === 'closed') expect(next.isErr()).toBe(true)
          if (command.type === 'resume') expect(next.isOk()).toBe(current.state === 'paused')
          if (command.type === 'close') expect(next.isOk()).toBe(current.state !== 'closed')
          if (next.isOk()) current = next.value
          // pauseState exists exactly while paused.
          expect(current.pauseState !== undefined).toBe(current.state === 'paused')
        }
      }),
    )
  })
})
