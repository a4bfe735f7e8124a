import { signWebhookBody } from '@switchboard/core'

export interface Answer<Body = Record<string, unknown>> {
  readonly status: number
  readonly body: Body
}

/** JSON over HTTP against a running server, as a dashboard or a platform would call it. */
export async function call<Body = Record<string, unknown>>(
  url: string,
  options: { method?: string; token?: string; body?: unknown } = {},
): Promise<Answer<Body>> {
  const response = await fetch(url, {
    method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  })
  const text = await response.text()
  return { status: response.status, body: (text === '' ? {} : JSON.parse(text)) as Body }
}

/** A company's owner, logged in, with one agent that knows `knowledge` and one msgplatform integration. */
export interface Tenant {
  readonly token: string
  readonly agentId: number
  readonly integrationId: string
  readonly webhookSecret: string
}

export async function setUpTenant(
  baseUrl: string,
  options: { email: string; password: string; knowledge: string; platformUrl: string },
): Promise<Tenant> {
  const expectStatus = <Body>(answer: Answer<Body>, status: number, what: string): Body => {
    if (answer.status !== status) {
      throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`)
    }
    return answer.body
  }
  const { email, password } = options
  expectStatus(
    await call(`${baseUrl}/api/auth/register`, { body: { email, password, companyName: 'Durable Shop' } }),
    201,
    'register',
  )
  const login = expectStatus(
    await call<{ session: { access_token: string } }>(`${baseUrl}/api/auth/login`, {
      body: { email, password },
    }),
    200,
    'login',
  )
  const token = login.session.access_token
  const agent = expectStatus(
    await call<{ id: number }>(`${baseUrl}/api/agents`, { token, body: { name: 'Support' } }),
    201,
    'create agent',
  )
  expectStatus(
    await call(`${baseUrl}/api/agents/${agent.id}/knowledge`, {
      token,
      body: { title: 'Answers', content: options.knowledge },
    }),
    201,
    'add knowledge',
  )
  const integration = expectStatus(
    await call<{ id: string; webhookSecret: string }>(`${baseUrl}/api/integrations`, {
      token,
      body: {
        type: 'msgplatform',
        name: 'Platform',
        entryAgentId: agent.id,
        config: { apiBaseUrl: options.platformUrl, apiToken: 'platform-token' },
      },
    }),
    201,
    'create integration',
  )
  return { token, agentId: agent.id, integrationId: integration.id, webhookSecret: integration.webhookSecret }
}

/** A customer message as the platform sends it: signed over the exact bytes. */
export async function sendWebhook(
  baseUrl: string,
  tenant: Pick<Tenant, 'integrationId' | 'webhookSecret'>,
  message: { clientId: string; text: string; messageId: string },
): Promise<Answer> {
  const body = JSON.stringify({
    text: message.text,
    client_id: message.clientId,
    channel_id: 'channel-1',
    transport: 'whatsapp',
    message_id: message.messageId,
  })
  const response = await fetch(`${baseUrl}/api/webhook/msgplatform/${tenant.integrationId}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-webhook-signature': signWebhookBody(body, tenant.webhookSecret),
    },
    body,
  })
  const text = await response.text()
  return { status: response.status, body: JSON.parse(text) as Record<string, unknown> }
}
