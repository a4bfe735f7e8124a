import { readFileSync } from 'node:fs'
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import {
  answerClientErrors,
  createArgon2PasswordHasher,
  createJoseTokenSigner,
  createRouter,
  createWebhookLane,
  errorHandler,
  MIN_JWT_SECRET_BYTES,
  notFound,
  type RouteLogger,
  sendError,
  type TrustProxy,
} from '@switchboard/adapter-express'
import {
  createMsgPlatformConnector,
  createMsgPlatformWebhookHandler,
} from '@switchboard/connector-msgplatform'
import { createWebchatServer, webchatAssets } from '@switchboard/connector-webchat'
import {
  type Connector,
  createAccounts,
  createBilling,
  createOfflineProvider,
  createSwitchboard,
  type LlmProvider,
  type PasswordHasher,
  type Switchboard,
  switchboardError,
  type Tool,
} from '@switchboard/core'
import { createOpenAiProvider } from '@switchboard/provider-openai'
import express from 'express'
import { type Logger, pino } from 'pino'
import type { ServerConfig } from './config.js'
import { loadOrCreateJwtSecret } from './jwt-secret.js'
import { openStorage } from './open-storage.js'

export interface ReferenceServerOptions {
  readonly logger?: Logger
  /** Replaces the model chosen from the environment (tests pass a scripted one). */
  readonly model?: LlmProvider
  readonly connectors?: readonly Connector[]
  readonly tools?: readonly Tool[]
  /** Replaces argon2id, e.g. with a fast fake in tests. */
  readonly passwordHasher?: PasswordHasher
  /**
   * How long a job stays with a process that stopped renewing it (`createSwitchboard`'s
   * `leaseMs`, default 55 s): a job of a process that died waits this long to be taken again.
   */
  readonly leaseMs?: number
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
const OPENAI_API_URL = 'https://api.openai.com/v1'

/** Builds the whole service from the SDK and starts listening. */
export async function startReferenceServer(
  config: ServerConfig,
  options: ReferenceServerOptions = {},
): Promise<ReferenceServer> {
  const logger = options.logger ?? pino({ level: config.logLevel })
  const opened = await openStorage(config, logger)
  const { storage, knowledge, eventBus } = opened
  let model = options.model
  if (model === undefined && config.openAiApiKey !== undefined) {
    // Given explicitly, so the URL logged is the one used whatever else the environment holds.
    const baseUrl = config.openAiBaseUrl ?? OPENAI_API_URL
    model = createOpenAiProvider({ apiKey: config.openAiApiKey, baseURL: baseUrl })
    logger.info({ model: 'openai', baseUrl }, 'agents answer with the OpenAI provider')
  }
  if (model === undefined) {
    model = createOfflineProvider()
    logger.warn(
      'no OPENAI_API_KEY: agents answer with the offline model (knowledge passages, keyword routing)',
    )
  }
  logger.info({ storage: storage.kind, model: model.name }, 'storage and model chosen')

  const given = options.connectors ?? []
  const switchboard = createSwitchboard({
    storage,
    model,
    knowledge,
    // A given connector of the msgplatform type takes the built-in one's place: the switchboard
    // refuses two of one type.
    connectors: [
      ...(given.some((connector) => connector.type === 'msgplatform') ? [] : [createMsgPlatformConnector()]),
      ...given,
    ],
    tools: options.tools ?? [],
    // The service sells credits: a company at 0 USD gets no more answers (CONTRACT §9).
    enforceCredits: true,
    leaseMs: options.leaseMs,
    logger: {
      warn: (object, message) => logger.warn(object, message),
      error: (object, message) => logger.error(object, message),
    },
  })
  if (config.jwtSecret !== undefined && Buffer.byteLength(config.jwtSecret) < MIN_JWT_SECRET_BYTES) {
    logger.warn(
      `JWT_SECRET is shorter than ${MIN_JWT_SECRET_BYTES} bytes (UTF-8): HS256 wants a secret at least as long as its 32-byte hash; tokens signed with a short one are easier to forge`,
    )
  }
  const jwtSecret = config.jwtSecret ?? (await loadOrCreateJwtSecret(config.dataDir))
  const accounts = createAccounts({
    storage,
    hasher: options.passwordHasher ?? createArgon2PasswordHasher(),
    // The operator's secret is taken whatever its length (a short one was warned about above).
    signer: createJoseTokenSigner({ secret: jwtSecret, minimumSecretBytes: 1 }),
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
  // RFC 9112 §3.2: an HTTP/1.1 request without Host is answered 400. Node's own answer (the server
  // is created with requireHostHeader off) has an empty body; this one has the contract's shape.
  app.use((request, response, next) => {
    if (request.httpVersion !== '1.1' || request.headers.host !== undefined) return next()
    response.set('connection', 'close')
    sendError(response, switchboardError('VALIDATION_ERROR', 'an HTTP/1.1 request needs a Host header'))
  })

  // The webchat widget and a page to try it (CONTRACT §7); its WebSocket is attached below.
  const webchatPage = webchatAssets()
  app.get('/widget.js', (_request, response) => {
    response
      .type('application/javascript')
      .set('cache-control', 'public, max-age=300')
      .send(webchatPage.widgetJs)
  })
  app.get('/demo/webchat', (request, response) => {
    const integrationId = request.query.integration
    if (typeof integrationId !== 'string' || !/^[1-9][0-9]{0,17}$/.test(integrationId)) {
      sendError(
        response,
        switchboardError(
          'VALIDATION_ERROR',
          'open /demo/webchat?integration=<id>, with the id of a webchat integration',
          [{ path: 'integration', message: 'the id of a webchat integration' }],
        ),
      )
      return
    }
    response.type('html').send(webchatPage.demoHtml({ integrationId }))
  })

  const routeLogger: RouteLogger = { error: (object, message) => logger.error(object, message) }
  const webhookReceivers = {
    msgplatform: createMsgPlatformWebhookHandler({
      switchboard,
      logger: {
        warn: (object, message) => logger.warn(object, message),
        error: (object, message) => logger.error(object, message),
      },
    }),
  }
  // Plain signed webhooks skip Express (the busiest requests; see createWebhookLane); every other
  // request, and any webhook out of the ordinary, is the app's.
  const webhookLane = createWebhookLane({
    receivers: webhookReceivers,
    mountPath: '/api',
    requireHttps: config.production,
    trustProxy: app.get('trust proxy fn') as TrustProxy,
    logger: routeLogger,
  })
  const listener = (request: IncomingMessage, response: ServerResponse) => {
    logRequest(logger, request, response)
    if (!webhookLane(request, response)) app(request, response)
  }

  const tls = config.tlsCertFile !== undefined && config.tlsKeyFile !== undefined
  const server: Server = tls
    ? createHttpsServer(
        {
          cert: readFileSync(config.tlsCertFile!),
          key: readFileSync(config.tlsKeyFile!),
          requireHostHeader: false,
        },
        listener,
      )
    : createHttpServer({ requireHostHeader: false }, listener)
  answerClientErrors(server)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(config.port, config.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  // Once listening, an error here is an accepted connection that failed (EMFILE when out of file
  // descriptors): unheard, it would end the process and every connection with it.
  server.on('error', (error) =>
    logger.error({ error: String(error) }, 'the HTTP server failed to accept a connection'),
  )
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
      logger: routeLogger,
      webhooks: webhookReceivers,
      requireHttps: config.production,
    }),
  )
  // Outside /api too, an unknown route or a path that cannot be decoded answers in the contract's
  // error shape (CONTRACT §2), not Express's HTML page.
  app.use(notFound)
  app.use(errorHandler(routeLogger))

  // Replies reach the visitor's socket over the event bus, whichever process ran the turn.
  const webchat = createWebchatServer({
    switchboard,
    eventBus,
    server,
    logger: {
      warn: (object, message) => logger.warn(object, message),
      error: (object, message) => logger.error(object, message),
    },
  })

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
        // After the drain, so replies of the last turns still reach the widgets.
        await webchat.close()
        server.closeAllConnections()
        await closed
        await opened.close()
      })()
      return closing
    },
  }
}

/** One log line per request, whichever of the webhook lane and the app answered it. */
function logRequest(logger: Logger, request: IncomingMessage, response: ServerResponse): void {
  if (!logger.isLevelEnabled('info')) return
  const started = process.hrtime.bigint()
  const url = request.url ?? ''
  const query = url.indexOf('?')
  const path = query === -1 ? url : url.slice(0, query)
  response.on('finish', () => {
    logger.info(
      {
        requestId: response.getHeader('x-request-id'),
        method: request.method,
        path,
        status: response.statusCode,
        ms: Number(process.hrtime.bigint() - started) / 1e6,
      },
      'request',
    )
  })
}
