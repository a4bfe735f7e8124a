import { randomBytes } from 'node:crypto'
import { err, ok, type Result } from 'neverthrow'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import { parseInput } from '../domain/parse-input.js'
import type { Clock } from '../ports/clock.js'
import { type Connector, supportsStatusHooks } from '../ports/connector.js'
import type { Integration, Page, PageRequest, Repositories, Storage, WebhookLog } from '../ports/storage.js'
import {
  configPatchSchemas,
  configSchemas,
  type IntegrationInput,
  type IntegrationPatchInput,
  integrationInputSchema,
  integrationPatchSchema,
} from './integration-schemas.js'

/** The platform events the status-hooks helper registers. */
export const STATUS_HOOK_EVENTS = ['close_dialog', 'close_request', 'dialog_transferred'] as const

/** Config fields that are secrets: kept, used by the connector, never shown again. */
const SECRET_CONFIG_FIELDS: ReadonlySet<string> = new Set(['apiToken'])

export interface IntegrationServiceOptions {
  readonly storage: Storage
  readonly clock: Clock
  /** The connector registered for an integration type, if any. */
  readonly connectors: (type: string) => Connector | undefined
  /** Base of the URLs handed out, e.g. `https://chat.example.com`. */
  readonly publicUrl: string
  /** A new webhook secret; 32 random bytes as hex unless a test says otherwise. */
  readonly generateSecret?: () => string
}

/** An integration as the API shows it: no webhook secret, no secret config field. */
export interface IntegrationView {
  readonly id: string
  readonly type: string
  readonly name: string
  readonly active: boolean
  readonly entryAgentId: number
  readonly webhookUrl: string
  readonly config: Readonly<Record<string, unknown>>
  readonly createdAt: string
  readonly updatedAt: string
}

/** The answer to a creation, the one time besides a rotation that the secret is shown. */
export interface CreatedIntegration {
  readonly id: string
  readonly type: string
  readonly name: string
  readonly active: boolean
  readonly entryAgentId: number
  readonly webhookUrl: string
  readonly webhookSecret: string
}

/** The integrations of a company. Every call names the company; another company's is not found. */
export interface IntegrationService {
  create(companyId: number, input: IntegrationInput): Promise<Result<CreatedIntegration, SwitchboardError>>
  get(companyId: number, id: string): Promise<Result<IntegrationView, SwitchboardError>>
  /** Oldest first. */
  list(companyId: number, page: PageRequest): Promise<Page<IntegrationView>>
  update(
    companyId: number,
    id: string,
    patch: IntegrationPatchInput,
  ): Promise<Result<IntegrationView, SwitchboardError>>
  delete(companyId: number, id: string): Promise<Result<null, SwitchboardError>>
  /** A new secret; the old one stops working at once. */
  rotateSecret(companyId: number, id: string): Promise<Result<{ webhookSecret: string }, SwitchboardError>>
  /** Registers the integration's webhook URL on the platform for `STATUS_HOOK_EVENTS`. */
  registerStatusHooks(
    companyId: number,
    id: string,
  ): Promise<Result<{ registered: readonly string[] }, SwitchboardError>>
  /** Newest first. */
  webhookLogs(
    companyId: number,
    id: string,
    page: PageRequest,
  ): Promise<Result<Page<WebhookLog>, SwitchboardError>>
}

const notFound = () => switchboardError('NOT_FOUND', 'integration not found')

function randomSecret(): string {
  return randomBytes(32).toString('hex')
}

/**
 * The URL a platform or widget reaches the integration at: `{publicUrl}/api/webhook/{type}/{id}`.
 * Webchat has no HTTP webhook (its webhook path answers 404), so its URL is its WebSocket
 * endpoint, `ws(s)://…/api/webchat/{id}`.
 */
export function integrationUrl(publicUrl: string, integration: Pick<Integration, 'id' | 'type'>): string {
  const base = publicUrl.replace(/\/+$/, '')
  // Schemes are case-insensitive: HTTPS:// given is wss:// too.
  if (integration.type === 'webchat') {
    const socketBase = base.replace(/^http(s?):/i, (_scheme, secure: string) => `ws${secure.toLowerCase()}:`)
    return `${socketBase}/api/webchat/${integration.id}`
  }
  return `${base}/api/webhook/${integration.type}/${integration.id}`
}

async function checkEntryAgent(
  repositories: Repositories,
  companyId: number,
  entryAgentId: number,
): Promise<Result<null, SwitchboardError>> {
  // Held to the end of the transaction: a delete of the agent waits, and then sees this integration.
  const agent = await repositories.agents.get({ companyId, id: entryAgentId, lock: 'share' })
  if (agent !== null) return ok(null)
  return err(
    switchboardError('VALIDATION_ERROR', 'entryAgentId names no agent of this company', [
      { path: 'entryAgentId', message: 'names no agent of this company' },
    ]),
  )
}

export function createIntegrationService(options: IntegrationServiceOptions): IntegrationService {
  const { storage, clock } = options
  const generateSecret = options.generateSecret ?? randomSecret

  const view = (integration: Integration): IntegrationView => ({
    id: integration.id,
    type: integration.type,
    name: integration.name,
    active: integration.active,
    entryAgentId: integration.entryAgentId,
    webhookUrl: integrationUrl(options.publicUrl, integration),
    config: Object.fromEntries(
      Object.entries(integration.config).filter(([key]) => !SECRET_CONFIG_FIELDS.has(key)),
    ),
    createdAt: integration.createdAt,
    updatedAt: integration.updatedAt,
  })

  const find = async (companyId: number, id: string): Promise<Result<Integration, SwitchboardError>> => {
    const integration = await storage.integrations.get({ id, companyId })
    return integration === null ? err(notFound()) : ok(integration)
  }

  return {
    async create(companyId, input) {
      const parsed = parseInput(integrationInputSchema, input, 'integration')
      if (parsed.isErr()) return err(parsed.error)
      const { type, name, entryAgentId, config } = parsed.value
      const webhookSecret = parsed.value.webhookSecret ?? generateSecret()
      return storage.transaction(async (tx): Promise<Result<CreatedIntegration, SwitchboardError>> => {
        const checked = await checkEntryAgent(tx, companyId, entryAgentId)
        if (checked.isErr()) return err(checked.error)
        const integration = await tx.integrations.create({
          companyId,
          type,
          name,
          active: true,
          entryAgentId,
          config,
          webhookSecret,
          at: clock.now(),
        })
        return ok({
          id: integration.id,
          type: integration.type,
          name: integration.name,
          active: integration.active,
          entryAgentId: integration.entryAgentId,
          webhookUrl: integrationUrl(options.publicUrl, integration),
          webhookSecret,
        })
      })
    },

    get: async (companyId, id) => (await find(companyId, id)).map(view),

    async list(companyId, page) {
      const found = await storage.integrations.list({ companyId, ...page })
      return { items: found.items.map(view), nextCursor: found.nextCursor }
    },

    async update(companyId, id, patch) {
      const parsed = parseInput(integrationPatchSchema, patch, 'integration')
      if (parsed.isErr()) return err(parsed.error)
      const valid = parsed.value
      return storage.transaction(async (tx): Promise<Result<IntegrationView, SwitchboardError>> => {
        // Existence first, so a foreign id answers NOT_FOUND whatever the patch says. Held for the
        // edit: the config is merged into what is read here, so another edit must wait for it.
        const current = await tx.integrations.get({ id, companyId, lock: true })
        if (current === null) return err(notFound())
        let config: Record<string, unknown> | undefined
        if (valid.config !== undefined) {
          const merged = mergeConfig(current, valid.config)
          if (merged.isErr()) return err(merged.error)
          config = merged.value
        }
        if (valid.entryAgentId !== undefined) {
          const checked = await checkEntryAgent(tx, companyId, valid.entryAgentId)
          if (checked.isErr()) return err(checked.error)
        }
        const updated = await tx.integrations.update({
          companyId,
          id,
          patch: {
            ...(valid.name === undefined ? {} : { name: valid.name }),
            ...(valid.active === undefined ? {} : { active: valid.active }),
            ...(valid.entryAgentId === undefined ? {} : { entryAgentId: valid.entryAgentId }),
            ...(config === undefined ? {} : { config }),
          },
          at: clock.now(),
        })
        return updated === null ? err(notFound()) : ok(view(updated))
      })
    },

    async delete(companyId, id) {
      return (await storage.integrations.delete({ companyId, id })) ? ok(null) : err(notFound())
    },

    async rotateSecret(companyId, id) {
      const webhookSecret = generateSecret()
      const updated = await storage.integrations.update({
        companyId,
        id,
        patch: { webhookSecret },
        at: clock.now(),
      })
      return updated === null ? err(notFound()) : ok({ webhookSecret })
    },

    async registerStatusHooks(companyId, id) {
      const found = await find(companyId, id)
      if (found.isErr()) return err(found.error)
      const integration = found.value
      if (integration.type !== 'msgplatform') {
        return err(
          switchboardError('VALIDATION_ERROR', 'status hooks exist for msgplatform integrations only'),
        )
      }
      const connector = options.connectors(integration.type)
      if (connector === undefined || !supportsStatusHooks(connector)) {
        return err(
          switchboardError('VALIDATION_ERROR', 'no connector able to register status hooks is configured'),
        )
      }
      let outcome: Awaited<ReturnType<typeof connector.registerStatusHooks>>
      try {
        outcome = await connector.registerStatusHooks({
          integration,
          url: integrationUrl(options.publicUrl, integration),
          events: STATUS_HOOK_EVENTS,
        })
      } catch (error) {
        outcome = { ok: false, error: error instanceof Error ? error.message : String(error) }
      }
      if (!outcome.ok) {
        return err(
          switchboardError(
            'INTERNAL_ERROR',
            `the messaging platform refused to register the status hooks: ${outcome.error.slice(0, 300)}`,
          ),
        )
      }
      return ok({ registered: [...STATUS_HOOK_EVENTS] })
    },

    async webhookLogs(companyId, id, page) {
      const found = await find(companyId, id)
      if (found.isErr()) return err(found.error)
      return ok(await storage.webhookLogs.list({ companyId, integrationId: id, ...page }))
    },
  }
}

/** The stored config with the patch's fields over it, valid for the integration's type. */
function mergeConfig(
  integration: Integration,
  patch: Readonly<Record<string, unknown>>,
): Result<Record<string, unknown>, SwitchboardError> {
  const patchSchema = configPatchSchemas[integration.type]
  const fullSchema = configSchemas[integration.type]
  if (patchSchema === undefined || fullSchema === undefined) {
    return err(
      switchboardError('VALIDATION_ERROR', `integrations of type ${integration.type} have no config`),
    )
  }
  const changes = parseInput(patchSchema, patch, 'config')
  if (changes.isErr()) return err(prefixPaths(changes.error, 'config'))
  const merged: Record<string, unknown> = { ...integration.config }
  for (const [key, value] of Object.entries(changes.value)) {
    if (value === undefined) continue
    if (value === null) delete merged[key]
    else merged[key] = value
  }
  const checked = parseInput(fullSchema, merged, 'config')
  return checked.isErr() ? err(prefixPaths(checked.error, 'config')) : ok(checked.value)
}

/** Field paths of a nested check, named from the body's root as the caller sent it. */
function prefixPaths(error: SwitchboardError, prefix: string): SwitchboardError {
  const details = Array.isArray(error.details)
    ? error.details.map((detail: { path: string; message: string }) => ({
        path: detail.path === '(root)' ? prefix : `${prefix}.${detail.path}`,
        message: detail.message,
      }))
    : error.details
  const fields = Array.isArray(details)
    ? [...new Set(details.map((detail) => detail.path))].join(', ')
    : prefix
  return switchboardError('VALIDATION_ERROR', `invalid integration: ${fields}`, details)
}
