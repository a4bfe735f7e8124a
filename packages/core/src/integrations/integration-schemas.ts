import { z } from 'zod'

/** Webhook secrets shorter than this are too easy to guess. */
export const MIN_WEBHOOK_SECRET_LENGTH = 16

/** The platform's API paths (`/v1/messages`, …) are appended to it as it is. */
const apiBaseUrl = z
  .string()
  .max(2000)
  .refine((value) => {
    // A bare `?` or `#` leaves `search` and `hash` empty, and the paths appended land after it all the same.
    if (!URL.canParse(value) || value.includes('?') || value.includes('#')) return false
    const { protocol, search, hash, username, password } = new URL(value)
    return (
      (protocol === 'http:' || protocol === 'https:') &&
      search === '' &&
      hash === '' &&
      username === '' &&
      password === ''
    )
  }, 'must be an http or https URL without a query, a fragment or credentials')

/** Sent as the `Authorization` header of every request to the platform. */
const apiToken = z
  .string()
  .min(1)
  .max(2000)
  .regex(
    /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/,
    'must be printable ASCII without leading or trailing spaces (it is sent as a header)',
  )

/** `Origin` headers are `scheme://host[:port]`; any URL given is stored as its origin to match them. */
const origin = z
  .string()
  .max(2000)
  .refine(
    (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol),
    'must be an http or https origin',
  )
  .transform((value) => new URL(value).origin)

const name = z.string().trim().min(1).max(200)
const entryAgentId = z.number().int().positive().max(2_147_483_647)
const webhookSecret = z.string().min(MIN_WEBHOOK_SECRET_LENGTH).max(500)

const msgplatformConfigSchema = z.strictObject({
  apiBaseUrl,
  apiToken,
})

const webchatConfigSchema = z.strictObject({
  allowedOrigins: z.array(origin).max(100).optional(),
})

/** The body of `POST /api/integrations`, one shape per integration type. */
export const integrationInputSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('msgplatform'),
    name,
    entryAgentId,
    config: msgplatformConfigSchema,
    webhookSecret: webhookSecret.optional(),
  }),
  z.strictObject({
    type: z.literal('webchat'),
    name,
    entryAgentId,
    config: webchatConfigSchema.default({}),
    webhookSecret: webhookSecret.optional(),
  }),
])

/**
 * Any JSON object, passed on as it is. zod's records and objects leave out a key `__proto__`,
 * which the config check of the integration's type would then never see to refuse.
 */
const configPatch = z.custom<Record<string, unknown>>(
  (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
  'Invalid input: expected object',
)

/**
 * The body of `PATCH /api/integrations/{id}`. `config` is merged over the stored one (so a patch
 * need not repeat the `apiToken` it never sees) and checked against the integration's type.
 */
export const integrationPatchSchema = z.strictObject({
  name: name.optional(),
  active: z.boolean().optional(),
  entryAgentId: entryAgentId.optional(),
  config: configPatch.optional(),
})

/** Per type, the config fields a patch may set; `null` removes an optional one. */
export const configPatchSchemas: Readonly<Record<string, z.ZodType<Record<string, unknown>>>> = {
  msgplatform: msgplatformConfigSchema.partial(),
  webchat: z.strictObject({ allowedOrigins: z.array(origin).max(100).nullable().optional() }),
}

/** The config each type must end up with after a patch. */
export const configSchemas: Readonly<Record<string, z.ZodType<Record<string, unknown>>>> = {
  msgplatform: msgplatformConfigSchema,
  webchat: webchatConfigSchema,
}

export type IntegrationInput = z.input<typeof integrationInputSchema>
export type IntegrationPatchInput = z.input<typeof integrationPatchSchema>
