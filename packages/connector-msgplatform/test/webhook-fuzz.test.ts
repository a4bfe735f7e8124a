import { createHmac } from 'node:crypto'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack, WEBHOOK_SECRET } from './support/start-stack.js'

let stack: Stack
let integrationId: string
let inactiveId: string

beforeAll(async () => {
  stack = await startStack()
  // Human entry agents: messages are stored, no model runs, so only the door is under test.
  const agentId = await stack.createAgent({ name: 'Desk', kind: 'human' })
  integrationId = await stack.createIntegration(agentId)
  inactiveId = await stack.createIntegration(agentId)
  await stack.api('PATCH', `/api/integrations/${inactiveId}`, { active: false })
})
afterAll(async () => {
  await stack.close()
})

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))

/** Header values fetch can send: printable ASCII. */
const headerText = fc.stringMatching(/^[!-~][ -~]{0,80}$/)
const field = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.constant(null),
  fc.constantFrom('c-1', 'c-2', 'ch', 'telegram'),
)
const plausible = fc
  .record(
    {
      text: field,
      client_id: field,
      channel_id: field,
      transport: field,
      message_id: field,
      hook_type: fc.oneof(
        fc.constantFrom('inbox', 'close_dialog', 'close_request', 'dialog_transferred'),
        field,
      ),
      operator_id: field,
    },
    { requiredKeys: [] },
  )
  .map((value) => new TextEncoder().encode(JSON.stringify(value)))
const wellFormed = fc
  .record({
    text: fc.string({ minLength: 1, maxLength: 40 }).filter((text) => text.trim() !== ''),
    client_id: fc.constantFrom('c-1', 'c-2', 'c-3'),
    channel_id: fc.constantFrom('ch-1', 'ch-2'),
    transport: fc.constantFrom('telegram', 'whatsapp'),
    message_id: fc.option(fc.constantFrom('m-1', 'm-2', 'm-3'), { nil: undefined }),
    hook_type: fc.option(fc.constantFrom('inbox', 'close_dialog', 'close_request', 'dialog_transferred'), {
      nil: undefined,
    }),
  })
  .map((value) => new TextEncoder().encode(JSON.stringify(value)))
const body = fc.oneof(
  wellFormed,
  plausible,
  fc.jsonValue().map((value) => new TextEncoder().encode(JSON.stringify(value) ?? '')),
  fc.uint8Array({ maxLength: 200 }),
)
const signing = fc.oneof(
  fc.constantFrom('x-webhook-signature', 'x-hub-signature-256', 'none'),
  headerText.map((garbage) => ({ garbage })),
)

describe('whatever arrives at the webhook URL', () => {
  it('is answered 200, 401, 403 or 404 in the contract shape, never 500', async () => {
    const seen = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(
        body,
        signing,
        fc.constantFrom('active', 'inactive', 'unknown', 'garbage'),
        fc.option(headerText, { nil: undefined }),
        fc.option(headerText, { nil: undefined }),
        async (raw, signature, target, webhookId, contentType) => {
          const headers: Record<string, string> = {}
          if (contentType !== undefined) headers['content-type'] = contentType
          if (webhookId !== undefined) headers['webhook-id'] = webhookId
          if (typeof signature === 'object') headers['x-webhook-signature'] = signature.garbage
          else if (signature !== 'none') {
            headers[signature] = `sha256=${createHmac('sha256', WEBHOOK_SECRET).update(raw).digest('hex')}`
          }
          const id = { active: integrationId, inactive: inactiveId, unknown: '987654', garbage: '%7E..x' }[
            target
          ]
          const response = await fetch(`${stack.server.url}/api/webhook/msgplatform/${id}`, {
            method: 'POST',
            headers,
            body: raw,
          })
          const answer = (await response.json()) as Record<string, unknown>
          expect([200, 401, 403, 404]).toContain(response.status)
          const kind = response.status === 200 ? String(Object.keys(answer).sort()) : String(response.status)
          seen.set(kind, (seen.get(kind) ?? 0) + 1)
          if (response.status === 200) expect(answer.ok).toBe(true)
          else expect(answer).toEqual({ error: { code: expect.any(String), message: expect.any(String) } })
        },
      ),
      {
        numRuns: 250,
        // Each outcome once for sure; the random runs then explore around them.
        examples: [
          [
            encode({ text: 'hello', client_id: 'c-9', channel_id: 'ch', transport: 'telegram' }),
            'x-webhook-signature',
            'active',
            undefined,
            undefined,
          ],
          [encode({ hook_type: 'unknown_hook' }), 'x-hub-signature-256', 'active', undefined, undefined],
          [encode({ text: 'x' }), 'none', 'active', undefined, undefined],
          [encode({ text: 'x' }), 'x-webhook-signature', 'inactive', undefined, undefined],
          [encode({ text: 'x' }), 'x-webhook-signature', 'unknown', undefined, undefined],
        ],
      },
    )
    // The inputs reached every branch: stored messages, ignored bodies and each refusal.
    expect([...seen.keys()].sort()).toEqual(expect.arrayContaining(['401', '403', '404', 'ignored,ok', 'ok']))
  })
})
