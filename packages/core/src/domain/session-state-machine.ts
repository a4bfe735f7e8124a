import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from './errors.js'
import {
  EXTERNAL_REFERENCE_MAX,
  exceedsCharacters,
  PAUSE_REASON_MAX,
  type PauseState,
  RESUME_NOTE_MAX,
  type Session,
  type SessionState,
} from './session.js'

/**
 * The operations that change a session's state, one per group of rows of its transition table. `transfer` is a transfer to a human (pauses from any open state); the platform's
 * `close_dialog`/`close_request` hooks are `close`, and `dialog_transferred` keeps the state.
 */
export type SessionCommand =
  | {
      readonly type: 'pause'
      readonly at: Date
      readonly reason?: string
      readonly externalReference?: string
    }
  | { readonly type: 'resume' }
  | { readonly type: 'close' }
  | { readonly type: 'transfer'; readonly at: Date }
  | { readonly type: 'external-transfer-recorded' }

export interface SessionStateSnapshot {
  readonly state: SessionState
  readonly pauseState?: PauseState | undefined
}

/**
 * The session in the state `transition` led to: the pause state replaced, and a pause counted in
 * its metadata, where the count outlives the pause, so a turn can tell it was paused while it ran.
 */
export function withState(session: Session, next: SessionStateSnapshot): Session {
  const { pauseState: _replaced, ...rest } = session
  const pausedNow = next.state === 'paused' && session.state !== 'paused'
  return {
    ...rest,
    state: next.state,
    ...(next.pauseState === undefined ? {} : { pauseState: next.pauseState }),
    ...(pausedNow ? { metadata: { ...session.metadata, pauses: (session.metadata.pauses ?? 0) + 1 } } : {}),
  }
}

/** Pure: the state a command leads to, or `INVALID_STATE` / `VALIDATION_ERROR`. */
export function transition(
  current: SessionStateSnapshot,
  command: SessionCommand,
): Result<SessionStateSnapshot, SwitchboardError> {
  if (current.state === 'closed') {
    return err(switchboardError('INVALID_STATE', 'the session is closed; no transition leaves closed'))
  }
  switch (command.type) {
    case 'pause': {
      if (current.state !== 'ongoing') {
        return err(switchboardError('INVALID_STATE', `cannot pause a session that is ${current.state}`))
      }
      const pauseState = buildPauseState(command.at, command.reason, command.externalReference)
      return pauseState.map((value) => ({ state: 'paused' as const, pauseState: value }))
    }
    case 'resume':
      if (current.state !== 'paused') {
        return err(switchboardError('INVALID_STATE', `cannot resume a session that is ${current.state}`))
      }
      return ok({ state: 'ongoing' })
    case 'close':
      return ok({ state: 'closed' })
    case 'transfer':
      // Already paused (an operator's takeover): the pause metadata of that takeover stays.
      if (current.state === 'paused') return ok(current)
      return ok({ state: 'paused', pauseState: { pausedAt: command.at.toISOString() } })
    case 'external-transfer-recorded':
      return ok(current)
  }
}

function buildPauseState(
  at: Date,
  reason?: string,
  externalReference?: string,
): Result<PauseState, SwitchboardError> {
  if (reason !== undefined && exceedsCharacters(reason, PAUSE_REASON_MAX)) {
    return err(
      switchboardError('VALIDATION_ERROR', `reason must be at most ${PAUSE_REASON_MAX} characters`, [
        { path: 'reason', message: `at most ${PAUSE_REASON_MAX} characters` },
      ]),
    )
  }
  if (externalReference !== undefined && exceedsCharacters(externalReference, EXTERNAL_REFERENCE_MAX)) {
    return err(
      switchboardError(
        'VALIDATION_ERROR',
        `externalReference must be at most ${EXTERNAL_REFERENCE_MAX} characters`,
        [{ path: 'externalReference', message: `at most ${EXTERNAL_REFERENCE_MAX} characters` }],
      ),
    )
  }
  return ok({
    pausedAt: at.toISOString(),
    ...(reason === undefined ? {} : { reason }),
    ...(externalReference === undefined ? {} : { externalReference }),
  })
}

export function validateResumeNote(note: string | undefined): Result<string | undefined, SwitchboardError> {
  if (note !== undefined && exceedsCharacters(note, RESUME_NOTE_MAX)) {
    return err(
      switchboardError('VALIDATION_ERROR', `note must be at most ${RESUME_NOTE_MAX} characters`, [
        { path: 'note', message: `at most ${RESUME_NOTE_MAX} characters` },
      ]),
    )
  }
  return ok(note)
}
