import { readFileSync } from 'node:fs'
import { createServer as createHttpServer, type Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { createArgon2PasswordHasher, createJoseTokenSigner, createRouter } from '@switchboard/adapter-express'
import {
  type Connector,
  createAccounts,
  createBilling,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type LlmProvider,
  type PasswordHasher,
  type Switchboard,
  type Tool,
} from '@switchboard/core'
import express from 'express'
import { type Logger, pino } from 'pino'
import type { ServerConfig } from './config.js'
import { loadOrCreateJwtSecret } from './jwt-secret.js'

export interface ReferenceServerOptions {
  readonly logger?: Logger
  /** Replaces the model chosen from the environment (tests pass a scripted one). */
  readonly model?: LlmProvider
  readonly connectors?: readonly Connector[]
  readonly tools?: readonly Tool[]
  /** Replaces argon2id, e.g. with a fast fake in tests. */
  readonly passwordHasher?: PasswordHasher
}

export interface ReferenceServer {
  /** `http://host:port` (or https), with the port actually bound. */
  readonly url: string
  readonly server: Server
  readonly switchboard: Switchboard
  readonly logger: Logger
  /** Stops accepting connections, drains running turns and deliveries, closes storage. */
  close(): Promise<void>
}

const DRAIN_TIMEOUT_MS = 10_000

/** Builds the whole service from the SDK and starts listening. */
export async function startReferenceServer(
  config: ServerConfig,
  options: ReferenceServerOptions = {},
): Promise<ReferenceServer> {
  const logger = options.logger ?? pino({ level: config.logLevel })
  if (config.databaseUrl !== undefined) {
    throw new Error(
      'DATABASE_URL is set, but this build has no PostgreSQL storage yet; unset it to use memory',
    )
  }
  const storage = createMemoryStorage()
  const knowledge = createMemoryKnowledgeIndex()
  let model = options.model
  if (model === undefined) {
    model = createOfflineProvider()
    logger.warn(
      'no OPENAI_API_KEY: agents answer with the offline model (knowledge passages, keyword routing)',
    )
  }
  logger.info({ storage: storage.kind, model: model.name }, 'storage and model chosen')

  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge,
    connectors: options.connectors ?? [],
    tools: options.tools ?? [],
    logger: {
      warn: (object, message) => logger.warn(object, message),
      error: (object, message) => logger.error(object, message),
    },
  })
  const jwtSecret = config.jwtSecret ?? (await loadOrCreateJwtSecret(config.dataDir))
  const accounts = createAccounts({
    storage,
    hasher: options.passwordHasher ?? createArgon2PasswordHasher(),
    signer: createJoseTokenSigner({ secret: jwtSecret }),
    settings: {
      accessTokenTtlSeconds: config.accessTokenTtlSeconds,
      refreshTokenTtlSeconds: config.refreshTokenTtlSeconds,
      refreshReuseIntervalSeconds: config.refreshReuseIntervalSeconds,
      superadminEmails: config.superadminEmails,
    },
  })
  const billing = createBilling({ storage })

  const app = express()
  app.disable('x-powered-by')
  if (config.trustProxy !== undefined) app.set('trust proxy', config.trustProxy)
  app.use((request, response, next) => {
    const started = process.hrtime.bigint()
    response.on('finish', () => {
      logger.info(
        {
          requestId: response.locals.requestId,
          method: request.method,
          path: request.path,
          status: response.statusCode,
          ms: Number(process.hrtime.bigint() - started) / 1e6,
        },
        'request',
      )
    })
    next()
  })

  const tls = config.tlsCertFile !== undefined && config.tlsKeyFile !== undefined
  const server: Server = tls
    ? createHttpsServer(
        { cert: readFileSync(config.tlsCertFile!), key: readFileSync(config.tlsKeyFile!) },
        app,
      )
    : createHttpServer(app)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(config.port, config.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
  const url = `${tls ? 'https' : 'http'}://${host}:${address.port}`
  const publicUrl = config.publicUrl ?? url

  // Mounted right after listen, with no await in between, so no request can arrive first; the
  // router needs the bound port for the webhook URLs it hands out when PORT=0.
  app.use(
    '/api',
    createRouter({
      switchboard,
      accounts,
      billing,
      publicUrl,
      logger: { error: (object, message) => logger.error(object, message) },
    }),
  )

  let closing: Promise<void> | null = null
  return {
    url,
    server,
    switchboard,
    logger,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        server.closeIdleConnections()
        await switchboard.stop({ timeoutMs: DRAIN_TIMEOUT_MS })
        server.closeAllConnections()
        await closed
        await storage.close()
      })()
      return closing
    },
  }
}
