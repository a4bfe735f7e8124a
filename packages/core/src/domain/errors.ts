/**
 * Every stable error code of Switchboard, declared once. The HTTP edge maps each one to a status
 * in an exhaustive table, so adding a code here fails the build until the edge knows it.
 */
export const ERROR_CODES = [
  'VALIDATION_ERROR',
  'INVALID_STATE',
  'UNAUTHORIZED',
  'INVALID_CREDENTIALS',
  'REFRESH_FAILED',
  'INVALID_SIGNATURE',
  'FORBIDDEN',
  'INTEGRATION_INACTIVE',
  'HTTPS_REQUIRED',
  'NOT_FOUND',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'REQUEST_HEADER_FIELDS_TOO_LARGE',
  'REQUEST_TIMEOUT',
  'RATE_LIMITED',
  'USER_CREATION_FAILED',
  'INTERNAL_ERROR',
] as const

export type ErrorCode = (typeof ERROR_CODES)[number]

/** Codes recorded on a session's `metadata.errors`; they describe what happened during a turn. */
export const SESSION_ERROR_CODES = [
  'HANDOFF_NOT_ALLOWED',
  'HUMAN_TRANSFER_UNSUPPORTED',
  'TOOL_LOOP_LIMIT',
  'MODEL_UNAVAILABLE',
  'CREDITS_EXHAUSTED',
  'PROCESSING_FAILED',
] as const

export type SessionErrorCode = (typeof SESSION_ERROR_CODES)[number]

export interface SwitchboardError {
  readonly code: ErrorCode
  readonly message: string
  readonly details?: unknown
}

export function switchboardError(code: ErrorCode, message: string, details?: unknown): SwitchboardError {
  return details === undefined ? { code, message } : { code, message, details }
}

const CONFIG_ERROR = Symbol.for('switchboard.ConfigError')

/** Thrown at start-up for a misconfiguration; the message says what to fix. */
export class ConfigError extends Error {
  readonly [CONFIG_ERROR] = true
  override readonly name = 'ConfigError'

  static isInstance(value: unknown): value is ConfigError {
    return typeof value === 'object' && value !== null && CONFIG_ERROR in value
  }
}

/**
 * An option as a `ConfigError` message shows it: a string quoted, anything else by its kind, never
 * the contents of an object, which may be large or hold secrets.
 */
export function describeOptionValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'function') return 'a function'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object' && value !== null) return 'an object'
  return String(value)
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * What an option check says of `value` when it is not the port it should be: its kind, or the first
 * of `methods` (functions) or `members` (objects) it lacks; null when it has them all.
 */
export function missingMembers(
  value: unknown,
  methods: readonly string[],
  members: readonly string[] = [],
): string | null {
  if (!isObject(value)) return describeOptionValue(value)
  const method = methods.find((name) => typeof value[name] !== 'function')
  if (method !== undefined) return `an object without ${method}()`
  const member = members.find((name) => !isObject(value[name]))
  return member === undefined ? null : `an object without ${member}`
}
