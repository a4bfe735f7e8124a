import { ConfigError, describeOptionValue as describeValue, missingMembers } from '@switchboard/core'
import type { RouterOptions } from './create-router.js'

/**
 * Webhook URLs are the publicUrl with a path appended (`{publicUrl}/api/webhook/...`), handed to
 * platforms that must reach them: a relative URL, another scheme, or a query or fragment the path
 * would land after makes every one of them unreachable.
 */
function isPublicUrl(value: unknown): boolean {
  // A bare `?` or `#` leaves `search` and `hash` empty, and the path appended lands after it all the same.
  if (typeof value !== 'string' || !URL.canParse(value) || value.includes('?') || value.includes('#'))
    return false
  const url = new URL(value)
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.search === '' && url.hash === ''
}

/**
 * Called from plain JavaScript, a missing option failed as "Cannot read properties of undefined"
 * and a bad publicUrl was taken silently, to surface only in the URLs handed out.
 */
export function checkRouterOptions(options: RouterOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError(
      `createRouter needs an options object with switchboard, accounts, billing and publicUrl, got ${describeValue(options)}`,
    )
  }
  const { switchboard, accounts, billing, publicUrl } = options
  const notSwitchboard = missingMembers(switchboard, ['connector', 'ingest'], ['storage'])
  if (notSwitchboard !== null) {
    throw new ConfigError(
      `createRouter: switchboard must be a Switchboard (from createSwitchboard()), got ${notSwitchboard}`,
    )
  }
  const notAccounts = missingMembers(accounts, ['authenticate', 'login'])
  if (notAccounts !== null) {
    throw new ConfigError(
      `createRouter: accounts must be Accounts (from createAccounts()), got ${notAccounts}`,
    )
  }
  const notBilling = missingMembers(billing, ['balance', 'usage'])
  if (notBilling !== null) {
    throw new ConfigError(`createRouter: billing must be Billing (from createBilling()), got ${notBilling}`)
  }
  if (!isPublicUrl(publicUrl)) {
    throw new ConfigError(
      `createRouter: publicUrl must be an absolute http(s) URL without a query or fragment, the base of the webhook URLs handed out for integrations (e.g. "https://chat.example.com"), got ${describeValue(publicUrl)}`,
    )
  }
}
