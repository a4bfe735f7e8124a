import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseMsgPlatformWebhook, readMsgPlatformPayload } from './parse-webhook.js'

const bytes = (value: unknown) =>
  new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value))

describe('parseMsgPlatformWebhook', () => {
  it('reads a customer message, with or without hook_type inbox and message_id', () => {
    const base = { text: 'Hi', client_id: 'c1', channel_id: 'ch', transport: 'telegram' }
    expect(parseMsgPlatformWebhook(bytes(base))).toEqual({
      kind: 'message',
      clientId: 'c1',
      channelId: 'ch',
      transport: 'telegram',
      text: 'Hi',
    })
    expect(parseMsgPlatformWebhook(bytes({ ...base, hook_type: 'inbox', message_id: 991 }))).toMatchObject({
      kind: 'message',
      messageId: '991',
    })
    expect(parseMsgPlatformWebhook(bytes({ ...base, message_id: null, extra: { nested: true } }))).toEqual(
      expect.not.objectContaining({ messageId: expect.anything() }),
    )
  })

  it('reads the three status hooks, with optional operator and dialog', () => {
    for (const hookType of ['close_dialog', 'close_request', 'dialog_transferred']) {
      expect(parseMsgPlatformWebhook(bytes({ hook_type: hookType, client_id: 'c1' }))).toEqual({
        kind: 'status',
        hookType,
        clientId: 'c1',
      })
    }
    expect(
      parseMsgPlatformWebhook(
        bytes({ hook_type: 'dialog_transferred', client_id: 'c1', operator_id: 12, dialog_id: 'd-3' }),
      ),
    ).toEqual({
      kind: 'status',
      hookType: 'dialog_transferred',
      clientId: 'c1',
      operatorId: '12',
      dialogId: 'd-3',
    })
  })

  it.each([
    ['invalid UTF-8', new Uint8Array([0x7b, 0xff, 0x7d]), 'body is not JSON'],
    ['empty', new Uint8Array(0), 'body is not JSON'],
    ['a string', bytes('"hello"'), 'body is not a JSON object'],
    ['an array', bytes('[]'), 'body is not a JSON object'],
    ['no fields', bytes({}), 'missing or invalid fields: text, client_id, channel_id, transport'],
    [
      'numbers where strings go',
      bytes({ text: 1, client_id: 2, channel_id: 'x', transport: 't' }),
      'missing or invalid fields: text, client_id',
    ],
    [
      'an overlong id',
      bytes({ text: 'x', client_id: 'c'.repeat(501), channel_id: 'x', transport: 't' }),
      'missing or invalid fields: client_id',
    ],
    ['blank text', bytes({ text: '\n ', client_id: 'c', channel_id: 'x', transport: 't' }), 'text is empty'],
    ['a numeric hook_type', bytes({ hook_type: 3, client_id: 'c' }), 'unsupported hook_type "number"'],
    [
      'an unknown hook_type',
      bytes({ hook_type: 'x'.repeat(100) }),
      `unsupported hook_type "${'x'.repeat(60)}"`,
    ],
  ])('ignores %s with a reason', (_name, raw, reason) => {
    expect(parseMsgPlatformWebhook(raw)).toEqual({ kind: 'ignored', reason })
  })

  it('never throws, whatever the bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (raw) => {
        expect(['message', 'status', 'ignored']).toContain(parseMsgPlatformWebhook(raw).kind)
      }),
    )
  })

  it('never throws, whatever the JSON value, and only accepts messages with all four strings', () => {
    const field = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.boolean(), fc.jsonValue())
    const payload = fc.record(
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
    fc.assert(
      fc.property(fc.oneof(payload, fc.jsonValue()), (value) => {
        const parsed = readMsgPlatformPayload(value)
        if (parsed.kind === 'message') {
          const body = value as Record<string, unknown>
          expect(typeof body.text).toBe('string')
          expect(parsed.clientId).toBe(body.client_id)
          expect(parsed.channelId).toBe(body.channel_id)
          expect(parsed.transport).toBe(body.transport)
        }
        if (parsed.kind === 'ignored') expect(parsed.reason.length).toBeGreaterThan(0)
      }),
    )
  })
})
