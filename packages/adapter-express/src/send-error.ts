import type { SwitchboardError } from '@switchboard/core'
import type { Response } from 'express'
import { ERROR_STATUS } from './error-status.js'

/** The contract's error body, never a stack or an internal cause. */
export function sendError(response: Response, error: SwitchboardError): void {
  const status = ERROR_STATUS[error.code]
  const retryAfter = (error.details as { retryAfterSeconds?: unknown } | undefined)?.retryAfterSeconds
  if (error.code === 'RATE_LIMITED' && typeof retryAfter === 'number') {
    response.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))))
  }
  const body: { code: string; message: string; details?: unknown } = {
    code: error.code,
    message: error.message,
  }
  if (error.details !== undefined && error.code !== 'RATE_LIMITED') body.details = error.details
  response.status(status).json({ error: body })
}
