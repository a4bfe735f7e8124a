import { type Principal, type SwitchboardError, switchboardError } from '@switchboard/core'
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import type { Result } from 'neverthrow'
import { sendError } from './send-error.js'

export interface RouteLogger {
  error(object: Record<string, unknown>, message: string): void
}

const INTERNAL_ERROR = switchboardError('INTERNAL_ERROR', 'internal server error')

/**
 * Wraps an async route: a thrown error (a storage outage, a bug) is logged with the request and
 * answered with `failure` (500 INTERNAL_ERROR unless the route's contract names another), with no
 * detail in the body.
 */
export function handle(
  logger: RouteLogger,
  route: (request: Request, response: Response) => Promise<void>,
  failure: SwitchboardError = INTERNAL_ERROR,
): RequestHandler {
  return (request: Request, response: Response, _next: NextFunction) => {
    route(request, response).catch((error: unknown) => {
      logger.error(
        { err: error, method: request.method, path: request.path, requestId: response.locals.requestId },
        'request failed',
      )
      if (!response.headersSent) sendError(response, failure)
    })
  }
}

/** Sends a Result: ok as JSON with `status`, err in the contract's error shape. */
export function reply<T>(response: Response, result: Result<T, SwitchboardError>, status = 200): void {
  if (result.isErr()) {
    sendError(response, result.error)
    return
  }
  response.status(status).json(result.value)
}

export function principalOf(response: Response): Principal {
  return response.locals.principal as Principal
}
