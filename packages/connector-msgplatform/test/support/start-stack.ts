import { sign } from '@octokit/webhooks-methods'
import { createFakePasswordHasher, createScriptedModel, type ScriptedModel } from '@switchboard/core/testing'
import { type ReferenceServer, readConfig, startReferenceServer } from '@switchboard/reference-server'
import { type FakePlatform, startFakePlatform } from './fake-platform.js'

export const WEBHOOK_SECRET = 'whsec-test-0123456789abcdef'
export const PLATFORM_TOKEN = 'platform-api-token-42'

export interface Answer {
  readonly status: number
  // biome-ignore lint/suspicious/noExplicitAny: tests read answers of many shapes
  readonly body: any
}

export interface WebhookOptions {
  /** Which header carries the signature; `x-webhook-signature` unless told otherwise. */
  readonly header?: 'x-webhook-signature' | 'x-hub-signature-256'
  /** Sign with this secret instead of the integration's. */
  readonly secret?: string
  /** Send no signature at all. */
  readonly unsigned?: boolean
  readonly headers?: Readonly<Record<string, string>>
  readonly method?: 'POST' | 'GET'
}

export interface Stack {
  readonly server: ReferenceServer
  readonly platform: FakePlatform
  readonly model: ScriptedModel
  /** A session JWT of the company's owner. */
  readonly token: string
  api(method: string, path: string, body?: unknown): Promise<Answer>
  createAgent(body?: Record<string, unknown>): Promise<number>
  /** A msgplatform integration pointing at the fake platform, with `WEBHOOK_SECRET`. */
  createIntegration(entryAgentId: number, body?: Record<string, unknown>): Promise<string>
  /** Posts `body` (JSON.stringify'd unless a string) signed by @octokit/webhooks-methods. */
  webhook(integrationId: string, body: unknown, options?: WebhookOptions): Promise<Answer>
  /** A customer message as the platform sends it. */
  message(
    integrationId: string,
    clientId: string,
    text: string,
    extra?: Record<string, unknown>,
    options?: WebhookOptions,
  ): Promise<Answer>
  /** The customer's sessions on the integration, newest first. */
  sessionsOf(integrationId: string, clientId: string): Promise<Record<string, unknown>[]>
  close(): Promise<void>
}

/**
 * The reference server (memory storage, scripted model) with a company, its owner logged in, and
 * a fake platform on a real socket for the integrations to talk to.
 */
export async function startStack(environment: Record<string, string> = {}): Promise<Stack> {
  const platform = await startFakePlatform()
  const model = createScriptedModel()
  const server = await startReferenceServer(
    readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent', ...environment }),
    { passwordHasher: createFakePasswordHasher(), model },
  )

  const call = async (
    method: string,
    path: string,
    init: { body?: string; headers?: Record<string, string> },
  ) => {
    const response = await fetch(`${server.url}${path}`, { method, ...init })
    const text = await response.text()
    return { status: response.status, body: text === '' ? null : JSON.parse(text) }
  }
  const email = 'owner@shop.test'
  const password = 'correct horse battery'
  await call('POST', '/api/auth/register', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password, companyName: 'Shop' }),
  })
  const login = await call('POST', '/api/auth/login', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password }),
  })
  const token = login.body.session.access_token as string

  const api: Stack['api'] = (method, path, body) =>
    call(method, path, {
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })

  const webhook: Stack['webhook'] = async (integrationId, body, options = {}) => {
    const payload = typeof body === 'string' ? body : JSON.stringify(body)
    const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers }
    if (options.unsigned !== true) {
      headers[options.header ?? 'x-webhook-signature'] = await sign(options.secret ?? WEBHOOK_SECRET, payload)
    }
    const method = options.method ?? 'POST'
    return call(method, `/api/webhook/msgplatform/${integrationId}`, {
      headers,
      ...(method === 'POST' ? { body: payload } : {}),
    })
  }

  return {
    server,
    platform,
    model,
    token,
    api,
    async createAgent(body = {}) {
      const created = await api('POST', '/api/agents', { name: 'Agent', ...body })
      if (created.status !== 201) throw new Error(`agent not created: ${JSON.stringify(created.body)}`)
      return created.body.id as number
    },
    async createIntegration(entryAgentId, body = {}) {
      const created = await api('POST', '/api/integrations', {
        type: 'msgplatform',
        name: 'Platform',
        entryAgentId,
        config: { apiBaseUrl: platform.url, apiToken: PLATFORM_TOKEN },
        webhookSecret: WEBHOOK_SECRET,
        ...body,
      })
      if (created.status !== 201) throw new Error(`integration not created: ${JSON.stringify(created.body)}`)
      return created.body.id as string
    },
    webhook,
    message: (integrationId, clientId, text, extra = {}, options = {}) =>
      webhook(
        integrationId,
        { text, client_id: clientId, channel_id: `channel-${clientId}`, transport: 'telegram', ...extra },
        options,
      ),
    async sessionsOf(integrationId, clientId) {
      const listed = await api('GET', `/api/sessions?integrationId=${integrationId}&limit=100`)
      return (listed.body.sessions as Record<string, unknown>[]).filter(
        (session) => (session.customer as { clientId: string }).clientId === clientId,
      )
    },
    async close() {
      await server.close()
      await platform.close()
    },
  }
}

/** Polls `read` until `accept` holds; fails with the last value after `timeoutMs`. */
export async function eventually<T>(
  read: () => Promise<T>,
  accept: (value: T) => boolean,
  timeoutMs = 5000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (accept(value)) return value
    if (Date.now() > deadline)
      throw new Error(`condition not met in time; last value: ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
