import { ConfigError } from '../domain/errors.js'

export interface AccountSettings {
  /** Lifetime of a session access token. */
  readonly accessTokenTtlSeconds: number
  /** Lifetime of each refresh token, counted from its issue. */
  readonly refreshTokenTtlSeconds: number
  /**
   * A used refresh token presented again within this time of its first use is a client's
   * concurrent refresh that lost the race; later, it is a theft and the whole login is revoked.
   */
  readonly refreshReuseIntervalSeconds: number
  /** Compared case-insensitively. */
  readonly superadminEmails: readonly string[]
  /** Failed logins of one email allowed within the window; the next attempt is refused. */
  readonly maxFailedLogins: number
  readonly failedLoginWindowSeconds: number
}

export const DEFAULT_ACCOUNT_SETTINGS: AccountSettings = Object.freeze({
  accessTokenTtlSeconds: 3600,
  refreshTokenTtlSeconds: 2_592_000,
  refreshReuseIntervalSeconds: 10,
  superadminEmails: Object.freeze([]),
  maxFailedLogins: 10,
  failedLoginWindowSeconds: 900,
})

const POSITIVE_SETTINGS = [
  'accessTokenTtlSeconds',
  'refreshTokenTtlSeconds',
  'maxFailedLogins',
  'failedLoginWindowSeconds',
] as const

/** The defaults overridden by `settings`; throws a ConfigError naming a setting out of range. */
export function resolveAccountSettings(settings: Partial<AccountSettings> | undefined): AccountSettings {
  const resolved: AccountSettings = { ...DEFAULT_ACCOUNT_SETTINGS, ...withoutUndefined(settings ?? {}) }
  for (const name of POSITIVE_SETTINGS) {
    const value = resolved[name]
    if (!Number.isInteger(value) || value < 1) {
      throw new ConfigError(`Account setting ${name} must be a positive integer, got ${value}`)
    }
  }
  const interval = resolved.refreshReuseIntervalSeconds
  if (!Number.isFinite(interval) || interval < 0) {
    throw new ConfigError(`Account setting refreshReuseIntervalSeconds must be 0 or more, got ${interval}`)
  }
  if (
    !Array.isArray(resolved.superadminEmails) ||
    resolved.superadminEmails.some((email) => typeof email !== 'string')
  ) {
    throw new ConfigError('Account setting superadminEmails must be a list of email addresses')
  }
  return resolved
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>
}
