import type { Request } from 'express'

/**
 * The JSON body with a top-level `companyId` taken out: tenancy comes from the credential only,
 * and a body that names a company is read as if it did not (CONTRACT §2), not refused. No body
 * at all reads as `{}`, for the endpoints whose fields are all optional.
 */
export function bodyOf(request: Request): unknown {
  const body: unknown = request.body
  if (body === undefined) return {}
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !Object.hasOwn(body, 'companyId')) {
    return body
  }
  const { companyId: _ignored, ...rest } = body as Record<string, unknown>
  return rest
}
