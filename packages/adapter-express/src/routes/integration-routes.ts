import {
  type Accounts,
  type IntegrationService,
  integrationInputSchema,
  integrationPatchSchema,
  switchboardError,
} from '@switchboard/core'
import { Router } from 'express'
import { handle, principalOf, type RouteLogger, reply } from '../handle.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { digitsId } from '../path-ids.js'
import { bodyOf } from '../request-body.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'
import { webhookLogView } from '../views.js'

const notFound = switchboardError('NOT_FOUND', 'integration not found')

/** `/api/integrations` and everything under `/api/integrations/{id}` (CONTRACT §5). */
export function integrationRoutes(
  integrations: IntegrationService,
  accounts: Accounts,
  logger: RouteLogger,
): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)

  router.post(
    '/integrations',
    auth,
    handle(logger, async (request, response) => {
      const input = validate(integrationInputSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      reply(response, await integrations.create(principalOf(response).companyId, input.value), 201)
    }),
  )

  router.get(
    '/integrations',
    auth,
    handle(logger, async (request, response) => {
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const { items, nextCursor } = await integrations.list(principalOf(response).companyId, page.value)
      response.json({ integrations: items, nextCursor })
    }),
  )

  router.get(
    '/integrations/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      reply(response, await integrations.get(principalOf(response).companyId, id))
    }),
  )

  router.patch(
    '/integrations/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const patch = validate(integrationPatchSchema, bodyOf(request))
      if (patch.isErr()) return sendError(response, patch.error)
      reply(response, await integrations.update(principalOf(response).companyId, id, patch.value))
    }),
  )

  router.delete(
    '/integrations/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const deleted = await integrations.delete(principalOf(response).companyId, id)
      if (deleted.isErr()) return sendError(response, deleted.error)
      response.status(204).end()
    }),
  )

  router.post(
    '/integrations/:id/rotate-secret',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      reply(response, await integrations.rotateSecret(principalOf(response).companyId, id))
    }),
  )

  router.post(
    '/integrations/:id/status-hooks',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      reply(response, await integrations.registerStatusHooks(principalOf(response).companyId, id))
    }),
  )

  router.get(
    '/integrations/:id/webhook-logs',
    auth,
    handle(logger, async (request, response) => {
      const id = digitsId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const logs = await integrations.webhookLogs(principalOf(response).companyId, id, page.value)
      if (logs.isErr()) return sendError(response, logs.error)
      response.json({ logs: logs.value.items.map(webhookLogView), nextCursor: logs.value.nextCursor })
    }),
  )

  return router
}
