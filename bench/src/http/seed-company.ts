import type { Switchboard } from '@switchboard/core'

export interface SeededCompany {
  readonly email: string
  readonly password: string
  /** A session access token (JWT) of the company's owner. */
  readonly accessToken: string
  readonly agentIds: readonly number[]
  /** A chat session opened by a customer message through `switchboard.ingest`. */
  readonly sessionId: string
}

async function call<Body>(
  baseUrl: string,
  method: string,
  path: string,
  expectedStatus: number,
  options: { token?: string; body?: unknown } = {},
): Promise<Body> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: {
      'content-type': 'application/json',
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  })
  const text = await response.text()
  if (response.status !== expectedStatus) {
    throw new Error(`${method} ${path}: expected ${expectedStatus}, got ${response.status} ${text}`)
  }
  return JSON.parse(text) as Body
}

/**
 * A company made the way a client makes one, through the API: register, log in, create agents and
 * a msgplatform integration. Its one session is opened by a customer message through `ingest`,
 * as a verified webhook would, and is answered by the offline model before this resolves.
 */
export async function seedCompany(
  baseUrl: string,
  switchboard: Switchboard,
  options: { agents: number },
): Promise<SeededCompany> {
  const email = 'bench-owner@example.com'
  const password = 'a bench password, long enough'
  await call(baseUrl, 'POST', '/api/auth/register', 201, {
    body: { email, password, companyName: 'Bench Ltd' },
  })
  const login = await call<{ session: { access_token: string } }>(baseUrl, 'POST', '/api/auth/login', 200, {
    body: { email, password },
  })
  const accessToken = login.session.access_token

  const agentIds: number[] = []
  for (let index = 1; index <= options.agents; index += 1) {
    const agent = await call<{ id: number }>(baseUrl, 'POST', '/api/agents', 201, {
      token: accessToken,
      body: {
        name: `Agent ${index}`,
        role: index === 1 ? 'reception' : `specialist-${index}`,
        systemPrompt: `You are agent ${index} of Bench Ltd. Answer briefly and politely.`,
      },
    })
    agentIds.push(agent.id)
  }
  const integration = await call<{ id: string }>(baseUrl, 'POST', '/api/integrations', 201, {
    token: accessToken,
    body: {
      type: 'msgplatform',
      name: 'Bench line',
      entryAgentId: agentIds[0],
      config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'bench-platform-token' },
    },
  })

  const ingested = await switchboard.ingest({
    integrationId: integration.id,
    clientId: 'bench-customer',
    channelId: 'bench-channel',
    transport: 'telegram',
    text: 'hello, I would like to know your opening hours',
  })
  if (ingested.isErr()) throw new Error(`ingest failed: ${ingested.error.code} ${ingested.error.message}`)
  await switchboard.idle()
  return { email, password, accessToken, agentIds, sessionId: ingested.value.session.id }
}
