import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto'

const VERSION = 'v1'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/

/**
 * A visitor's token: `v1.<integrationId>.<visitorId>.<signature>`, the signature an HMAC-SHA256
 * with the integration's secret over the other parts. It binds the visitor to one integration,
 * and rotating the integration's secret signs every visitor out.
 */
export function signVisitorToken(options: {
  integrationId: string
  visitorId: string
  secret: string
}): string {
  const payload = `${VERSION}.${options.integrationId}.${options.visitorId}`
  return `${payload}.${sign(payload, options.secret)}`
}

/** The visitor id of a token signed for this integration with this secret; null for anything else. */
export function verifyVisitorToken(options: {
  token: string
  integrationId: string
  secret: string
}): string | null {
  const parts = options.token.split('.')
  if (parts.length !== 4) return null
  const [version, integrationId, visitorId, signature] = parts as [string, string, string, string]
  if (version !== VERSION || integrationId !== options.integrationId) return null
  if (!UUID.test(visitorId) || !SIGNATURE.test(signature)) return null
  const expected = Buffer.from(sign(`${version}.${integrationId}.${visitorId}`, options.secret))
  const received = Buffer.from(signature)
  return received.length === expected.length && timingSafeEqual(received, expected) ? visitorId : null
}

export function newVisitorId(): string {
  return randomUUID()
}

function sign(payload: string, secret: string): string {
  return createHmac('sha256', secret).update(`switchboard-webchat-visitor.${payload}`).digest('base64url')
}
