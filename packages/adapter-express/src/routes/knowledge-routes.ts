import { type Accounts, type KnowledgeService, switchboardError } from '@switchboard/core'
import { Router } from 'express'
import { z } from 'zod'
import { handle, principalOf, type RouteLogger } from '../handle.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { integerId, uuidId } from '../path-ids.js'
import { bodyOf } from '../request-body.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'

const documentSchema = z.strictObject({
  title: z.string().trim().min(1).max(200),
  content: z.string().min(1).max(100_000),
})

const agentNotFound = switchboardError('NOT_FOUND', 'agent not found')
const documentNotFound = switchboardError('NOT_FOUND', 'document not found')

/** `/api/agents/{id}/knowledge` (CONTRACT §4). */
export function knowledgeRoutes(
  knowledge: KnowledgeService,
  accounts: Accounts,
  logger: RouteLogger,
): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)

  router.post(
    '/agents/:id/knowledge',
    auth,
    handle(logger, async (request, response) => {
      const agentId = integerId(String(request.params.id))
      if (agentId === null) return sendError(response, agentNotFound)
      const input = validate(documentSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      const added = await knowledge.add({ companyId: principalOf(response).companyId, agentId }, input.value)
      if (added.isErr()) return sendError(response, added.error)
      response.status(201).json(added.value)
    }),
  )

  router.get(
    '/agents/:id/knowledge',
    auth,
    handle(logger, async (request, response) => {
      const agentId = integerId(String(request.params.id))
      if (agentId === null) return sendError(response, agentNotFound)
      const page = validate(pageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const listed = await knowledge.list({ companyId: principalOf(response).companyId, agentId }, page.value)
      if (listed.isErr()) return sendError(response, listed.error)
      response.json({ documents: listed.value.items, nextCursor: listed.value.nextCursor })
    }),
  )

  router.delete(
    '/agents/:id/knowledge/:documentId',
    auth,
    handle(logger, async (request, response) => {
      const agentId = integerId(String(request.params.id))
      if (agentId === null) return sendError(response, agentNotFound)
      const documentId = uuidId(String(request.params.documentId))
      if (documentId === null) return sendError(response, documentNotFound)
      const removed = await knowledge.remove({
        companyId: principalOf(response).companyId,
        agentId,
        documentId,
      })
      if (removed.isErr()) return sendError(response, removed.error)
      response.status(204).end()
    }),
  )

  return router
}
