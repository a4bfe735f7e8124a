import {
  type Accounts,
  EXTERNAL_REFERENCE_MAX,
  PAUSE_REASON_MAX,
  RESUME_NOTE_MAX,
  type Session,
  type Switchboard,
  type SwitchboardError,
  switchboardError,
} from '@switchboard/core'
import { type Response, Router } from 'express'
import type { Result } from 'neverthrow'
import { z } from 'zod'
import { handle, principalOf, type RouteLogger } from '../handle.js'
import { decodeMessageCursor, encodeMessageCursor } from '../message-cursor.js'
import { requireAuth } from '../middleware.js'
import { pageQuerySchema } from '../pagination.js'
import { uuidId } from '../path-ids.js'
import { bodyOf } from '../request-body.js'
import { sendError } from '../send-error.js'
import { validate } from '../validate.js'
import { messageView, sessionContextView, sessionStatusView, sessionView } from '../views.js'

/** Longest operator message, as long as the longest webchat frame's text (CONTRACT §7). */
const MESSAGE_TEXT_MAX = 4000
const platformId = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)

const listQuerySchema = pageQuerySchema.extend({
  state: z.enum(['ongoing', 'paused', 'closed']).optional(),
  integrationId: z
    .string()
    .regex(/^[1-9][0-9]{0,17}$/, 'must be an integration id')
    .optional(),
})

// The messages list pages by the edge's own cursor (`message-cursor.ts`), not by a storage's.
const messagePageQuerySchema = pageQuerySchema.extend({ cursor: z.string().min(1).max(500).optional() })

const pauseSchema = z.strictObject({
  reason: z.string().max(PAUSE_REASON_MAX).optional(),
  externalReference: z.string().max(EXTERNAL_REFERENCE_MAX).optional(),
})
const resumeSchema = z.strictObject({ note: z.string().max(RESUME_NOTE_MAX).optional() })
const closeSchema = z.strictObject({ reason: z.string().max(PAUSE_REASON_MAX).optional() })
const reassignSchema = z.strictObject({
  agentId: z.number().int().positive().max(2_147_483_647),
  operatorId: platformId.optional(),
  groupId: platformId.optional(),
})
const messageSchema = z.strictObject({ text: z.string().min(1).max(MESSAGE_TEXT_MAX) })

const notFound = switchboardError('NOT_FOUND', 'session not found')

/** `/api/sessions` and everything under `/api/sessions/{id}` (CONTRACT §8). */
export function sessionRoutes(switchboard: Switchboard, accounts: Accounts, logger: RouteLogger): Router {
  const router = Router()
  const auth = requireAuth(accounts, logger)
  const operations = switchboard.sessions

  /**
   * The session the path names, of the caller's company; sends 404 and answers null otherwise.
   * Looked up before the body is read: an unknown or foreign session is NOT_FOUND whatever is sent
   * to it, even a body naming a foreign agent (CONTRACT §2).
   */
  const sessionOf = async (id: string | undefined, response: Response): Promise<Session | null> => {
    const sessionId = uuidId(id)
    const session =
      sessionId === null
        ? null
        : await operations.get({ companyId: principalOf(response).companyId, sessionId })
    if (session === null) sendError(response, notFound)
    return session
  }

  const sendStatus = (response: Response, result: Result<Session, SwitchboardError>): void => {
    if (result.isErr()) sendError(response, result.error)
    else response.json(sessionStatusView(result.value))
  }

  router.get(
    '/sessions',
    auth,
    handle(logger, async (request, response) => {
      const query = validate(listQuerySchema, request.query, 'query')
      if (query.isErr()) return sendError(response, query.error)
      const { state, integrationId, limit, cursor } = query.value
      const { items, nextCursor } = await switchboard.storage.sessions.list({
        companyId: principalOf(response).companyId,
        limit,
        ...(cursor === undefined ? {} : { cursor }),
        ...(state === undefined ? {} : { state }),
        ...(integrationId === undefined ? {} : { integrationId }),
      })
      response.json({ sessions: items.map(sessionView), nextCursor })
    }),
  )

  router.get(
    '/sessions/:id',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session !== null) response.json(sessionView(session))
    }),
  )

  router.get(
    '/sessions/:id/context',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session !== null) response.json(sessionContextView(session))
    }),
  )

  router.get(
    '/sessions/:id/status',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session !== null) response.json(sessionStatusView(session))
    }),
  )

  router.get(
    '/sessions/:id/messages',
    auth,
    handle(logger, async (request, response) => {
      const page = validate(messagePageQuerySchema, request.query, 'query')
      if (page.isErr()) return sendError(response, page.error)
      const afterSequence =
        page.value.cursor === undefined ? undefined : decodeMessageCursor(page.value.cursor)
      if (afterSequence === null) {
        return sendError(
          response,
          switchboardError('VALIDATION_ERROR', 'invalid query: cursor', [
            { path: 'cursor', message: 'not a cursor this API handed out' },
          ]),
        )
      }
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      // One more than asked tells whether another page follows.
      const found = await switchboard.storage.messages.list({
        sessionId: session.id,
        limit: page.value.limit + 1,
        ...(afterSequence === undefined ? {} : { afterSequence }),
      })
      const messages = found.slice(0, page.value.limit)
      const last = messages.at(-1)
      response.json({
        messages: messages.map(messageView),
        nextCursor:
          found.length > page.value.limit && last !== undefined ? encodeMessageCursor(last.sequence) : null,
      })
    }),
  )

  router.post(
    '/sessions/:id/messages',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      const input = validate(messageSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      const sent = await operations.sendOperatorMessage({
        companyId: session.companyId,
        sessionId: session.id,
        text: input.value.text,
      })
      if (sent.isErr()) return sendError(response, sent.error)
      response.status(201).json(messageView(sent.value))
    }),
  )

  router.post(
    '/sessions/:id/pause',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      const input = validate(pauseSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      sendStatus(
        response,
        await operations.pause({ companyId: session.companyId, sessionId: session.id, ...input.value }),
      )
    }),
  )

  router.post(
    '/sessions/:id/resume',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      const input = validate(resumeSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      sendStatus(
        response,
        await operations.resume({ companyId: session.companyId, sessionId: session.id, ...input.value }),
      )
    }),
  )

  router.post(
    '/sessions/:id/close',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      const input = validate(closeSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      sendStatus(
        response,
        await operations.close({ companyId: session.companyId, sessionId: session.id, ...input.value }),
      )
    }),
  )

  router.post(
    '/sessions/:id/reassign',
    auth,
    handle(logger, async (request, response) => {
      const session = await sessionOf(String(request.params.id), response)
      if (session === null) return
      const input = validate(reassignSchema, bodyOf(request))
      if (input.isErr()) return sendError(response, input.error)
      sendStatus(
        response,
        await operations.reassign({ companyId: session.companyId, sessionId: session.id, ...input.value }),
      )
    }),
  )

  return router
}
