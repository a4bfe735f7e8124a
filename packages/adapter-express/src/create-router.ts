import {
  type Accounts,
  type Billing,
  type Clock,
  createAgentService,
  createIntegrationService,
  createKnowledgeService,
  createRandomIds,
  createSystemClock,
  type Switchboard,
  type WebhookReceiver,
} from '@switchboard/core'
import { Router } from 'express'
import type { RouteLogger } from './handle.js'
import { errorHandler, jsonBody, notFound, refuseNulCharacters, requestId } from './middleware.js'
import { checkRouterOptions } from './router-options.js'
import { accountRoutes } from './routes/account-routes.js'
import { agentRoutes } from './routes/agent-routes.js'
import { billingRoutes } from './routes/billing-routes.js'
import { integrationRoutes } from './routes/integration-routes.js'
import { knowledgeRoutes } from './routes/knowledge-routes.js'
import { sessionRoutes } from './routes/session-routes.js'
import { webhookRoutes } from './routes/webhook-routes.js'

export interface RouterOptions {
  readonly switchboard: Switchboard
  readonly accounts: Accounts
  readonly billing: Billing
  /**
   * Base of the webhook URLs handed out for integrations, e.g. `https://chat.example.com`: an
   * absolute http(s) URL, possibly with a path, without a query or fragment.
   */
  readonly publicUrl: string
  readonly logger?: RouteLogger
  /** Timestamps of agents and integrations; the system clock unless a test drives time. */
  readonly clock?: Clock
  /**
   * Webhook receivers by connector type, served at `POST|GET /webhook/{type}/{integrationId}`,
   * e.g. `{ msgplatform: createMsgPlatformWebhookHandler({ switchboard }) }`.
   */
  readonly webhooks?: Readonly<Record<string, WebhookReceiver>>
  /** Answer webhooks that did not arrive over HTTPS with 403 `HTTPS_REQUIRED` (production). */
  readonly requireHttps?: boolean
}

const quietLogger: RouteLogger = { error: () => undefined }

/**
 * Every endpoint of the service under one Express router, to be mounted at `/api`. Routes only
 * translate HTTP to core calls and back; every rule lives in core. Throws a `ConfigError` on a
 * missing option or a publicUrl that is not an absolute http(s) URL.
 */
export function createRouter(options: RouterOptions): Router {
  checkRouterOptions(options)
  const logger = options.logger ?? quietLogger
  const router = Router()
  router.use(requestId)
  // No endpoint serves OPTIONS. Left to Express, each router below answered it itself, 200 in
  // text/plain listing its methods, without a bearer; every other method without a route is 404.
  router.use((request, response, next) => {
    if (request.method === 'OPTIONS') return notFound(request, response, next)
    next()
  })

  router.get('/health', (_request, response) => {
    response.json({ ok: true, storage: options.switchboard.storage.kind })
  })

  // Before the JSON parser: webhook signatures are checked over the raw bytes.
  router.use(
    webhookRoutes({
      receivers: options.webhooks ?? {},
      requireHttps: options.requireHttps ?? false,
      logger,
    }),
  )
  router.use(jsonBody, refuseNulCharacters)
  router.use(accountRoutes(options.accounts, logger))
  const { switchboard, accounts } = options
  const clock = options.clock ?? createSystemClock()
  const agents = createAgentService({ storage: switchboard.storage, clock, knowledge: switchboard.knowledge })
  const integrations = createIntegrationService({
    storage: switchboard.storage,
    clock,
    connectors: (type) => switchboard.connector(type),
    publicUrl: options.publicUrl,
  })
  const knowledge = createKnowledgeService({
    storage: switchboard.storage,
    knowledge: switchboard.knowledge,
    clock,
    ids: createRandomIds(),
  })
  router.use(agentRoutes(agents, accounts, logger))
  router.use(knowledgeRoutes(knowledge, accounts, logger))
  router.use(integrationRoutes(integrations, accounts, logger))
  router.use(sessionRoutes(switchboard, accounts, logger))
  router.use(billingRoutes(options.billing, accounts, logger))

  router.use(notFound)
  router.use(errorHandler(logger))
  return router
}
