import type { LoginFailureRepository } from '../ports/storage.js'
import { storedText } from './snapshot.js'
import type { Statement } from './undo-log.js'

export interface LoginFailureTable {
  /**
   * Failure times in milliseconds per email key as stored (U+FFFD in place of what a text column
   * cannot hold, so either spelling names one key), in the order recorded.
   */
  readonly byKey: Map<string, readonly number[]>
}

export function createLoginFailureTable(): LoginFailureTable {
  return { byKey: new Map() }
}

export function createLoginFailureRepository(options: {
  loginFailures: LoginFailureTable
  statement: Statement
}): LoginFailureRepository {
  const { loginFailures, statement } = options

  const after = (emailKey: string, since: Date): number[] =>
    (loginFailures.byKey.get(storedText(emailKey)) ?? []).filter((time) => time > since.getTime())

  return {
    record: ({ emailKey: given, at }) =>
      statement((log) => {
        const emailKey = storedText(given)
        log.set(loginFailures.byKey, emailKey, [...(loginFailures.byKey.get(emailKey) ?? []), at.getTime()])
      }),

    count: ({ emailKey, since }) => statement(() => after(emailKey, since).length),

    oldestSince: ({ emailKey, since }) =>
      statement(() => {
        const times = after(emailKey, since)
        return times.length === 0 ? null : new Date(Math.min(...times)).toISOString()
      }),

    forgetBefore: ({ before }) =>
      statement((log) => {
        for (const [emailKey, times] of loginFailures.byKey) {
          const kept = times.filter((time) => time > before.getTime())
          if (kept.length === times.length) continue
          if (kept.length === 0) log.delete(loginFailures.byKey, emailKey)
          else log.set(loginFailures.byKey, emailKey, kept)
        }
      }),

    forget: ({ emailKey: given, at }) =>
      statement((log) => {
        const emailKey = storedText(given)
        const times = loginFailures.byKey.get(emailKey) ?? []
        const index = times.lastIndexOf(at.getTime())
        if (index === -1) return
        const rest = times.filter((_, position) => position !== index)
        if (rest.length === 0) log.delete(loginFailures.byKey, emailKey)
        else log.set(loginFailures.byKey, emailKey, rest)
      }),
  }
}
