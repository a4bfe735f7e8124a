/** What became of one received webhook, as its integration's log shows it. */
export const WEBHOOK_OUTCOMES = [
  'queued',
  'stored_paused',
  'duplicate',
  'ignored',
  'session_close',
  'session_transfer_external',
  'rejected',
] as const

export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number]

/** Older entries of an integration's webhook log are dropped as new ones arrive. */
export const WEBHOOK_LOGS_KEPT_PER_INTEGRATION = 1000

/**
 * How long a webhook's delivery id is remembered. Senders retry a failed delivery for hours, a day
 * or two at most, so a week outlasts every retry while the ids kept stay bounded.
 */
export const WEBHOOK_DELIVERIES_KEPT_MS = 7 * 24 * 60 * 60 * 1000
