import type { ErrorCode } from '@switchboard/core'

/** The one place a code becomes an HTTP status; a new code fails the build until it is mapped here. */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = {
  VALIDATION_ERROR: 400,
  INVALID_STATE: 400,
  UNAUTHORIZED: 401,
  INVALID_CREDENTIALS: 401,
  REFRESH_FAILED: 401,
  INVALID_SIGNATURE: 401,
  FORBIDDEN: 403,
  INTEGRATION_INACTIVE: 403,
  HTTPS_REQUIRED: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  REQUEST_HEADER_FIELDS_TOO_LARGE: 431,
  REQUEST_TIMEOUT: 408,
  RATE_LIMITED: 429,
  USER_CREATION_FAILED: 500,
  INTERNAL_ERROR: 500,
}
