import {
  type Accounts,
  type AgentService,
  agentInputSchema,
  agentPatchSchema,
  switchboardError,
} from '@switchboard/core'
import { Router } from 'express'
import { handle, principalOf, type RouteLogger } from '../handle.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { integerId } from '../path-ids.js'
import { bodyOf } from '../request-body.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'
import { agentView } from '../views.js'

const notFound = switchboardError('NOT_FOUND', 'agent not found')

/** `/api/agents` and `/api/agents/{id}` (CONTRACT §4). */
export function agentRoutes(agents: AgentService, accounts: Accounts, logger: RouteLogger): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)

  router.post(
    '/agents',
    auth,
    handle(logger, async (request, response) => {
      const input = validate(agentInputSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      const created = await agents.create(principalOf(response).companyId, input.value)
      if (created.isErr()) return sendError(response, created.error)
      response.status(201).json(agentView(created.value))
    }),
  )

  router.get(
    '/agents',
    auth,
    handle(logger, async (request, response) => {
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const { items, nextCursor } = await agents.list(principalOf(response).companyId, page.value)
      response.json({ agents: items.map(agentView), nextCursor })
    }),
  )

  router.get(
    '/agents/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = integerId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const agent = await agents.get(principalOf(response).companyId, id)
      if (agent.isErr()) return sendError(response, agent.error)
      response.json(agentView(agent.value))
    }),
  )

  router.patch(
    '/agents/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = integerId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const patch = validate(agentPatchSchema, bodyOf(request))
      if (patch.isErr()) return sendError(response, patch.error)
      const updated = await agents.update(principalOf(response).companyId, id, patch.value)
      if (updated.isErr()) return sendError(response, updated.error)
      response.json(agentView(updated.value))
    }),
  )

  router.delete(
    '/agents/:id',
    auth,
    handle(logger, async (request, response) => {
      const id = integerId(String(request.params.id))
      if (id === null) return sendError(response, notFound)
      const deleted = await agents.delete(principalOf(response).companyId, id)
      if (deleted.isErr()) return sendError(response, deleted.error)
      response.status(204).end()
    }),
  )

  return router
}
