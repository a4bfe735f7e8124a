import { type Accounts, switchboardError } from '@switchboard/core'
import { Router } from 'express'
import { z } from 'zod'
import { handle, principalOf, type RouteLogger, reply } from '../handle.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { uuidId } from '../path-ids.js'
import { bodyOf } from '../request-body.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'

const registerSchema = z.strictObject({
  email: z.email().max(254),
  password: z.string().min(8).max(128),
  companyName: z.string().trim().min(1).max(200),
})

const loginSchema = z.strictObject({
  email: z.string().min(1).max(320),
  password: z.string().min(1).max(1024),
})

/** Refresh tokens are 43 characters; a longer string is no token, and is not even hashed. */
const REFRESH_TOKEN_MAX = 1000
const apiTokenSchema = z.strictObject({ name: z.string().trim().min(1).max(100) })

const registrationFailed = switchboardError('USER_CREATION_FAILED', 'could not create the user')

/** `/api/auth/*` and `/api/api-tokens`. */
export function accountRoutes(accounts: Accounts, logger: RouteLogger): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)

  router.post(
    '/auth/register',
    handle(
      logger,
      async (request, response) => {
        const input = validate(registerSchema, bodyOf(request))
        if (input.isErr()) return sendError(response, input.error)
        reply(response, await accounts.register(input.value), 201)
      },
      // The spec: a registration that fails for any reason answers 500 USER_CREATION_FAILED.
      registrationFailed,
    ),
  )

  router.post(
    '/auth/login',
    handle(logger, async (request, response) => {
      const input = validate(loginSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      reply(response, await accounts.login(input.value))
    }),
  )

  router.post(
    '/auth/refresh',
    handle(logger, async (request, response) => {
      // The spec answers 401 REFRESH_FAILED to any refresh that fails and lists no 400 (CONTRACT §2
      // gives the 400 to register and login only): a body without a usable token is one more
      // invalid token. Malformed JSON is still a 400, as on every endpoint.
      const body = bodyOf(request)
      const token =
        typeof body === 'object' && body !== null && !Array.isArray(body)
          ? (body as { refresh_token?: unknown }).refresh_token
          : undefined
      const refreshToken = typeof token === 'string' && token.length <= REFRESH_TOKEN_MAX ? token : ''
      reply(response, await accounts.refresh({ refreshToken }))
    }),
  )

  router.get(
    '/auth/me',
    auth,
    handle(logger, async (_request, response) => {
      reply(response, await accounts.me(principalOf(response)))
    }),
  )

  router.post(
    '/auth/logout',
    auth,
    handle(logger, async (_request, response) => {
      const result = await accounts.logout(principalOf(response))
      if (result.isErr()) return sendError(response, result.error)
      response.status(204).end()
    }),
  )

  router.post(
    '/api-tokens',
    auth,
    handle(logger, async (request, response) => {
      const input = validate(apiTokenSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      reply(response, await accounts.createApiToken(principalOf(response), input.value), 201)
    }),
  )

  router.get(
    '/api-tokens',
    auth,
    handle(logger, async (request, response) => {
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const { items, nextCursor } = await accounts.listApiTokens(principalOf(response), page.value)
      response.json({ apiTokens: items, nextCursor })
    }),
  )

  router.delete(
    '/api-tokens/:id',
    auth,
    handle(logger, async (request, response) => {
      // A UUID in any case names the same token (storage keeps them lower-case); anything else
      // names none, and is passed as it is so that an API token still gets its 403 first.
      const raw = String(request.params.id)
      const result = await accounts.deleteApiToken(principalOf(response), { id: uuidId(raw) ?? raw })
      if (result.isErr()) return sendError(response, result.error)
      response.status(204).end()
    }),
  )

  return router
}
