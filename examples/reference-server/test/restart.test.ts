import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type FakePlatform, startFakePlatform } from './support/fake-platform.js'
import { call, sendWebhook, setUpTenant } from './support/http-client.js'
import { type ServerProcess, startServerProcess } from './support/server-process.js'

interface SessionView {
  id: string
  state: string
  customer: { clientId: string }
}
interface MessageView {
  role: string
  text: string
  delivery?: string
}

const OWNER = { email: 'owner@restart.test', password: 'correct horse battery' }
const OPENING_HOURS = 'Opening hours are 9 to 5 on weekdays.'
const DELIVERY = 'Delivery takes three working days.'

describe('the reference server on PGlite, stopped and started again on the same DATA_DIR', () => {
  let dataDir: string
  let platform: FakePlatform
  const processes: ServerProcess[] = []

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'switchboard-restart-'))
    platform = await startFakePlatform()
  })

  afterAll(async () => {
    for (const server of processes) server.child.kill('SIGKILL')
    await platform?.close()
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true })
  })

  const start = async () => {
    const server = startServerProcess({ DATA_DIR: dataDir })
    processes.push(server)
    return { server, url: await server.listening }
  }

  it('keeps the account, the agent, the session and its messages', async () => {
    const first = await start()
    expect(await call(`${first.url}/api/health`)).toEqual({
      status: 200,
      body: { ok: true, storage: 'pglite' },
    })
    const tenant = await setUpTenant(first.url, {
      ...OWNER,
      knowledge: `${OPENING_HOURS}\n\n${DELIVERY}`,
      platformUrl: platform.url,
    })
    const customer = { clientId: 'customer-1' }
    // The platform is the file's: the other test may have run first (--sequence.shuffle).
    const repliesBefore = platform.replies.length
    expect(
      await sendWebhook(first.url, tenant, {
        ...customer,
        text: 'What are your opening hours?',
        messageId: 'm-1',
      }),
    ).toEqual({ status: 200, body: { ok: true } })
    await platform.waitForReplies(repliesBefore + 1)
    expect(await first.server.stop()).toBe(0)

    const second = await start()
    expect(await call(`${second.url}/api/health`)).toEqual({
      status: 200,
      body: { ok: true, storage: 'pglite' },
    })
    const login = await call<{ session: { access_token: string } }>(`${second.url}/api/auth/login`, {
      body: OWNER,
    })
    expect(login.status).toBe(200)
    // The token issued before the restart still works: the JWT secret was kept too.
    for (const token of [tenant.token, login.body.session.access_token]) {
      const agents = await call<{ agents: { id: number; name: string }[] }>(`${second.url}/api/agents`, {
        token,
      })
      expect(agents.status).toBe(200)
      expect(agents.body.agents.map((agent) => [agent.id, agent.name])).toEqual([[tenant.agentId, 'Support']])
    }
    const token = login.body.session.access_token

    const sessions = await call<{ sessions: SessionView[] }>(`${second.url}/api/sessions`, { token })
    expect(sessions.body.sessions).toHaveLength(1)
    const session = sessions.body.sessions[0]!
    expect(session).toMatchObject({ state: 'ongoing', customer: { clientId: 'customer-1' } })
    const messagesOf = async () =>
      (
        await call<{ messages: MessageView[] }>(`${second.url}/api/sessions/${session.id}/messages`, {
          token,
        })
      ).body.messages
    expect((await messagesOf()).map(({ role, text, delivery }) => ({ role, text, delivery }))).toEqual([
      { role: 'customer', text: 'What are your opening hours?', delivery: undefined },
      { role: 'agent', text: OPENING_HOURS, delivery: 'sent' },
    ])

    // The platform retrying a message from before the restart is recognised; the customer's next
    // message continues the same session.
    expect(
      await sendWebhook(second.url, tenant, {
        ...customer,
        text: 'What are your opening hours?',
        messageId: 'm-1',
      }),
    ).toEqual({ status: 200, body: { ok: true, duplicate: true } })
    expect(
      await sendWebhook(second.url, tenant, {
        ...customer,
        text: 'How long does delivery take?',
        messageId: 'm-2',
      }),
    ).toEqual({ status: 200, body: { ok: true } })
    await platform.waitForReplies(repliesBefore + 2)
    expect((await messagesOf()).map((message) => message.text)).toEqual([
      'What are your opening hours?',
      OPENING_HOURS,
      'How long does delivery take?',
      DELIVERY,
    ])
    expect(platform.replies.slice(repliesBefore)).toEqual([
      { clientId: 'customer-1', text: OPENING_HOURS },
      { clientId: 'customer-1', text: DELIVERY },
    ])
    expect(await second.server.stop()).toBe(0)
  }, 90_000)

  // JSON may carry U+0000 and lone surrogates, which PostgreSQL text cannot hold as they are.
  it('stores every message whose ids hold text PostgreSQL cannot keep, and answers the customer as addressed', async () => {
    const { server, url } = await start()
    const tenant = await setUpTenant(url, {
      email: 'owner@awkward-ids.test',
      password: OWNER.password,
      knowledge: OPENING_HOURS,
      platformUrl: platform.url,
    })
    const repliesBefore = platform.replies.length
    const sent = [
      { clientId: 'client-\uD800', messageId: 'K\u0000' },
      { clientId: 'client-\uD800', messageId: 'K\uFFFD' },
      { clientId: 'client-\uFFFD', messageId: 'K\uDC00' },
    ]
    for (const { clientId, messageId } of sent) {
      expect(
        await sendWebhook(url, tenant, { clientId, text: 'What are your opening hours?', messageId }),
      ).toEqual({ status: 200, body: { ok: true } })
    }
    // The platform retrying the first is still recognised.
    expect(await sendWebhook(url, tenant, { ...sent[0]!, text: 'What are your opening hours?' })).toEqual({
      status: 200,
      body: { ok: true, duplicate: true },
    })

    const replies = (await platform.waitForReplies(repliesBefore + 3)).slice(repliesBefore)
    expect(replies.map((reply) => reply.clientId).sort()).toEqual(
      ['client-\uD800', 'client-\uD800', 'client-\uFFFD'].sort(),
    )
    const sessions = await call<{ sessions: SessionView[] }>(`${url}/api/sessions`, { token: tenant.token })
    expect(sessions.body.sessions.map((session) => session.customer.clientId).sort()).toEqual(
      ['client-\uD800', 'client-\uFFFD'].sort(),
    )
    expect(await server.stop()).toBe(0)
  }, 60_000)
})
