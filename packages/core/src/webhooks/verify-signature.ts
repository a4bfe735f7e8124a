import { createHmac, timingSafeEqual } from 'node:crypto'

/** Header names in order of preference; the second is GitHub's, which many platforms copy. */
const SIGNATURE_HEADERS = ['x-webhook-signature', 'x-hub-signature-256'] as const

const SIGNATURE_PREFIX = 'sha256='

/** A SHA-256 digest is 32 bytes, so exactly 64 hex digits; anything else is malformed. */
const SHA256_HEX = /^[0-9a-fA-F]{64}$/

export interface VerifyWebhookSignatureOptions {
  /** The body exactly as received: re-serialised JSON would not match the sender's bytes. */
  readonly rawBody: Uint8Array
  readonly secret: string
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

/** `sha256=<hex>` of HMAC-SHA256 over the body, as a platform would sign it. */
export function signWebhookBody(rawBody: Uint8Array | string, secret: string): string {
  return SIGNATURE_PREFIX + createHmac('sha256', secret).update(rawBody).digest('hex')
}

/**
 * Whether the request carries a valid signature of its raw body. Every malformed input answers
 * false rather than throwing, because the caller turns false into a 401 and a throw into a 500
 * that would make the platform retry a request that can never succeed.
 */
export function verifyWebhookSignature(options: VerifyWebhookSignatureOptions): boolean {
  try {
    const { rawBody, secret, headers } = options
    if (typeof secret !== 'string' || secret.length === 0) return false
    if (!(rawBody instanceof Uint8Array)) return false
    const signature = findSignatureHeader(headers)
    if (signature === null || !signature.startsWith(SIGNATURE_PREFIX)) return false
    const hex = signature.slice(SIGNATURE_PREFIX.length)
    if (!SHA256_HEX.test(hex)) return false
    const received = Buffer.from(hex, 'hex')
    const expected = createHmac('sha256', secret).update(rawBody).digest()
    // timingSafeEqual throws on different lengths; the pattern above already guarantees 32 bytes.
    return received.length === expected.length && timingSafeEqual(received, expected)
  } catch {
    return false
  }
}

function findSignatureHeader(headers: VerifyWebhookSignatureOptions['headers']): string | null {
  if (typeof headers !== 'object' || headers === null) return null
  const byLowercaseName = new Map<string, string | string[] | undefined>()
  for (const [name, value] of Object.entries(headers)) {
    const lowercaseName = name.toLowerCase()
    if (!byLowercaseName.has(lowercaseName)) byLowercaseName.set(lowercaseName, value)
  }
  for (const name of SIGNATURE_HEADERS) {
    const value = firstValue(byLowercaseName.get(name))
    if (value !== null) return value
  }
  return null
}

function firstValue(value: string | string[] | undefined): string | null {
  const first = Array.isArray(value) ? value[0] : value
  return typeof first === 'string' ? first : null
}
