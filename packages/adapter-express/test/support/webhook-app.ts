import {
  createAccounts,
  createBilling,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type WebhookReceiver,
} from '@switchboard/core'
import { createFakePasswordHasher, createFakeTokenSigner } from '@switchboard/core/testing'
import express, { type Express, type RequestHandler } from 'express'
import { createRouter, type RouteLogger } from '../../src/index.js'

export interface WebhookAppOptions {
  readonly receivers: Readonly<Record<string, WebhookReceiver>>
  readonly requireHttps?: boolean
  /** Express's `trust proxy` setting. */
  readonly trustProxy?: string
  readonly logger?: RouteLogger
  /** Runs ahead of the router for every request the app sees. */
  readonly before?: RequestHandler
}

/**
 * An Express app with the router at `/api` on a memory storage whose switchboard runs no turns,
 * for tests about what the HTTP edge does before and around webhook receivers.
 */
export function createWebhookApp(options: WebhookAppOptions): Express {
  const storage = createMemoryStorage()
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
    concurrency: 0,
  })
  const accounts = createAccounts({
    storage,
    hasher: createFakePasswordHasher(),
    signer: createFakeTokenSigner({ secret: 'webhook-app-test-secret' }),
  })
  const app = express()
  if (options.trustProxy !== undefined) app.set('trust proxy', options.trustProxy)
  if (options.before !== undefined) app.use(options.before)
  app.use(
    '/api',
    createRouter({
      switchboard,
      accounts,
      billing: createBilling({ storage }),
      publicUrl: 'https://switchboard.test',
      webhooks: options.receivers,
      ...(options.requireHttps === undefined ? {} : { requireHttps: options.requireHttps }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    }),
  )
  return app
}
