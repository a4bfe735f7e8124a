import {
  type Clock,
  createRandomIds,
  createSystemClock,
  type ErrorCode,
  type IdGenerator,
  type Integration,
  type NewWebhookLog,
  type RuntimeLogger,
  type Switchboard,
  verifyWebhookSignature,
  type WebhookAnswer,
  type WebhookReceiver,
  type WebhookRequest,
} from '@switchboard/core'
import { type MsgPlatformWebhook, parseMsgPlatformWebhook } from './parse-webhook.js'
import { MSGPLATFORM_TYPE } from './platform-config.js'

export interface MsgPlatformWebhookHandlerOptions {
  readonly switchboard: Switchboard
  /** Times of the webhook log; the system clock unless a test drives time. */
  readonly clock?: Clock
  /** Ids of the webhook log entries. */
  readonly ids?: IdGenerator
  /** Told when a webhook log entry could not be written (the webhook is answered anyway). */
  readonly logger?: RuntimeLogger
}

/** Integration ids are strings of digits (CONTRACT §2); anything else names no integration. */
const INTEGRATION_ID = /^[1-9][0-9]{0,17}$/
/** A `webhook-id` longer than this is not an id, and is not used as one. */
const WEBHOOK_ID_MAX = 500
const SIGNATURE_HEADERS = ['x-webhook-signature', 'x-hub-signature-256'] as const
/** How often a message is tried on a freshly read integration that changes under it each time. */
const FRESH_ATTEMPTS = 3

/** The statuses of CONTRACT §6; only these leave this handler (a thrown error becomes 500 at the edge). */
const STATUS = {
  INVALID_SIGNATURE: 401,
  INTEGRATION_INACTIVE: 403,
  NOT_FOUND: 404,
} as const satisfies Partial<Record<ErrorCode, number>>

type LogEntry = Pick<NewWebhookLog, 'outcome' | 'httpStatus' | 'reason' | 'sessionId' | 'messageId'>

const silentLogger: RuntimeLogger = { warn: () => undefined, error: () => undefined }

/**
 * The inbound side of the msgplatform channel, free of any HTTP framework: mount it
 * with an adapter (`createRouter({ webhooks: { msgplatform: handler } })` in
 * `@switchboard/adapter-express`), or call `handle` from any server that can hand over the raw
 * body. The adapter checks HTTPS and the body size first; this checks, in order, the integration
 * (404), the signature (401) and whether it is active (403), then stores the message before it
 * answers 200. Every delivery to a known integration is written to its webhook log.
 */
export function createMsgPlatformWebhookHandler(options: MsgPlatformWebhookHandlerOptions): WebhookReceiver {
  const { switchboard } = options
  const storage = switchboard.storage
  const clock = options.clock ?? createSystemClock()
  const ids = options.ids ?? createRandomIds()
  const logger = options.logger ?? silentLogger

  const findIntegration = async (integrationId: string, remembered = false): Promise<Integration | null> => {
    if (!INTEGRATION_ID.test(integrationId)) return null
    const integration = await switchboard.integration(integrationId, { remembered })
    // Another type's integration is not reachable here: to this URL it does not exist.
    return integration !== null && integration.type === MSGPLATFORM_TYPE ? integration : null
  }

  const logEntry = (integration: Integration, receivedAt: Date, entry: LogEntry): NewWebhookLog => ({
    id: ids.uuid(),
    companyId: integration.companyId,
    integrationId: integration.id,
    receivedAt,
    ...entry,
  })

  const writeLog = async (integration: Integration, receivedAt: Date, entry: LogEntry): Promise<void> => {
    try {
      await storage.webhookLogs.add(logEntry(integration, receivedAt, entry))
    } catch (error) {
      // The log is for people; the message, if any, is already stored, and failing now would make
      // the platform send it again.
      logger.warn(
        { integrationId: integration.id, outcome: entry.outcome, error: String(error) },
        'could not write the webhook log',
      )
    }
  }

  const ignore = async (integration: Integration, receivedAt: Date, reason: string) => {
    await writeLog(integration, receivedAt, { outcome: 'ignored', httpStatus: 200, reason })
    return answer(200, { ok: true, ignored: reason })
  }

  /** Null when the integration changed since it was read: nothing was stored, read it again. */
  const receiveMessage = async (
    integration: Integration,
    receivedAt: Date,
    webhook: Extract<MsgPlatformWebhook, { kind: 'message' }>,
    webhookId: string | undefined,
  ): Promise<WebhookAnswer | null> => {
    const externalId = webhookId ?? webhook.messageId
    // A storage failure throws through here: the edge answers 500 and the platform retries.
    const ingested = await switchboard.ingest(
      {
        integrationId: integration.id,
        clientId: webhook.clientId,
        channelId: webhook.channelId,
        transport: webhook.transport,
        text: webhook.text,
        externalId,
      },
      {
        integration,
        // Stored in the message's transaction: one commit for both, and no message without its entry.
        webhookLog: ({ session, messageId, duplicate, queued }) =>
          logEntry(integration, receivedAt, {
            outcome: duplicate ? 'duplicate' : queued ? 'queued' : 'stored_paused',
            httpStatus: 200,
            ...(duplicate
              ? { reason: `repeated ${webhookId === undefined ? 'message_id' : 'webhook-id'}` }
              : queued
                ? {}
                : // Not queued on an open session: paused, or a human agent holds it (CONTRACT §8).
                  { reason: session.state === 'paused' ? 'session paused' : 'a human agent is active' }),
            sessionId: session.id,
            messageId,
          }),
      },
    )
    if (ingested.isErr()) {
      const { code, message } = ingested.error
      if (code === 'CONFLICT') return null
      // The integration was deleted or switched off while this request was on its way.
      if (code === 'NOT_FOUND') return errorAnswer('NOT_FOUND', 'integration not found')
      if (code === 'INTEGRATION_INACTIVE') {
        await writeLog(integration, receivedAt, {
          outcome: 'rejected',
          httpStatus: STATUS.INTEGRATION_INACTIVE,
          reason: 'integration inactive',
        })
        return errorAnswer('INTEGRATION_INACTIVE', 'the integration is not active')
      }
      // Nothing was stored; a 500 makes the platform try again once the setup is fixed.
      throw new Error(`msgplatform webhook could not be stored: ${code}: ${message}`)
    }
    return ingested.value.duplicate ? answer(200, { ok: true, duplicate: true }) : answer(200, { ok: true })
  }

  /**
   * A status hook. With a webhook-id, the id is recorded in the transaction of the hook's change
   * (the close, the journey step), so the change lands once per id however often the platform
   * sends it, and a delivery whose change did not commit (a storage failure, a process that died)
   * is processed when sent again. A hook that changes nothing (no open session) records its id on
   * its own: a retry of it is a duplicate, and cannot close a session opened since.
   */
  const receiveStatusHook = async (
    integration: Integration,
    receivedAt: Date,
    webhook: Extract<MsgPlatformWebhook, { kind: 'status' }>,
    webhookId: string | undefined,
  ): Promise<WebhookAnswer> => {
    const delivery =
      webhookId === undefined
        ? undefined
        : { integrationId: integration.id, deliveryId: webhookId, at: receivedAt }
    const duplicate = async () => {
      await writeLog(integration, receivedAt, {
        outcome: 'duplicate',
        httpStatus: 200,
        reason: 'repeated webhook-id',
      })
      return answer(200, { ok: true, duplicate: true })
    }
    // A storage failure throws through here: nothing is recorded, the edge answers 500 and the
    // platform retries.
    const noOpenSession = async () => {
      if (delivery !== undefined && !(await storage.webhookDeliveries.record(delivery))) return duplicate()
      return ignore(integration, receivedAt, 'no open session')
    }

    const session = await storage.sessions.findOpen({
      integrationId: integration.id,
      clientId: webhook.clientId,
    })
    if (session === null) return noOpenSession()
    const target = { companyId: session.companyId, sessionId: session.id, webhookDelivery: delivery }
    const changed =
      webhook.hookType === 'dialog_transferred'
        ? await switchboard.sessions.recordExternalTransfer({ ...target, step: transferStep(webhook) })
        : await switchboard.sessions.close({ ...target, reason: `platform ${webhook.hookType}` })
    if (changed.isErr()) {
      if (changed.error.code === 'CONFLICT') return duplicate()
      // Closed between the lookup and the write: there is no open session any more.
      return noOpenSession()
    }
    const transferred = webhook.hookType === 'dialog_transferred'
    await writeLog(integration, receivedAt, {
      outcome: transferred ? 'session_transfer_external' : 'session_close',
      httpStatus: 200,
      reason: webhook.hookType,
      sessionId: session.id,
    })
    return answer(200, { ok: true })
  }

  /** Every check on a fresh read of the integration; null when it changed while the message was stored. */
  const handleOnFreshRead = async (
    request: WebhookRequest,
    receivedAt: Date,
  ): Promise<WebhookAnswer | null> => {
    const integration = await findIntegration(request.integrationId)
    if (integration === null) return errorAnswer('NOT_FOUND', 'integration not found')

    const signed = verifyWebhookSignature({
      rawBody: request.rawBody,
      secret: integration.webhookSecret ?? '',
      headers: request.headers,
    })
    if (!signed) {
      const present = SIGNATURE_HEADERS.some((name) => headerValue(request.headers, name) !== undefined)
      await writeLog(integration, receivedAt, {
        outcome: 'rejected',
        httpStatus: STATUS.INVALID_SIGNATURE,
        reason: present ? 'invalid signature' : 'missing signature',
      })
      return errorAnswer('INVALID_SIGNATURE', 'the webhook signature is missing or invalid')
    }
    // After the signature, so an unsigned caller learns nothing about the integration's state.
    if (!integration.active) {
      await writeLog(integration, receivedAt, {
        outcome: 'rejected',
        httpStatus: STATUS.INTEGRATION_INACTIVE,
        reason: 'integration inactive',
      })
      return errorAnswer('INTEGRATION_INACTIVE', 'the integration is not active')
    }

    const webhook = parseMsgPlatformWebhook(request.rawBody)
    switch (webhook.kind) {
      case 'ignored':
        return ignore(integration, receivedAt, webhook.reason)
      case 'message':
        return receiveMessage(integration, receivedAt, webhook, webhookIdOf(request.headers))
      case 'status':
        return receiveStatusHook(integration, receivedAt, webhook, webhookIdOf(request.headers))
    }
  }

  /**
   * A customer message to an integration as remembered from an earlier webhook, which saves
   * reading it for every webhook. Only a message whose signature checks out against an active
   * copy goes this way, and its store checks the copy is still current; null otherwise, and a
   * fresh read decides.
   */
  const receiveOnRememberedCopy = async (
    request: WebhookRequest,
    receivedAt: Date,
  ): Promise<WebhookAnswer | null> => {
    const integration = await findIntegration(request.integrationId, true)
    if (integration === null || !integration.active) return null
    const signed = verifyWebhookSignature({
      rawBody: request.rawBody,
      secret: integration.webhookSecret ?? '',
      headers: request.headers,
    })
    if (!signed) return null
    const webhook = parseMsgPlatformWebhook(request.rawBody)
    if (webhook.kind !== 'message') return null
    return receiveMessage(integration, receivedAt, webhook, webhookIdOf(request.headers))
  }

  return {
    async handle(request: WebhookRequest): Promise<WebhookAnswer> {
      const receivedAt = clock.now()
      const answered = await receiveOnRememberedCopy(request, receivedAt)
      if (answered !== null) return answered
      for (let attempt = 1; attempt <= FRESH_ATTEMPTS; attempt += 1) {
        const fresh = await handleOnFreshRead(request, receivedAt)
        if (fresh !== null) return fresh
      }
      // Nothing was stored; a 500 makes the platform try again.
      throw new Error('msgplatform webhook: the integration kept changing while the message was stored')
    },

    async refused({ integrationId, status, reason }): Promise<void> {
      const receivedAt = clock.now()
      const integration = await findIntegration(integrationId)
      if (integration !== null)
        await writeLog(integration, receivedAt, { outcome: 'rejected', httpStatus: status, reason })
    },

    async handleVerification({ integrationId }): Promise<WebhookAnswer> {
      const integration = await findIntegration(integrationId)
      if (integration === null) return errorAnswer('NOT_FOUND', 'integration not found')
      if (!integration.active) return errorAnswer('INTEGRATION_INACTIVE', 'the integration is not active')
      return answer(200, { ok: true, verified: true })
    },
  }
}

/** The SCC journey step of a platform-side transfer, naming the operator when the hook does. */
function transferStep(webhook: Extract<MsgPlatformWebhook, { kind: 'status' }>): string {
  const operator = webhook.operatorId === undefined ? '' : ` to operator ${webhook.operatorId}`
  const dialog = webhook.dialogId === undefined ? '' : ` (dialog ${webhook.dialogId})`
  return `Dialog transferred on the platform${operator}${dialog}`
}

/** The Standard Webhooks `webhook-id` header: the delivery's id, the same on every retry. */
function webhookIdOf(headers: WebhookRequest['headers']): string | undefined {
  const value = headerValue(headers, 'webhook-id')?.trim()
  return value === undefined || value === '' || value.length > WEBHOOK_ID_MAX ? undefined : value
}

function headerValue(headers: WebhookRequest['headers'], name: string): string | undefined {
  if (typeof headers !== 'object' || headers === null) return undefined
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue
    const first = Array.isArray(value) ? value[0] : value
    if (typeof first === 'string') return first
  }
  return undefined
}

function answer(status: number, body: unknown): WebhookAnswer {
  return { status, body }
}

function errorAnswer(code: keyof typeof STATUS, message: string): WebhookAnswer {
  return { status: STATUS[code], body: { error: { code, message } } }
}
