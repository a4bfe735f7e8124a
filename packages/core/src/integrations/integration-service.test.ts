import { describe, expect, it } from 'vitest'
import { createMemoryStorage } from '../memory/memory-storage.js'
import type { Connector } from '../ports/connector.js'
import { createManualClock } from '../testing/manual-clock.js'
import { createRecordingConnector, type RecordingConnector } from '../testing/recording-connector.js'
import { createIntegrationService, integrationUrl, STATUS_HOOK_EVENTS } from './integration-service.js'

const COMPANY = 1
const OTHER_COMPANY = 2
const PUBLIC_URL = 'https://chat.example.com/'

async function setup(options: { connectors?: readonly Connector[] } = {}) {
  const storage = createMemoryStorage()
  const clock = createManualClock()
  const connectors = new Map((options.connectors ?? []).map((connector) => [connector.type, connector]))
  const integrations = createIntegrationService({
    storage,
    clock,
    connectors: (type) => connectors.get(type),
    publicUrl: PUBLIC_URL,
  })
  const agent = await storage.agents.create({
    companyId: COMPANY,
    name: 'Reception',
    kind: 'ai',
    systemPrompt: '',
    llmModel: 'gpt-4o-mini',
    maxDepth: 3,
    handoff: {
      enabled: false,
      allowedTargets: [],
      announceHandoff: true,
      handoffMessageTemplate: '',
      messageHistoryDepth: 15,
      msgplatform: { sendSystemMessage: true },
    },
    fallbackReply: null,
    at: clock.now(),
  })
  const foreignAgent = await storage.agents.create({ ...agent, companyId: OTHER_COMPANY, at: clock.now() })
  return { storage, clock, integrations, agentId: agent.id, foreignAgentId: foreignAgent.id }
}

const msgplatformInput = (entryAgentId: number) => ({
  type: 'msgplatform' as const,
  name: 'Support line',
  entryAgentId,
  config: { apiBaseUrl: 'https://platform.example.com', apiToken: 'platform-token' },
})

describe('integration service', () => {
  it('creates a msgplatform integration and shows its secret only then', async () => {
    const { integrations, storage, agentId } = await setup()
    const created = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
    expect(Object.keys(created).sort()).toEqual(
      ['active', 'entryAgentId', 'id', 'name', 'type', 'webhookSecret', 'webhookUrl'].sort(),
    )
    expect(created).toMatchObject({
      type: 'msgplatform',
      name: 'Support line',
      active: true,
      entryAgentId: agentId,
      webhookUrl: `https://chat.example.com/api/webhook/msgplatform/${created.id}`,
    })
    expect(created.id).toMatch(/^[0-9]+$/)
    expect(created.webhookSecret).toMatch(/^[0-9a-f]{64}$/)
    expect((await storage.integrations.get({ id: created.id }))?.webhookSecret).toBe(created.webhookSecret)

    const shown = (await integrations.get(COMPANY, created.id))._unsafeUnwrap()
    expect(shown).not.toHaveProperty('webhookSecret')
    expect(shown.config).toEqual({ apiBaseUrl: 'https://platform.example.com' })
    const listed = await integrations.list(COMPANY, { limit: 50 })
    expect(JSON.stringify(listed)).not.toContain('platform-token')
    expect(JSON.stringify(listed)).not.toContain(created.webhookSecret)
  })

  it('keeps a given secret of 16 characters or more and refuses a shorter one', async () => {
    const { integrations, agentId } = await setup()
    const given = 'a-secret-of-16ch'
    const created = await integrations.create(COMPANY, { ...msgplatformInput(agentId), webhookSecret: given })
    expect(created._unsafeUnwrap().webhookSecret).toBe(given)
    const short = await integrations.create(COMPANY, { ...msgplatformInput(agentId), webhookSecret: 'short' })
    expect(short._unsafeUnwrapErr()).toMatchObject({
      code: 'VALIDATION_ERROR',
      details: [expect.objectContaining({ path: 'webhookSecret' })],
    })
  })

  it('checks the type, the config and the entry agent', async () => {
    const { integrations, agentId, foreignAgentId } = await setup()
    const paths = async (input: unknown) =>
      (
        (await integrations.create(COMPANY, input as never))._unsafeUnwrapErr().details as { path: string }[]
      ).map((detail) => detail.path)
    expect(await paths({ ...msgplatformInput(agentId), type: 'fax' })).toEqual(['type'])
    expect(
      await paths({ ...msgplatformInput(agentId), config: { apiBaseUrl: 'ftp://x', apiToken: 't' } }),
    ).toEqual(['config.apiBaseUrl'])
    expect(await paths({ ...msgplatformInput(agentId), config: { apiBaseUrl: 'https://x' } })).toEqual([
      'config.apiToken',
    ])
    expect(await paths(msgplatformInput(foreignAgentId))).toEqual(['entryAgentId'])
  })

  // Both are used as they are in every request to the platform: a query in the base URL ended up
  // before the path (`https://x/?a=1/v1/messages`), and a token that is no header value made each
  // send throw, retried five times as if the platform could not be reached.
  it('refuses a base URL with a query, a fragment or credentials, and a token that is no header value', async () => {
    const { integrations, agentId } = await setup()
    const paths = async (config: Record<string, string>) => {
      const created = await integrations.create(COMPANY, { ...msgplatformInput(agentId), config } as never)
      return created.isOk() ? [] : (created.error.details as { path: string }[]).map((detail) => detail.path)
    }
    // A bare `?` or `#` leaves URL's search and hash empty, yet ends up before the path all the same.
    for (const apiBaseUrl of [
      'https://x/?a=1',
      'https://x/#top',
      'https://user:pw@x/',
      'https://x/?',
      'https://x/api#',
    ]) {
      expect(await paths({ apiBaseUrl, apiToken: 't' })).toEqual(['config.apiBaseUrl'])
    }
    for (const apiToken of ['line\nbreak', 'tab at the end\t', ' leading', 'emoji 🙂', 'nul\u0000']) {
      expect(await paths({ apiBaseUrl: 'https://x', apiToken })).toEqual(['config.apiToken'])
    }
    expect(await paths({ apiBaseUrl: 'https://x/api/', apiToken: 'Bearer sk-123 abc' })).toEqual([])
  })

  // URL schemes are case-insensitive (RFC 3986 §3.1): a public URL given as HTTPS://… is as good.
  it('makes the WebSocket URL of a webchat integration from a public URL whose scheme has capitals', () => {
    const webchat = { id: '7', type: 'webchat' }
    expect(integrationUrl('HTTPS://Chat.Example.com/', webchat)).toBe('wss://Chat.Example.com/api/webchat/7')
    expect(integrationUrl('Http://localhost:3000', webchat)).toBe('ws://localhost:3000/api/webchat/7')
    expect(integrationUrl('HTTPS://Chat.Example.com', { id: '8', type: 'msgplatform' })).toBe(
      'HTTPS://Chat.Example.com/api/webhook/msgplatform/8',
    )
  })

  it('creates a webchat integration whose URL is its WebSocket endpoint', async () => {
    const { integrations, agentId } = await setup()
    const created = (
      await integrations.create(COMPANY, {
        type: 'webchat',
        name: 'Widget',
        entryAgentId: agentId,
        config: { allowedOrigins: ['https://shop.example.com/', 'http://localhost:5173'] },
      })
    )._unsafeUnwrap()
    expect(created.webhookUrl).toBe(`wss://chat.example.com/api/webchat/${created.id}`)
    expect((await integrations.get(COMPANY, created.id))._unsafeUnwrap().config).toEqual({
      allowedOrigins: ['https://shop.example.com', 'http://localhost:5173'],
    })
    const bare = await integrations.create(COMPANY, { type: 'webchat', name: 'Bare', entryAgentId: agentId })
    expect(bare.isOk()).toBe(true)
  })

  it('patches name, state, entry agent and config, merging config over what is stored', async () => {
    const { integrations, storage, agentId, foreignAgentId, clock } = await setup()
    const { id } = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
    clock.set('2026-02-01T00:00:00.000Z')

    const updated = (
      await integrations.update(COMPANY, id, {
        name: 'Renamed',
        active: false,
        config: { apiBaseUrl: 'http://other.example.com' },
      })
    )._unsafeUnwrap()
    expect(updated).toMatchObject({
      name: 'Renamed',
      active: false,
      config: { apiBaseUrl: 'http://other.example.com' },
      updatedAt: '2026-02-01T00:00:00.000Z',
    })
    expect((await storage.integrations.get({ id }))?.config).toEqual({
      apiBaseUrl: 'http://other.example.com',
      apiToken: 'platform-token',
    })

    const badConfig = await integrations.update(COMPANY, id, { config: { apiBaseUrl: 'nope', extra: 1 } })
    expect((badConfig._unsafeUnwrapErr().details as { path: string }[]).map((detail) => detail.path)).toEqual(
      expect.arrayContaining(['config.apiBaseUrl', 'config.extra']),
    )
    const badAgent = await integrations.update(COMPANY, id, { entryAgentId: foreignAgentId })
    expect(badAgent._unsafeUnwrapErr().details).toEqual([
      { path: 'entryAgentId', message: 'names no agent of this company' },
    ])
    const badField = await integrations.update(COMPANY, id, { webhookSecret: 'x'.repeat(20) } as never)
    expect(badField._unsafeUnwrapErr().code).toBe('VALIDATION_ERROR')
  })

  it('removes the allowed origins of a webchat integration patched to null', async () => {
    const { integrations, agentId } = await setup()
    const { id } = (
      await integrations.create(COMPANY, {
        type: 'webchat',
        name: 'Widget',
        entryAgentId: agentId,
        config: { allowedOrigins: ['https://shop.example.com'] },
      })
    )._unsafeUnwrap()
    const updated = await integrations.update(COMPANY, id, { config: { allowedOrigins: null } })
    expect(updated._unsafeUnwrap().config).toEqual({})
  })

  it("treats another company's integration as missing", async () => {
    const { integrations, agentId } = await setup()
    const { id } = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
    expect((await integrations.get(OTHER_COMPANY, id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect((await integrations.update(OTHER_COMPANY, id, { name: 'x' }))._unsafeUnwrapErr().code).toBe(
      'NOT_FOUND',
    )
    expect((await integrations.rotateSecret(OTHER_COMPANY, id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect((await integrations.registerStatusHooks(OTHER_COMPANY, id))._unsafeUnwrapErr().code).toBe(
      'NOT_FOUND',
    )
    expect((await integrations.webhookLogs(OTHER_COMPANY, id, { limit: 5 }))._unsafeUnwrapErr().code).toBe(
      'NOT_FOUND',
    )
    expect((await integrations.delete(OTHER_COMPANY, id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
    expect((await integrations.list(OTHER_COMPANY, { limit: 50 })).items).toEqual([])
    expect((await integrations.get(COMPANY, id))._unsafeUnwrap().name).toBe('Support line')
  })

  it('rotates the secret and deletes', async () => {
    const { integrations, storage, agentId } = await setup()
    const created = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
    const rotated = (await integrations.rotateSecret(COMPANY, created.id))._unsafeUnwrap()
    expect(rotated.webhookSecret).toMatch(/^[0-9a-f]{64}$/)
    expect(rotated.webhookSecret).not.toBe(created.webhookSecret)
    expect((await storage.integrations.get({ id: created.id }))?.webhookSecret).toBe(rotated.webhookSecret)

    expect((await integrations.delete(COMPANY, created.id)).isOk()).toBe(true)
    expect((await integrations.get(COMPANY, created.id))._unsafeUnwrapErr().code).toBe('NOT_FOUND')
  })

  describe('status hooks', () => {
    it('registers the webhook URL for the three events', async () => {
      const connector = createRecordingConnector({ type: 'msgplatform', statusHooks: true })
      const { integrations, agentId } = await setup({ connectors: [connector] })
      const { id } = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
      const result = await integrations.registerStatusHooks(COMPANY, id)
      expect(result._unsafeUnwrap()).toEqual({
        registered: ['close_dialog', 'close_request', 'dialog_transferred'],
      })
      expect(connector.statusHooks).toEqual([
        {
          integrationId: id,
          url: `https://chat.example.com/api/webhook/msgplatform/${id}`,
          events: [...STATUS_HOOK_EVENTS],
        },
      ])
    })

    it('answers INTERNAL_ERROR when the platform refuses or the call throws', async () => {
      const connector: RecordingConnector = createRecordingConnector({
        type: 'msgplatform',
        statusHooks: true,
      })
      const { integrations, agentId } = await setup({ connectors: [connector] })
      const { id } = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
      connector.failNextStatusHooks('401 bad token')
      const refused = (await integrations.registerStatusHooks(COMPANY, id))._unsafeUnwrapErr()
      expect(refused.code).toBe('INTERNAL_ERROR')
      expect(refused.message).toContain('refused')

      const throwing: Connector = {
        type: 'msgplatform',
        send: async () => ({ ok: true }),
        registerStatusHooks: async () => {
          throw new Error('socket hang up')
        },
      }
      const other = await setup({ connectors: [throwing] })
      const created = (
        await other.integrations.create(COMPANY, msgplatformInput(other.agentId))
      )._unsafeUnwrap()
      expect(
        (await other.integrations.registerStatusHooks(COMPANY, created.id))._unsafeUnwrapErr().code,
      ).toBe('INTERNAL_ERROR')
    })

    it('answers VALIDATION_ERROR for webchat and when no connector can register them', async () => {
      const unable = createRecordingConnector({ type: 'msgplatform' })
      const { integrations, agentId } = await setup({ connectors: [unable] })
      const webchat = (
        await integrations.create(COMPANY, { type: 'webchat', name: 'Widget', entryAgentId: agentId })
      )._unsafeUnwrap()
      expect((await integrations.registerStatusHooks(COMPANY, webchat.id))._unsafeUnwrapErr().code).toBe(
        'VALIDATION_ERROR',
      )
      const msgplatform = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
      expect((await integrations.registerStatusHooks(COMPANY, msgplatform.id))._unsafeUnwrapErr().code).toBe(
        'VALIDATION_ERROR',
      )
      const none = await setup()
      const created = (
        await none.integrations.create(COMPANY, msgplatformInput(none.agentId))
      )._unsafeUnwrap()
      expect((await none.integrations.registerStatusHooks(COMPANY, created.id))._unsafeUnwrapErr().code).toBe(
        'VALIDATION_ERROR',
      )
    })
  })

  it('lists webhook logs newest first', async () => {
    const { integrations, storage, agentId, clock } = await setup()
    const { id } = (await integrations.create(COMPANY, msgplatformInput(agentId)))._unsafeUnwrap()
    for (const [index, outcome] of (['queued', 'duplicate', 'rejected'] as const).entries()) {
      await storage.webhookLogs.add({
        id: `00000000-0000-4000-8000-00000000000${index}`,
        companyId: COMPANY,
        integrationId: id,
        receivedAt: new Date(clock.now().getTime() + index * 1000),
        httpStatus: outcome === 'rejected' ? 401 : 200,
        outcome,
      })
    }
    const first = (await integrations.webhookLogs(COMPANY, id, { limit: 2 }))._unsafeUnwrap()
    expect(first.items.map((log) => log.outcome)).toEqual(['rejected', 'duplicate'])
    const second = (
      await integrations.webhookLogs(COMPANY, id, { limit: 2, cursor: first.nextCursor! })
    )._unsafeUnwrap()
    expect(second.items.map((log) => log.outcome)).toEqual(['queued'])
    expect(second.nextCursor).toBeNull()
  })
})
