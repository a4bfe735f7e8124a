import type { AddressInfo } from 'node:net'
import {
  type AccountSettings,
  type Clock,
  createAccounts,
  createBilling,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type PasswordHasher,
  type Storage,
  type Switchboard,
  type TokenSigner,
} from '@switchboard/core'
import {
  createFakePasswordHasher,
  createFakeTokenSigner,
  createRecordingConnector,
  type RecordingConnector,
} from '@switchboard/core/testing'
import express from 'express'
import { createRouter } from '../../src/index.js'

export const PUBLIC_URL = 'https://switchboard.test'
/** The password `registerCompany` registers every owner with. */
export const TEST_PASSWORD = 'correct horse battery'

export interface HttpAnswer {
  readonly status: number
  readonly headers: Headers
  /** The parsed JSON body; null for an empty one. */
  readonly body: unknown
  readonly text: string
}

export interface RequestOptions {
  readonly token?: string | undefined
  /** Sent as JSON. */
  readonly body?: unknown
  /** Sent verbatim with `Content-Type: application/json`, for bodies JSON.stringify cannot make. */
  readonly rawBody?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** A registered company, as its owner sees it through the API. */
export interface TestCompany {
  /** The integer company `id`. */
  readonly id: number
  readonly email: string
  /** A session access token (JWT). */
  readonly jwt: string
  /** A company API token (`sb_…`). */
  readonly apiToken: string
}

export interface TestServer {
  readonly baseUrl: string
  readonly switchboard: Switchboard
  readonly storage: Storage
  readonly connector: RecordingConnector
  request(method: string, path: string, options?: RequestOptions): Promise<HttpAnswer>
  /** Registers a company through the API, logs in and creates an API token. */
  registerCompany(name?: string): Promise<TestCompany>
  /** Creates an agent through the API and answers its id. */
  createAgent(token: string, body?: Record<string, unknown>): Promise<number>
  /** Creates a msgplatform integration through the API and answers its id. */
  createIntegration(token: string, entryAgentId: number, body?: Record<string, unknown>): Promise<string>
  /** A customer writes through the integration; resolves once every turn it caused is over. */
  openSession(integrationId: string, clientId?: string, text?: string): Promise<string>
  close(): Promise<void>
}

export interface TestServerOptions {
  /** Whether the recording channel registers status hooks; true unless told otherwise. */
  readonly statusHooks?: boolean
  /** Signs access tokens; a fake HS256 signer unless a test needs the production one. */
  readonly signer?: TokenSigner
  /** Hashes passwords; a fast fake unless a test needs argon2id. */
  readonly hasher?: PasswordHasher
  /** Overrides of the account defaults (token lifetimes, refresh reuse interval, login throttle). */
  readonly accountSettings?: Partial<AccountSettings>
  /**
   * Time as accounts see it: token issue and expiry, refresh reuse, failed-login window. The
   * session runtime keeps the system clock, so its polling and turns still run.
   */
  readonly accountClock?: Clock
}

let companies = 0

/**
 * The HTTP API on a real socket (port 0) over in-memory storage, the offline model, fake
 * password hashing and token signing, and a recording msgplatform channel that can transfer to a
 * human and, unless told otherwise, register status hooks.
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const storage = createMemoryStorage()
  const connector = createRecordingConnector({
    type: 'msgplatform',
    humanTransfer: true,
    statusHooks: options.statusHooks ?? true,
  })
  const switchboard = createSwitchboard({
    storage,
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
    connectors: [connector],
    pollMs: 50,
  })
  const accounts = createAccounts({
    storage,
    hasher: options.hasher ?? createFakePasswordHasher(),
    signer: options.signer ?? createFakeTokenSigner({ secret: 'test-secret-of-the-express-adapter' }),
    ...(options.accountClock === undefined ? {} : { clock: options.accountClock }),
    ...(options.accountSettings === undefined ? {} : { settings: options.accountSettings }),
  })
  const billing = createBilling({ storage })

  const app = express()
  app.use('/api', createRouter({ switchboard, accounts, billing, publicUrl: PUBLIC_URL }))
  const server = app.listen(0, '127.0.0.1')
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const request = async (method: string, path: string, requestOptions: RequestOptions = {}) => {
    const headers: Record<string, string> = { ...requestOptions.headers }
    if (requestOptions.token !== undefined) headers.authorization = `Bearer ${requestOptions.token}`
    let body: string | undefined
    if (requestOptions.rawBody !== undefined) body = requestOptions.rawBody
    else if (requestOptions.body !== undefined) body = JSON.stringify(requestOptions.body)
    if (body !== undefined) headers['content-type'] ??= 'application/json'
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    })
    const text = await response.text()
    let parsed: unknown = null
    if (text !== '') {
      try {
        parsed = JSON.parse(text)
      } catch {
        parsed = text
      }
    }
    return { status: response.status, headers: response.headers, body: parsed, text }
  }

  const expectStatus = <Body>(answer: HttpAnswer, status: number, what: string): Body => {
    if (answer.status !== status)
      throw new Error(`${what}: expected ${status}, got ${answer.status} ${answer.text}`)
    return answer.body as Body
  }

  return {
    baseUrl,
    switchboard,
    storage,
    connector,
    request,

    async registerCompany(name) {
      companies += 1
      const email = `owner-${companies}-${Date.now()}@example.com`
      const password = TEST_PASSWORD
      const registered = expectStatus<{ company: { id: number } }>(
        await request('POST', '/api/auth/register', {
          body: { email, password, companyName: name ?? `Company ${companies}` },
        }),
        201,
        'register',
      )
      const login = expectStatus<{ session: { access_token: string } }>(
        await request('POST', '/api/auth/login', { body: { email, password } }),
        200,
        'login',
      )
      const jwt = login.session.access_token
      const created = expectStatus<{ token: string }>(
        await request('POST', '/api/api-tokens', { token: jwt, body: { name: 'tests' } }),
        201,
        'api token',
      )
      return { id: registered.company.id, email, jwt, apiToken: created.token }
    },

    async createAgent(token, body = {}) {
      const answer = await request('POST', '/api/agents', { token, body: { name: 'Agent', ...body } })
      return expectStatus<{ id: number }>(answer, 201, 'create agent').id
    },

    async createIntegration(token, entryAgentId, body = {}) {
      const answer = await request('POST', '/api/integrations', {
        token,
        body: {
          type: 'msgplatform',
          name: 'Support line',
          entryAgentId,
          config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'platform-token' },
          ...body,
        },
      })
      return expectStatus<{ id: string }>(answer, 201, 'create integration').id
    },

    async openSession(integrationId, clientId = 'customer-1', text = 'hello there') {
      const result = await switchboard.ingest({
        integrationId,
        clientId,
        channelId: 'channel-1',
        transport: 'telegram',
        text,
      })
      if (result.isErr()) throw new Error(`ingest failed: ${result.error.code} ${result.error.message}`)
      await switchboard.idle()
      return result.value.session.id
    },

    async close() {
      await switchboard.stop({ timeoutMs: 1000 })
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      // fetch keeps connections alive; they would hold `close` open until they time out.
      server.closeAllConnections()
      await closed
    },
  }
}
