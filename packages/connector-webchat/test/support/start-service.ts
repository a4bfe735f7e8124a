import { request as httpsRequest } from 'node:https'
import { createFakePasswordHasher, createScriptedModel, type ScriptedModel } from '@switchboard/core/testing'
import { type ReferenceServer, readConfig, startReferenceServer } from '@switchboard/reference-server'

export interface AgentInput {
  readonly name: string
  readonly kind?: 'ai' | 'human'
  readonly handoff?: Record<string, unknown>
  readonly fallbackReply?: string | null
}

/** The reference server with a scripted model and a registered company, driven over HTTP. */
export interface Service {
  readonly reference: ReferenceServer
  readonly url: string
  readonly model: ScriptedModel
  /** The company's JWT. */
  readonly token: string
  api<T = Record<string, unknown>>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>
  createAgent(input: AgentInput): Promise<number>
  createWebchat(options: { entryAgentId: number; allowedOrigins?: string[] }): Promise<string>
  /** `ws://…/api/webchat/{id}` (`wss://` over HTTPS), with `?token=` when given. */
  socketUrl(integrationId: string, token?: string): string
  close(): Promise<void>
}

let companies = 0

/** fetch, but trusting the self-signed test certificate when the reference server runs HTTPS. */
async function fetchLocal(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; text(): Promise<string> }> {
  if (!url.startsWith('https:')) return fetch(url, init)
  return new Promise((resolve, reject) => {
    const options = { method: init.method, headers: init.headers, rejectUnauthorized: false }
    const request = httpsRequest(url, options, (response) => {
      let text = ''
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString()
      })
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: async () => text }))
    })
    request.on('error', reject)
    request.end(init.body)
  })
}

/** `environment` adds to the reference server's (e.g. TLS_CERT_FILE and TLS_KEY_FILE). */
export async function startService(environment: Record<string, string> = {}): Promise<Service> {
  const model = createScriptedModel()
  const config = readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent', ...environment })
  const reference = await startReferenceServer(config, { passwordHasher: createFakePasswordHasher(), model })
  const url = reference.url
  const request = async <T>(method: string, path: string, body: unknown, token: string | null) => {
    const response = await fetchLocal(`${url}${path}`, {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await response.text()
    return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as T }
  }
  companies += 1
  const email = `owner-${companies}-${process.pid}@shop.test`
  await request('POST', '/api/auth/register', { email, password: 'correct horse', companyName: 'Shop' }, null)
  const login = await request<{ session: { access_token: string } }>(
    'POST',
    '/api/auth/login',
    { email, password: 'correct horse' },
    null,
  )
  const token = login.body.session.access_token

  const service: Service = {
    reference,
    url,
    model,
    token,
    api: (method, path, body) => request(method, path, body, token),
    async createAgent(input) {
      const created = await service.api<{ id: number }>('POST', '/api/agents', input)
      if (created.status !== 201) throw new Error(`agent not created: ${JSON.stringify(created.body)}`)
      return created.body.id
    },
    async createWebchat(options) {
      const created = await service.api<{ id: string }>('POST', '/api/integrations', {
        type: 'webchat',
        name: 'Widget',
        entryAgentId: options.entryAgentId,
        config: options.allowedOrigins === undefined ? {} : { allowedOrigins: options.allowedOrigins },
      })
      if (created.status !== 201) throw new Error(`integration not created: ${JSON.stringify(created.body)}`)
      return created.body.id
    },
    socketUrl: (integrationId, visitorToken) =>
      `${url.replace(/^http/, 'ws')}/api/webchat/${integrationId}` +
      (visitorToken === undefined ? '' : `?token=${encodeURIComponent(visitorToken)}`),
    close: () => reference.close(),
  }
  return service
}
