import type { Integration } from '@switchboard/core'

/** The integration `type` this package serves. */
export const MSGPLATFORM_TYPE = 'msgplatform'

/** What the connector needs of an integration's `config`. */
export interface PlatformConfig {
  /** Without a trailing slash, so paths join with one. */
  readonly apiBaseUrl: string
  readonly apiToken: string
}

/**
 * The platform's address and token, or null when the stored config lacks them. Core validates the
 * config when it is written; this guards the connector against rows written some other way.
 */
export function readPlatformConfig(integration: Integration): PlatformConfig | null {
  const { apiBaseUrl, apiToken } = integration.config
  if (typeof apiBaseUrl !== 'string' || apiBaseUrl === '') return null
  if (typeof apiToken !== 'string' || apiToken === '') return null
  return { apiBaseUrl: apiBaseUrl.replace(/\/+$/, ''), apiToken }
}
