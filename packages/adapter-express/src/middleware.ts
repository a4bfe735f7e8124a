import { randomUUID } from 'node:crypto'
import { type Accounts, switchboardError } from '@switchboard/core'
import express, { type ErrorRequestHandler, type RequestHandler } from 'express'
import type { RouteLogger } from './handle.js'
import { sendError } from './send-error.js'

export const BODY_LIMIT_BYTES = 1024 * 1024

/**
 * Every string of a body with each lone surrogate (a JSON escape such as `\ud800`) replaced by
 * U+FFFD. UTF-8 has no bytes for one, and every storage stores U+FFFD in its place; replaced at the
 * door, it is also what the request is validated and answered with.
 */
function wellFormedStrings(_key: string, value: unknown): unknown {
  return typeof value === 'string' ? value.toWellFormed() : value
}

/** JSON bodies up to 1 MiB, lone surrogates as U+FFFD; anything else the route validates. */
export const jsonBody: RequestHandler = express.json({
  limit: BODY_LIMIT_BYTES,
  strict: false,
  type: () => true,
  reviver: wellFormedStrings,
})

/**
 * A JSON body holding U+0000 (the escape `\u0000`) anywhere, in a value or a key, answers 400:
 * PostgreSQL cannot store that character, and refusing it at the door answers alike whatever the
 * storage. Runs after `jsonBody`.
 */
export const refuseNulCharacters: RequestHandler = (request, response, next) => {
  const path = nulPathOf(request.body)
  if (path === null) return next()
  sendError(
    response,
    switchboardError('VALIDATION_ERROR', `invalid request body: ${path}`, [
      { path, message: 'contains the character U+0000, which cannot be stored' },
    ]),
  )
}

/** Where in `body` U+0000 first appears, or null. A loop, not recursion: bodies nest arbitrarily deep. */
function nulPathOf(body: unknown): string | null {
  const pending: [unknown, string][] = [[body, '']]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, path] = next
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return path || '(root)'
      continue
    }
    if (typeof value !== 'object' || value === null) continue
    for (const [key, entry] of Object.entries(value)) {
      const at = path === '' ? key : `${path}.${key}`
      if (key.includes('\u0000')) return at
      pending.push([entry, at])
    }
  }
  return null
}

const readBytes = express.raw({ limit: BODY_LIMIT_BYTES, type: () => true })

/**
 * Raw bytes for routes that verify a signature over them before parsing: the bytes exactly as they
 * arrived. express.raw decodes a Content-Encoding first, so a signature was checked over bytes the
 * sender never sent, and one it could not decode answered 400 before the route's own checks (a
 * webhook to an unknown integration: 404, CONTRACT §6); the encoding is hidden from it while it reads.
 */
export const rawBody: RequestHandler = (request, response, next) => {
  const encoding = request.headers['content-encoding']
  if (encoding === undefined) return readBytes(request, response, next)
  delete request.headers['content-encoding']
  readBytes(request, response, (error?: unknown) => {
    request.headers['content-encoding'] = encoding
    next(error)
  })
}

/** The caller's `X-Request-Id` when it is a plain token, else a new one. */
export function requestIdFor(incoming: string | undefined): string {
  return incoming !== undefined && /^[\w.-]{1,100}$/.test(incoming) ? incoming : randomUUID()
}

export const requestId: RequestHandler = (request, response, next) => {
  const id = requestIdFor(request.get('x-request-id'))
  response.locals.requestId = id
  response.setHeader('X-Request-Id', id)
  next()
}

/** The bearer scheme of every protected endpoint: a session JWT or a company API token. */
export function requireAuth(accounts: Accounts, logger: RouteLogger): RequestHandler {
  return (request, response, next) => {
    accounts
      .authenticate(request.get('authorization'))
      .then((result) => {
        if (result.isErr()) return sendError(response, result.error)
        response.locals.principal = result.value
        next()
      })
      .catch((error: unknown) => {
        logger.error({ err: error, requestId: response.locals.requestId }, 'authentication failed')
        sendError(response, switchboardError('INTERNAL_ERROR', 'internal server error'))
      })
  }
}

export const notFound: RequestHandler = (request, response) => {
  sendError(
    response,
    switchboardError('NOT_FOUND', `no route for ${request.method} ${request.baseUrl}${request.path}`),
  )
}

/** Body-parser failures and anything else Express caught, in the contract's error shape. */
export function errorHandler(logger: RouteLogger): ErrorRequestHandler {
  return (error: { type?: string; status?: number }, _request, response, _next) => {
    if (response.headersSent) return
    if (error.type === 'entity.too.large' || error.status === 413) {
      return sendError(
        response,
        switchboardError('PAYLOAD_TOO_LARGE', 'the request body is larger than 1 MiB'),
      )
    }
    // A path that cannot be percent-decoded names no resource.
    if (error instanceof URIError) {
      return sendError(response, switchboardError('NOT_FOUND', 'no such resource'))
    }
    if (error.type === 'entity.parse.failed') {
      return sendError(response, switchboardError('VALIDATION_ERROR', 'the request body is not valid JSON'))
    }
    if (typeof error.status === 'number' && error.status >= 400 && error.status < 500) {
      return sendError(response, switchboardError('VALIDATION_ERROR', 'the request could not be read'))
    }
    logger.error({ err: error, requestId: response.locals.requestId }, 'unhandled error')
    sendError(response, switchboardError('INTERNAL_ERROR', 'internal server error'))
  }
}
