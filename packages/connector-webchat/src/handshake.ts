import type { ErrorCode, Integration, Storage } from '@switchboard/core'
import { newVisitorId, signVisitorToken, verifyVisitorToken } from './visitor-token.js'

/** Who may connect, decided before the upgrade. */
export type HandshakeVerdict =
  | {
      readonly ok: true
      readonly integration: Integration
      readonly visitorId: string
      readonly visitorToken: string
    }
  | {
      readonly ok: false
      readonly status: 401 | 403 | 404
      readonly code: ErrorCode
      readonly message: string
    }

const INTEGRATION_ID = /^[1-9][0-9]{0,17}$/

/**
 * CONTRACT §7's refusals, in its order: 404 an unknown integration (or one of another type),
 * 403 an inactive one or an `Origin` not in `allowedOrigins`, 401 a `token` that is not this
 * integration's. Without a token the visitor is new and gets one.
 */
export async function checkHandshake(options: {
  readonly storage: Storage
  readonly integrationId: string
  readonly origin: string | undefined
  readonly token: string | null
}): Promise<HandshakeVerdict> {
  const integration = INTEGRATION_ID.test(options.integrationId)
    ? await options.storage.integrations.get({ id: options.integrationId })
    : null
  return judgeHandshake(integration, options.origin, options.token)
}

/**
 * `checkHandshake` on an integration already read (null: none of that id). Open sockets are judged
 * again this way, with the token they were admitted with: a rotated secret, a switched-off or
 * deleted integration, or an origin no longer allowed revokes them too.
 */
export function judgeHandshake(
  integration: Integration | null,
  origin: string | undefined,
  token: string | null,
): HandshakeVerdict {
  // A webchat integration always has a secret (it signs the visitor tokens); one without is unusable.
  if (integration === null || integration.type !== 'webchat' || !integration.webhookSecret) {
    return { ok: false, status: 404, code: 'NOT_FOUND', message: 'integration not found' }
  }
  if (!integration.active) {
    return { ok: false, status: 403, code: 'INTEGRATION_INACTIVE', message: 'the integration is not active' }
  }
  if (!originAllowed(integration, origin)) {
    return { ok: false, status: 403, code: 'FORBIDDEN', message: 'this origin may not use the integration' }
  }
  const secret = integration.webhookSecret
  if (token === null) {
    const visitorId = newVisitorId()
    return {
      ok: true,
      integration,
      visitorId,
      visitorToken: signVisitorToken({ integrationId: integration.id, visitorId, secret }),
    }
  }
  const visitorId = verifyVisitorToken({ token, integrationId: integration.id, secret })
  if (visitorId === null) {
    return { ok: false, status: 401, code: 'UNAUTHORIZED', message: 'the visitor token is not valid here' }
  }
  return { ok: true, integration, visitorId, visitorToken: token }
}

/** Without `allowedOrigins` any page may embed the widget; with it, only those (and no Origin-less client). */
function originAllowed(integration: Integration, origin: string | undefined): boolean {
  const allowed = integration.config.allowedOrigins
  if (!Array.isArray(allowed)) return true
  if (origin === undefined || !URL.canParse(origin)) return false
  const normalised = new URL(origin).origin
  return allowed.some((entry) => entry === normalised)
}
