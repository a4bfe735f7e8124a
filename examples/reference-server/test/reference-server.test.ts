import { createHmac } from 'node:crypto'
import { request as httpsRequest } from 'node:https'
import { connect } from 'node:net'
import { createFakePasswordHasher } from '@switchboard/core/testing'
import { pino } from 'pino'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { readConfig } from '../src/config.js'
import { type ReferenceServer, startReferenceServer } from '../src/start-reference-server.js'

const fixtures = new URL('./__fixtures__/', import.meta.url).pathname
const servers: ReferenceServer[] = []

afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function start(environment: Record<string, string> = {}) {
  const config = readConfig({ PORT: '0', DATA_DIR: 'memory', LOG_LEVEL: 'silent', ...environment })
  const server = await startReferenceServer(config, { passwordHasher: createFakePasswordHasher() })
  servers.push(server)
  return server
}

/** POSTs JSON to the server at `url`, with a bearer token when given. */
/** Registers a company with its first user and logs in: the access token. */
async function signUp(url: string, email: string): Promise<string> {
  const post = poster(url)
  await post('/api/auth/register', { email, password: 'correct horse', companyName: 'Shop' })
  const login = await json(await post('/api/auth/login', { email, password: 'correct horse' }))
  return (login.body.session as { access_token: string }).access_token
}

function poster(url: string) {
  return (path: string, body: unknown, token?: string) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify(body),
    })
}

/** An HS256 access token with these claims, as an operator holding JWT_SECRET could mint one. */
function mintAccessToken(secret: string, claims: Record<string, unknown>): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  const signingInput = `${encode({ alg: 'HS256', typ: 'JWT' })}.${encode(claims)}`
  return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`
}

async function json(response: Response) {
  return { status: response.status, body: (await response.json()) as Record<string, unknown> }
}

describe('the reference server', () => {
  it('serves the account flow end to end: register, login, me, a protected list', async () => {
    const { url } = await start()
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })

    const registered = await json(
      await post('/api/auth/register', {
        email: 'Owner@Shop.test',
        password: 'correct horse',
        companyName: 'Shop',
      }),
    )
    expect(registered.status).toBe(201)
    const loggedIn = await json(
      await post('/api/auth/login', { email: 'owner@shop.test', password: 'correct horse' }),
    )
    expect(loggedIn.status).toBe(200)
    const session = loggedIn.body.session as { access_token: string; expires_at: number }
    expect(session.expires_at).toBeGreaterThan(Date.now() / 1000 + 3500)
    expect(session.expires_at).toBeLessThan(Date.now() / 1000 + 3700)

    const headers = { authorization: `Bearer ${session.access_token}` }
    const me = await json(await fetch(`${url}/api/auth/me`, { headers }))
    expect(me.body).toMatchObject({
      user: { email: 'Owner@Shop.test', isSuperadmin: false },
      company: { companyName: 'Shop' },
    })
    const agents = await json(await fetch(`${url}/api/agents`, { headers }))
    expect(agents).toEqual({ status: 200, body: { agents: [], nextCursor: null } })
    expect((await fetch(`${url}/api/agents`)).status).toBe(401)
  })

  it('hands out webhook URLs on http://HOST:PORT with the port it listens on (PORT=0), or on PUBLIC_URL', async () => {
    const webhookUrlOn = async (url: string) => {
      const post = poster(url)
      const token = await signUp(url, 'hooks@shop.test')
      const agent = await json(await post('/api/agents', { name: 'Support' }, token))
      const config = { apiBaseUrl: 'https://platform.example.com', apiToken: 'token' }
      const body = { type: 'msgplatform', name: 'Platform', entryAgentId: agent.body.id, config }
      const created = await json(await post('/api/integrations', body, token))
      return `${created.body.webhookUrl}`.replace(/\d+$/, '{id}')
    }
    const { url } = await start()
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:[1-9]\d*$/)
    expect(await webhookUrlOn(url)).toBe(`${url}/api/webhook/msgplatform/{id}`)
    const behindProxy = await start({ PUBLIC_URL: 'https://chat.example.com/base' })
    expect(await webhookUrlOn(behindProxy.url)).toBe(
      'https://chat.example.com/base/api/webhook/msgplatform/{id}',
    )
  })

  it('accepts an access token minted with JWT_SECRET and only the claims of CONTRACT §3; its logout revokes every login of the user', async () => {
    const secret = 'a shared secret of the reference server tests'
    const { url } = await start({ JWT_SECRET: secret })
    const post = poster(url)
    const credentials = { email: 'minted@shop.test', password: 'correct horse' }
    await post('/api/auth/register', { ...credentials, companyName: 'Shop' })
    const logins = await Promise.all(
      [1, 2].map(async () => (await json(await post('/api/auth/login', credentials))).body),
    )
    const { user } = logins[0] as { user: { id: string; companyId: number } }

    const now = Math.floor(Date.now() / 1000)
    const mint = (claims: Record<string, unknown>) => mintAccessToken(secret, claims)
    const minted = mint({ sub: user.id, cid: user.companyId, iat: now, exp: now + 600 })

    const me = await json(
      await fetch(`${url}/api/auth/me`, { headers: { authorization: `Bearer ${minted}` } }),
    )
    expect(me).toMatchObject({ status: 200, body: { user: { id: user.id, email: credentials.email } } })
    const expired = mint({ sub: user.id, cid: user.companyId, iat: now - 600, exp: now - 1 })
    expect(
      (await fetch(`${url}/api/auth/me`, { headers: { authorization: `Bearer ${expired}` } })).status,
    ).toBe(401)

    // It names no login, so logging out with it logs out every login of its user.
    expect((await post('/api/auth/logout', {}, minted)).status).toBe(204)
    for (const login of logins as { session: { refresh_token: string } }[]) {
      const refreshed = await json(
        await post('/api/auth/refresh', { refresh_token: login.session.refresh_token }),
      )
      expect(refreshed).toMatchObject({ status: 401, body: { error: { code: 'REFRESH_FAILED' } } })
    }
  })

  // UUIDs are read in any case, as PostgreSQL reads them: on the memory storage a `sub` in capitals
  // named no user (401 on /me and on creating an API token) and its logout revoked nothing.
  it('reads the user of a minted access token named in capitals as that user', async () => {
    const secret = 'a shared secret of the reference server tests'
    const { url } = await start({ JWT_SECRET: secret })
    const post = poster(url)
    const credentials = { email: 'capitals@shop.test', password: 'correct horse' }
    await post('/api/auth/register', { ...credentials, companyName: 'Shop' })
    const login = (await json(await post('/api/auth/login', credentials))).body as {
      user: { id: string; companyId: number }
      session: { refresh_token: string }
    }
    const now = Math.floor(Date.now() / 1000)
    const claims = { sub: login.user.id.toUpperCase(), cid: login.user.companyId, iat: now, exp: now + 600 }
    const minted = mintAccessToken(secret, claims)
    const headers = { authorization: `Bearer ${minted}` }

    expect(await json(await fetch(`${url}/api/auth/me`, { headers }))).toMatchObject({
      status: 200,
      body: { user: { id: login.user.id } },
    })
    const created = await json(await post('/api/api-tokens', { name: 'Script' }, minted))
    expect(created.status).toBe(201)
    const viaApiToken = await json(
      await fetch(`${url}/api/auth/me`, { headers: { authorization: `Bearer ${created.body.token}` } }),
    )
    expect(viaApiToken).toMatchObject({ status: 200, body: { user: { id: login.user.id } } })
    expect((await post('/api/auth/logout', {}, minted)).status).toBe(204)
    expect(
      await json(await post('/api/auth/refresh', { refresh_token: login.session.refresh_token })),
    ).toMatchObject({ status: 401, body: { error: { code: 'REFRESH_FAILED' } } })
  })

  it('marks superadmins from SUPERADMIN_EMAILS', async () => {
    const { url } = await start({ SUPERADMIN_EMAILS: 'boss@shop.test, other@x.test' })
    const token = await signUp(url, 'boss@shop.test')
    const me = await json(
      await fetch(`${url}/api/auth/me`, { headers: { authorization: `Bearer ${token}` } }),
    )
    expect((me.body.user as { isSuperadmin: boolean }).isSuperadmin).toBe(true)
  })

  it('answers unknown routes and bad bodies in the contract error shape, with a request id', async () => {
    const { url } = await start()
    const missing = await fetch(`${url}/api/nothing-here`)
    expect(missing.status).toBe(404)
    expect(await missing.json()).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } })
    expect(missing.headers.get('x-request-id')).toMatch(/.+/)
    const malformed = await fetch(`${url}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"email":',
    })
    expect(malformed.status).toBe(400)
    expect(((await malformed.json()) as { error: { code: string } }).error.code).toBe('VALIDATION_ERROR')
  })

  it('answers unknown routes outside /api in the contract error shape too, and serves the widget and its page', async () => {
    const { url } = await start()
    for (const [method, path] of [
      ['GET', '/nope'],
      ['GET', '/favicon.ico'],
      ['POST', '/nope'],
      ['GET', '/%ff'],
      ['OPTIONS', '/widget.js'],
      ['OPTIONS', '/demo/webchat'],
    ] as const) {
      const answer = await fetch(`${url}${path}`, { method })
      expect(answer.status, `${method} ${path}`).toBe(404)
      expect(answer.headers.get('content-type')).toMatch(/^application\/json/)
      expect(await answer.json()).toEqual({ error: { code: 'NOT_FOUND', message: expect.any(String) } })
    }
    expect(await json(await fetch(`${url}/api/nothing-here`))).toMatchObject({
      body: { error: { message: 'no route for GET /api/nothing-here' } },
    })

    const noIntegration = await json(await fetch(`${url}/demo/webchat`))
    expect(noIntegration).toMatchObject({
      status: 400,
      body: { error: { code: 'VALIDATION_ERROR', details: [{ path: 'integration' }] } },
    })
    const page = await fetch(`${url}/demo/webchat?integration=1`)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-type')).toMatch(/^text\/html/)
    expect((await fetch(`${url}/widget.js`)).status).toBe(200)
  })

  it('answers requests Node refuses, oversized headers and bad framing, in the contract error shape', async () => {
    const { url } = await start()
    const { hostname, port } = new URL(url)
    /** The raw answer to raw bytes, read until the server closes the connection. */
    const sendRaw = (bytes: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), hostname)
        const chunks: Buffer[] = []
        socket.on('data', (chunk) => chunks.push(chunk))
        socket.on('error', reject)
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')))
        socket.end(bytes)
      })

    const oversized = await sendRaw(
      `GET /api/agents HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${'a'.repeat(20_000)}\r\n\r\n`,
    )
    expect(oversized).toMatch(/^HTTP\/1\.1 431 /)
    expect(oversized).toMatch(/\r\nConnection: close\r\n/i)
    expect(JSON.parse(oversized.split('\r\n\r\n')[1]!)).toEqual({
      error: { code: 'REQUEST_HEADER_FIELDS_TOO_LARGE', message: expect.any(String) },
    })

    const framing = await sendRaw(
      'POST /api/auth/login HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}',
    )
    expect(framing).toMatch(/^HTTP\/1\.1 400 /)
    expect(JSON.parse(framing.split('\r\n\r\n')[1]!)).toEqual({
      error: { code: 'VALIDATION_ERROR', message: expect.any(String) },
    })

    // RFC 9112 §3.2: an HTTP/1.1 request without Host is answered 400.
    const hostless = await sendRaw('GET /api/health HTTP/1.1\r\n\r\n')
    expect(hostless).toMatch(/^HTTP\/1\.1 400 /)
    expect(hostless).toMatch(/\r\nConnection: close\r\n/i)
    expect(JSON.parse(hostless.split('\r\n\r\n')[1]!)).toEqual({
      error: { code: 'VALIDATION_ERROR', message: expect.any(String) },
    })
    // HTTP/1.0 has no Host header to require.
    expect(await sendRaw('GET /api/health HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.1 200 /)

    const tunnel = await sendRaw('CONNECT db.example.com:5432 HTTP/1.1\r\nHost: db.example.com:5432\r\n\r\n')
    expect(tunnel).toMatch(/^HTTP\/1\.1 404 /)
    expect(JSON.parse(tunnel.split('\r\n\r\n')[1]!)).toEqual({
      error: { code: 'NOT_FOUND', message: expect.any(String) },
    })
  })

  // Node emits an accept failure (EMFILE: out of file descriptors) on the listening server, where
  // an 'error' event nobody listens to ends the process; the server logs it and keeps serving.
  it('logs an error of the listening server, such as running out of file descriptors, and keeps serving', async () => {
    const service = await start({ LOG_LEVEL: 'error' })
    const logged = vi.spyOn(service.logger, 'error')
    const failure = Object.assign(new Error('accept EMFILE'), { code: 'EMFILE', syscall: 'accept' })

    expect(() => service.server.emit('error', failure)).not.toThrow()

    expect(logged).toHaveBeenCalledWith(
      expect.objectContaining({ error: expect.stringContaining('EMFILE') }),
      expect.any(String),
    )
    expect((await fetch(`${service.url}/api/health`)).status).toBe(200)
  })

  it('logs each request with the path it was sent to, mount prefix included and query left out', async () => {
    const service = await start({ LOG_LEVEL: 'info' })
    const logged = vi.spyOn(service.logger, 'info').mockImplementation(() => undefined)
    await fetch(`${service.url}/api/health`)
    await fetch(`${service.url}/api/sessions?limit=5`)
    await fetch(`${service.url}/widget.js`)
    // Served by the webhook lane, ahead of Express.
    await fetch(`${service.url}/api/webhook/msgplatform/999`, {
      method: 'POST',
      headers: { 'x-request-id': 'platform-delivery-7' },
      body: '{}',
    })

    const requests = logged.mock.calls
      .filter(([, message]) => message === 'request')
      .map(([entry]) => entry as unknown as { method: string; path: string; status: number })
    expect(requests).toEqual([
      expect.objectContaining({ method: 'GET', path: '/api/health', status: 200 }),
      expect.objectContaining({ method: 'GET', path: '/api/sessions', status: 401 }),
      expect.objectContaining({ method: 'GET', path: '/widget.js', status: 200 }),
      expect.objectContaining({
        method: 'POST',
        path: '/api/webhook/msgplatform/999',
        status: 404,
        requestId: 'platform-delivery-7',
      }),
    ])
    expect(requests[0]).toHaveProperty('requestId', expect.stringMatching(/^[0-9a-f-]{36}$/))
  })

  it('serves HTTPS with TLS_CERT_FILE and TLS_KEY_FILE', async () => {
    const server = await start({
      TLS_CERT_FILE: `${fixtures}localhost-cert.pem`,
      TLS_KEY_FILE: `${fixtures}localhost-key.pem`,
    })
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
    const body = await new Promise<string>((resolve, reject) => {
      httpsRequest(`${server.url}/api/health`, { rejectUnauthorized: false }, (response) => {
        let text = ''
        response.on('data', (chunk: Buffer) => {
          text += chunk.toString()
        })
        response.on('end', () => resolve(text))
      })
        .on('error', reject)
        .end()
    })
    expect(JSON.parse(body)).toEqual({ ok: true, storage: 'memory' })
  })

  it('rejects a bad environment at start with what to fix', () => {
    expect(() => readConfig({ PORT: 'eighty' })).toThrow(/PORT/)
    expect(() => readConfig({ TLS_CERT_FILE: '/x.pem' })).toThrow(/TLS_KEY_FILE/)
    expect(() => readConfig({ NODE_ENV: 'production' })).toThrow(/JWT_SECRET is required/)
    expect(readConfig({})).toMatchObject({ port: 3000, host: '127.0.0.1', dataDir: './.switchboard' })
  })

  // Both were taken here and refused only once the storage was open: TRUST_PROXY by Express
  // ("invalid IP address: yes"), PUBLIC_URL by the router.
  it('refuses a TRUST_PROXY Express cannot read and a PUBLIC_URL with a query or fragment, naming them', () => {
    for (const value of ['yes', '10.0.0.300', 'loopback, nonsense']) {
      expect(() => readConfig({ TRUST_PROXY: value })).toThrow(/TRUST_PROXY/)
    }
    for (const value of ['true', '2', 'loopback', '10.0.0.1, 10.0.0.0/8', 'loopback, uniquelocal']) {
      expect(() => readConfig({ TRUST_PROXY: value })).not.toThrow()
    }
    for (const value of [
      'https://chat.example.com/?a=1',
      'https://chat.example.com/?',
      'https://chat.example.com#top',
    ]) {
      expect(() => readConfig({ PUBLIC_URL: value })).toThrow(/PUBLIC_URL/)
    }
    expect(readConfig({ PUBLIC_URL: 'https://chat.example.com/base/' }).publicUrl).toBe(
      'https://chat.example.com/base',
    )
  })

  // REFRESH_TOKEN_TTL_S=9000000000000 started, and every login answered 500: its refresh token
  // expired past the last date JavaScript holds.
  it('refuses token lifetimes over 100 years at start, and logs in with one of 100 years', async () => {
    for (const name of ['ACCESS_TOKEN_TTL_S', 'REFRESH_TOKEN_TTL_S']) {
      expect(() => readConfig({ [name]: '9000000000000' })).toThrow(new RegExp(`${name}: .*100 years`))
      expect(() => readConfig({ [name]: '3155760001' })).toThrow(new RegExp(name))
    }
    const { url } = await start({ ACCESS_TOKEN_TTL_S: '3155760000', REFRESH_TOKEN_TTL_S: '3155760000' })
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const account = { email: 'owner@shop.test', password: 'correct horse' }
    expect((await post('/api/auth/register', { ...account, companyName: 'Shop' })).status).toBe(201)
    expect((await post('/api/auth/login', account)).status).toBe(200)
  })

  it('starts with a short JWT_SECRET, warning that it is weak', async () => {
    const lines: string[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) })
    const config = readConfig({ PORT: '0', DATA_DIR: 'memory', NODE_ENV: 'production', JWT_SECRET: 'short' })
    const server = await startReferenceServer(config, {
      passwordHasher: createFakePasswordHasher(),
      logger,
    })
    servers.push(server)

    expect((await fetch(`${server.url}/api/health`)).status).toBe(200)
    const warnings = lines.map((line) => JSON.parse(line) as { level: number; msg: string })
    expect(warnings).toContainEqual(
      expect.objectContaining({ level: 40, msg: expect.stringMatching(/JWT_SECRET .*shorter than 32/) }),
    )
  })

  // PostgreSQL stores U+FFFD for U+0000 and lone surrogates; the memory storage kept them, so a
  // webhook log's reason and a platform transfer's journey step read back differently per storage.
  it('shows text from a platform as every storage stores it: U+0000 and lone surrogates as U+FFFD', async () => {
    const { url } = await start()
    const call = async (path: string, options: { token?: string; body?: unknown } = {}) =>
      json(
        await fetch(`${url}${path}`, {
          method: options.body === undefined ? 'GET' : 'POST',
          headers: {
            'content-type': 'application/json',
            ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          },
          ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
        }),
      )
    const credentials = { email: 'awkward@shop.test', password: 'correct horse' }
    await call('/api/auth/register', { body: { ...credentials, companyName: 'Shop' } })
    const token = (
      (await call('/api/auth/login', { body: credentials })).body.session as { access_token: string }
    ).access_token
    const agent = (await call('/api/agents', { token, body: { name: 'Support' } })).body
    const integration = (
      await call('/api/integrations', {
        token,
        body: {
          type: 'msgplatform',
          name: 'Platform',
          entryAgentId: agent.id,
          // Nothing listens there: replies fail, which this test does not look at.
          config: { apiBaseUrl: 'http://127.0.0.1:9', apiToken: 'platform-token' },
        },
      })
    ).body as { id: string; webhookSecret: string }
    // JSON escapes, as a platform may send them: the bytes themselves are plain ASCII.
    const webhook = (raw: string) =>
      fetch(`${url}/api/webhook/msgplatform/${integration.id}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-webhook-signature': `sha256=${createHmac('sha256', integration.webhookSecret).update(raw).digest('hex')}`,
        },
        body: raw,
      })
    const customer = '"client_id":"c-1","channel_id":"ch","transport":"wa"'
    expect((await webhook(`{"text":"hello",${customer}}`)).status).toBe(200)
    expect((await webhook(`{"hook_type":"h\\u0000\\ud800",${customer}}`)).status).toBe(200)
    expect(
      (await webhook(`{"hook_type":"dialog_transferred","operator_id":"op\\u0000\\udc00",${customer}}`))
        .status,
    ).toBe(200)

    const logs = (await call(`/api/integrations/${integration.id}/webhook-logs`, { token })).body.logs as {
      reason?: string
    }[]
    expect(logs.map((log) => log.reason)).toContain('unsupported hook_type "h\uFFFD\uFFFD"')
    const [session] = (await call('/api/sessions', { token })).body.sessions as { id: string }[]
    const context = (await call(`/api/sessions/${session!.id}/context`, { token })).body
    expect(
      (context.sharedContext as { journey: { step: string }[] }).journey.map((entry) => entry.step),
    ).toEqual(['Dialog transferred on the platform to operator op\uFFFD\uFFFD'])
  })
})
