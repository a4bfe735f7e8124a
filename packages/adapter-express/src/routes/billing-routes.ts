import type { Accounts, Billing } from '@switchboard/core'
import { Router } from 'express'
import { handle, principalOf, type RouteLogger } from '../handle.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'
import { usageView } from '../views.js'

/** `/api/billing`, `/api/billing/usage` and `/api/pipelines` (CONTRACT §9). */
export function billingRoutes(billing: Billing, accounts: Accounts, logger: RouteLogger): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)

  router.get(
    '/billing',
    auth,
    handle(logger, async (_request, response) => {
      response.json(await billing.balance(principalOf(response)))
    }),
  )

  router.get(
    '/billing/usage',
    auth,
    handle(logger, async (request, response) => {
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const { items, nextCursor } = await billing.usage(principalOf(response), page.value)
      response.json({ usage: items.map(usageView), nextCursor })
    }),
  )

  router.get(
    '/pipelines',
    auth,
    handle(logger, async (_request, response) => {
      const { pipelines } = await billing.pipelines(principalOf(response))
      response.json({
        pipelines: pipelines.map((pipeline) => ({
          id: pipeline.id,
          name: pipeline.name,
          isDefault: pipeline.isDefault,
          stages: pipeline.stages.map((stage) => ({
            id: stage.id,
            name: stage.name,
            position: stage.position,
          })),
        })),
      })
    }),
  )

  return router
}
