import { gunzipSync, gzipSync } from 'node:zlib'
import { sign } from '@octokit/webhooks-methods'
import { signWebhookBody } from '@switchboard/core'
import { afterEach, describe, expect, it } from 'vitest'
import { type Stack, startStack, WEBHOOK_SECRET } from './support/start-stack.js'

const stacks: Stack[] = []
afterEach(async () => {
  await Promise.all(stacks.splice(0).map((stack) => stack.close()))
})

async function setUp(environment: Record<string, string> = {}) {
  const stack = await startStack(environment)
  stacks.push(stack)
  // A human entry agent: messages are stored and no model is asked, which keeps these tests about
  // the door, not the conversation.
  const agentId = await stack.createAgent({ name: 'Front desk', kind: 'human' })
  const integrationId = await stack.createIntegration(agentId)
  return { stack, integrationId }
}

const body = { text: 'hello', client_id: 'c-1', channel_id: 'ch-1', transport: 'telegram' }
const invalidSignature = { error: { code: 'INVALID_SIGNATURE', message: expect.any(String) } }

describe('the msgplatform webhook door', () => {
  it('accepts signatures made by @octokit/webhooks-methods under either header', async () => {
    const { stack, integrationId } = await setUp()
    const first = await stack.webhook(integrationId, { ...body, message_id: 'm-1' })
    const second = await stack.webhook(
      integrationId,
      { ...body, message_id: 'm-2' },
      { header: 'x-hub-signature-256' },
    )
    expect(first).toEqual({ status: 200, body: { ok: true } })
    expect(second).toEqual({ status: 200, body: { ok: true } })
  })

  it('checks the bytes as sent: the same JSON re-spaced is a bad signature', async () => {
    const { stack, integrationId } = await setUp()
    const compact = JSON.stringify(body)
    const signature = await sign(WEBHOOK_SECRET, compact)
    const respaced = JSON.stringify(body, null, 2)
    const answer = await stack.webhook(integrationId, respaced, {
      unsigned: true,
      headers: { 'x-webhook-signature': signature },
    })
    expect(answer).toEqual({ status: 401, body: invalidSignature })
  })

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['sha1', 'sha1=0123456789abcdef0123456789abcdef01234567'],
    ['no prefix', 'a'.repeat(64)],
    ['non-hex', `sha256=${'z'.repeat(64)}`],
    ['too short', `sha256=${'a'.repeat(63)}`],
    ['too long', `sha256=${'a'.repeat(66)}`],
    ['odd garbage', 'sha256=\u00e9\u00e9'],
  ])('answers 401, never 500, for a %s signature', async (_name, signature) => {
    const { stack, integrationId } = await setUp()
    const answer = await stack.webhook(integrationId, body, {
      unsigned: true,
      headers: signature === undefined ? {} : { 'x-webhook-signature': signature },
    })
    expect(answer).toEqual({ status: 401, body: invalidSignature })
  })

  it('answers 401 for a signature made with another secret', async () => {
    const { stack, integrationId } = await setUp()
    const answer = await stack.webhook(integrationId, body, { secret: 'another-secret-0123456789' })
    expect(answer.status).toBe(401)
  })

  it('keeps an inactive integration secret from unsigned callers: 401 unsigned, 403 signed', async () => {
    const { stack, integrationId } = await setUp()
    await stack.api('PATCH', `/api/integrations/${integrationId}`, { active: false })
    expect((await stack.webhook(integrationId, body, { unsigned: true })).status).toBe(401)
    expect(await stack.webhook(integrationId, body)).toEqual({
      status: 403,
      body: { error: { code: 'INTEGRATION_INACTIVE', message: expect.any(String) } },
    })
    expect((await stack.webhook(integrationId, null, { method: 'GET' })).status).toBe(403)
  })

  it('decides on the integration as it is now, however recently it let a webhook in', async () => {
    const { stack, integrationId } = await setUp()
    const send = (messageId: string, secret?: string) =>
      stack.webhook(integrationId, { ...body, message_id: messageId }, secret === undefined ? {} : { secret })
    expect((await send('r-1')).status).toBe(200)

    const rotated = await stack.api('POST', `/api/integrations/${integrationId}/rotate-secret`)
    const secret = rotated.body.webhookSecret as string
    expect(await send('r-2')).toEqual({ status: 401, body: invalidSignature })
    expect((await send('r-3', secret)).status).toBe(200)

    await stack.api('PATCH', `/api/integrations/${integrationId}`, { active: false })
    expect((await send('r-4', secret)).status).toBe(403)
    await stack.api('PATCH', `/api/integrations/${integrationId}`, { active: true })
    expect((await send('r-5', secret)).status).toBe(200)

    const [session] = await stack.sessionsOf(integrationId, body.client_id)
    const messages = await stack.api('GET', `/api/sessions/${session!.id}/messages`)
    expect(messages.body.messages.map((message: { text: string }) => message.text)).toEqual([
      'hello',
      'hello',
      'hello',
    ])

    expect((await stack.api('DELETE', `/api/integrations/${integrationId}`)).status).toBe(204)
    expect((await send('r-6', secret)).status).toBe(404)
  })

  it('answers 404 for an unknown, malformed or non-msgplatform integration and an unknown type', async () => {
    const { stack, integrationId } = await setUp()
    const notFound = { status: 404, body: { error: { code: 'NOT_FOUND', message: expect.any(String) } } }
    expect(await stack.webhook('999999', body)).toEqual(notFound)
    expect(await stack.webhook('not-a-number', body)).toEqual(notFound)
    expect(await stack.webhook('99999999999999999999999', body)).toEqual(notFound)
    const agentId = await stack.createAgent()
    const webchat = await stack.api('POST', '/api/integrations', {
      type: 'webchat',
      name: 'Site',
      entryAgentId: agentId,
    })
    expect(await stack.webhook(webchat.body.id, body)).toEqual(notFound)
    const unknownType = await fetch(`${stack.server.url}/api/webhook/carrier-pigeon/${integrationId}`, {
      method: 'POST',
      body: 'x',
    })
    expect(unknownType.status).toBe(404)
    expect(await unknownType.json()).toEqual(notFound.body)
  })

  it('answers 404 to anything under /api/webhook/webchat: webchat uses the WebSocket', async () => {
    const { stack } = await setUp()
    for (const [method, path] of [
      ['POST', '/api/webhook/webchat/1'],
      ['GET', '/api/webhook/webchat/1'],
      ['PUT', '/api/webhook/webchat/1/deeper'],
      ['GET', '/api/webhook/webchat'],
    ] as const) {
      const response = await fetch(`${stack.server.url}${path}`, {
        method,
        ...(method === 'GET' ? {} : { body: 'not json at all' }),
      })
      expect(response.status, `${method} ${path}`).toBe(404)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND')
    }
  })

  it('answers the GET verification: 200 verified, 404 unknown', async () => {
    const { stack, integrationId } = await setUp()
    expect(await stack.webhook(integrationId, null, { method: 'GET' })).toEqual({
      status: 200,
      body: { ok: true, verified: true },
    })
    expect((await stack.webhook('424242', null, { method: 'GET' })).status).toBe(404)
  })

  it('answers 413 for a body over 1 MiB, before looking at the integration', async () => {
    const { stack } = await setUp()
    const huge = JSON.stringify({ ...body, text: 'x'.repeat(1024 * 1024) })
    const answer = await stack.webhook('999999', huge)
    expect(answer).toEqual({
      status: 413,
      body: { error: { code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) } },
    })
  })

  it('checks the bytes as they arrived whatever their Content-Encoding: 413, then 404, then the signature', async () => {
    const { stack, integrationId } = await setUp()
    const unknownEncoding = { headers: { 'content-encoding': 'x-unknown' } }
    const huge = JSON.stringify({ ...body, text: 'x'.repeat(1024 * 1024) })
    expect((await stack.webhook('999999', huge, unknownEncoding)).status).toBe(413)
    expect((await stack.webhook('999999', body, unknownEncoding)).status).toBe(404)
    const unsigned = await stack.webhook(integrationId, body, { ...unknownEncoding, unsigned: true })
    expect(unsigned.status).toBe(401)
    expect(await stack.webhook(integrationId, { ...body, message_id: 'e-1' }, unknownEncoding)).toEqual({
      status: 200,
      body: { ok: true },
    })

    // Signed over the bytes sent, gzip or not: nothing inflates them before the signature is checked.
    const gzipped = gzipSync(JSON.stringify({ ...body, message_id: 'e-2' }))
    const post = async (signedBytes: Uint8Array) =>
      fetch(`${stack.server.url}/api/webhook/msgplatform/${integrationId}`, {
        method: 'POST',
        headers: {
          'content-encoding': 'gzip',
          'x-webhook-signature': signWebhookBody(signedBytes, WEBHOOK_SECRET),
        },
        body: gzipped,
      })
    expect((await post(gunzipSync(gzipped))).status).toBe(401)
    const signedAsSent = await post(gzipped)
    expect(signedAsSent.status).toBe(200)
    expect(await signedAsSent.json()).toEqual({ ok: true, ignored: 'body is not JSON' })
  })

  it('logs rejected deliveries of a known integration with their status and reason', async () => {
    const { stack, integrationId } = await setUp()
    await stack.webhook(integrationId, body, { unsigned: true })
    await stack.webhook(integrationId, body, { secret: 'another-secret-0123456789' })
    await stack.api('PATCH', `/api/integrations/${integrationId}`, { active: false })
    await stack.webhook(integrationId, body)
    const logs = await stack.api('GET', `/api/integrations/${integrationId}/webhook-logs`)
    expect(logs.body.logs).toEqual([
      expect.objectContaining({ outcome: 'rejected', httpStatus: 403, reason: 'integration inactive' }),
      expect.objectContaining({ outcome: 'rejected', httpStatus: 401, reason: 'invalid signature' }),
      expect.objectContaining({ outcome: 'rejected', httpStatus: 401, reason: 'missing signature' }),
    ])
  })
})

describe('HTTPS in production', () => {
  const production = { NODE_ENV: 'production', JWT_SECRET: 'a-production-secret-of-at-least-32-chars' }

  it('refuses a webhook over plain HTTP with 403 HTTPS_REQUIRED, before any other check', async () => {
    const { stack, integrationId } = await setUp(production)
    const httpsRequired = {
      status: 403,
      body: { error: { code: 'HTTPS_REQUIRED', message: expect.any(String) } },
    }
    expect(await stack.webhook(integrationId, body)).toEqual(httpsRequired)
    expect(await stack.webhook('999999', body, { unsigned: true })).toEqual(httpsRequired)
    expect(await stack.webhook(integrationId, null, { method: 'GET' })).toEqual(httpsRequired)
    // Without a trusted proxy, the header is anyone's to send.
    const forwarded = await stack.webhook(integrationId, body, { headers: { 'x-forwarded-proto': 'https' } })
    expect(forwarded).toEqual(httpsRequired)

    // Each refused POST to the known integration is in its log (CONTRACT §5: a 403 is `rejected`);
    // the GET is a liveness check, not a delivery.
    const logs = await stack.api('GET', `/api/integrations/${integrationId}/webhook-logs`)
    expect(logs.body.logs).toEqual([
      expect.objectContaining({ outcome: 'rejected', httpStatus: 403, reason: 'https required' }),
      expect.objectContaining({ outcome: 'rejected', httpStatus: 403, reason: 'https required' }),
    ])
  })

  it('accepts X-Forwarded-Proto: https from a trusted proxy (TRUST_PROXY=loopback)', async () => {
    const { stack, integrationId } = await setUp({ ...production, TRUST_PROXY: 'loopback' })
    const viaProxy = { headers: { 'x-forwarded-proto': 'https' } }
    expect(await stack.webhook(integrationId, body, viaProxy)).toEqual({ status: 200, body: { ok: true } })
    expect((await stack.webhook(integrationId, null, { ...viaProxy, method: 'GET' })).status).toBe(200)
    expect((await stack.webhook(integrationId, body)).status).toBe(403)
  })
})
