import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { signWebhookBody, verifyWebhookSignature } from './verify-signature.js'

const secret = 'whsec_test_secret'
const body = new TextEncoder().encode('{"text":"hello","client_id":"c1","channel_id":"ch1","transport":"tg"}')
const signature = signWebhookBody(body, secret)

function verify(headers: Record<string, string | string[] | undefined>, rawBody = body, key = secret) {
  return verifyWebhookSignature({ rawBody, secret: key, headers })
}

describe('signWebhookBody', () => {
  it('answers sha256= and 64 lowercase hex digits', () => {
    expect(signature).toMatch(/^sha256=[0-9a-f]{64}$/)
  })

  it('signs a string as its UTF-8 bytes', () => {
    expect(signWebhookBody('héllo', secret)).toBe(signWebhookBody(new TextEncoder().encode('héllo'), secret))
  })

  it('matches a known HMAC-SHA256 vector (RFC 4231 test case 2)', () => {
    expect(signWebhookBody('what do ya want for nothing?', 'Jefe')).toBe(
      'sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    )
  })
})

describe('verifyWebhookSignature', () => {
  it('accepts a correct signature in x-webhook-signature', () => {
    expect(verify({ 'x-webhook-signature': signature })).toBe(true)
  })

  it('accepts a correct signature in x-hub-signature-256', () => {
    expect(verify({ 'x-hub-signature-256': signature })).toBe(true)
  })

  it('finds the header whatever the case of its name', () => {
    expect(verify({ 'X-Webhook-Signature': signature })).toBe(true)
    expect(verify({ 'X-HUB-SIGNATURE-256': signature })).toBe(true)
  })

  it('takes the first value of a repeated header', () => {
    expect(verify({ 'x-webhook-signature': [signature, 'sha256=00'] })).toBe(true)
    expect(verify({ 'x-webhook-signature': ['sha256=00', signature] })).toBe(false)
  })

  it('prefers x-webhook-signature over x-hub-signature-256', () => {
    expect(verify({ 'x-webhook-signature': 'sha256=bad', 'x-hub-signature-256': signature })).toBe(false)
    expect(verify({ 'x-webhook-signature': signature, 'x-hub-signature-256': 'sha256=bad' })).toBe(true)
  })

  it('falls back to x-hub-signature-256 when x-webhook-signature has no value', () => {
    expect(verify({ 'x-webhook-signature': undefined, 'x-hub-signature-256': signature })).toBe(true)
    expect(verify({ 'x-webhook-signature': [], 'x-hub-signature-256': signature })).toBe(true)
  })

  it('accepts upper-case hex digits', () => {
    const upper = 'sha256=' + signature.slice('sha256='.length).toUpperCase()
    expect(verify({ 'x-webhook-signature': upper })).toBe(true)
  })

  it.each([
    ['a missing header', {}],
    ['an empty header', { 'x-webhook-signature': '' }],
    ['an empty array', { 'x-webhook-signature': [] }],
    ['no prefix', { 'x-webhook-signature': signature.slice('sha256='.length) }],
    ['a sha1= prefix', { 'x-webhook-signature': 'sha1=' + signature.slice('sha256='.length) }],
    ['an upper-case prefix', { 'x-webhook-signature': 'SHA256=' + signature.slice('sha256='.length) }],
    ['non-hex digits', { 'x-webhook-signature': 'sha256=' + 'zz'.repeat(32) }],
    ['an odd length', { 'x-webhook-signature': signature.slice(0, -1) }],
    ['a short signature', { 'x-webhook-signature': signature.slice(0, -2) }],
    ['a long signature', { 'x-webhook-signature': signature + '00' }],
    ['surrounding whitespace', { 'x-webhook-signature': ` ${signature}` }],
    ['a signature in another header', { 'x-signature': signature }],
  ])('rejects %s', (_case, headers) => {
    expect(verify(headers)).toBe(false)
  })

  it('rejects a signature made with another secret', () => {
    expect(verify({ 'x-webhook-signature': signWebhookBody(body, 'other') })).toBe(false)
  })

  it('rejects an empty secret, even with a signature made with it', () => {
    expect(verify({ 'x-webhook-signature': signWebhookBody(body, '') }, body, '')).toBe(false)
  })

  it('never throws for inputs of the wrong runtime type', () => {
    const malformed = [
      { rawBody: 'text', secret, headers: { 'x-webhook-signature': signature } },
      { rawBody: body, secret: 42, headers: { 'x-webhook-signature': signature } },
      { rawBody: body, secret, headers: null },
      { rawBody: body, secret, headers: { 'x-webhook-signature': 42 } },
      { rawBody: body, secret, headers: { 'x-webhook-signature': [42] } },
      null,
      undefined,
    ]
    for (const options of malformed) {
      expect(verifyWebhookSignature(options as never)).toBe(false)
    }
  })

  describe('properties', () => {
    const headerValue = fc.oneof(
      fc.string(),
      fc.array(fc.string()),
      fc.constant(undefined),
      fc.string().map((text) => 'sha256=' + text),
      fc.stringMatching(/^sha256=[0-9a-fA-F]{0,80}$/),
    )
    const headerName = fc.oneof(
      fc.constantFrom(
        'x-webhook-signature',
        'x-hub-signature-256',
        'X-Webhook-Signature',
        'X-HUB-SIGNATURE-256',
      ),
      fc.string(),
    )

    it('never throws and rejects arbitrary headers', () => {
      fc.assert(
        fc.property(
          fc.uint8Array(),
          fc.string(),
          fc.dictionary(headerName, headerValue),
          (rawBody, key, headers) => {
            expect(verifyWebhookSignature({ rawBody, secret: key, headers })).toBe(false)
          },
        ),
      )
    })

    it('verifies a correct signature under both header names', () => {
      fc.assert(
        fc.property(fc.uint8Array(), fc.string({ minLength: 1 }), (rawBody, key) => {
          const signed = signWebhookBody(rawBody, key)
          expect(verify({ 'x-webhook-signature': signed }, rawBody, key)).toBe(true)
          expect(verify({ 'x-hub-signature-256': signed }, rawBody, key)).toBe(true)
        }),
      )
    })

    it('rejects a body with any single byte changed', () => {
      fc.assert(
        fc.property(
          fc.uint8Array({ minLength: 1 }),
          fc.nat(),
          fc.integer({ min: 1, max: 255 }),
          (rawBody, position, delta) => {
            const signed = signWebhookBody(rawBody, secret)
            const changed = Uint8Array.from(rawBody)
            const index = position % changed.length
            changed[index] = (changed[index]! + delta) % 256
            expect(verify({ 'x-webhook-signature': signed }, changed)).toBe(false)
          },
        ),
      )
    })

    it('rejects a signature with any single character changed, except the case of a hex digit', () => {
      fc.assert(
        fc.property(
          fc.uint8Array(),
          fc.nat(),
          fc.integer({ min: 0, max: 0xffff }),
          (rawBody, position, code) => {
            const signed = signWebhookBody(rawBody, secret)
            const index = position % signed.length
            const original = signed[index]!
            const replacement = String.fromCharCode(code)
            fc.pre(replacement.toLowerCase() !== original.toLowerCase() || index < 'sha256='.length)
            fc.pre(replacement !== original)
            const changed = signed.slice(0, index) + replacement + signed.slice(index + 1)
            expect(verify({ 'x-webhook-signature': changed }, rawBody)).toBe(false)
          },
        ),
      )
    })

    it('rejects JSON re-serialised with other spacing', () => {
      fc.assert(
        fc.property(
          fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }),
          fc.integer({ min: 1, max: 4 }),
          (value, indent) => {
            const sent = new TextEncoder().encode(JSON.stringify(value))
            const reserialised = new TextEncoder().encode(JSON.stringify(value, null, indent))
            const signed = signWebhookBody(sent, secret)
            expect(verify({ 'x-webhook-signature': signed }, reserialised)).toBe(false)
          },
        ),
      )
    })
  })
})
