/** Credits every new company starts with. */
export const FREE_CREDITS_USD = 5

export const DEFAULT_PIPELINE_NAME = 'Sales'

/** The stages of the default pipeline, in order. */
export const DEFAULT_PIPELINE_STAGES: readonly string[] = Object.freeze([
  'New',
  'Qualified',
  'Proposal',
  'Negotiation',
  'Won',
  'Lost',
])
