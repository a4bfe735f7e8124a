import { randomBytes } from 'node:crypto'
import { createPgDb, type Db } from '@switchboard/adapter-postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type ServerProcess,
  startServerProcess,
} from '../../../examples/reference-server/test/support/server-process.js'
import { inSchema } from '../../../test-support/in-schema.js'
import { connectVisitor, type Visitor } from './support/visitor.js'

const connectionString = process.env.DATABASE_URL

async function call<T = Record<string, unknown>>(
  url: string,
  options: { method?: string; token?: string; body?: unknown } = {},
): Promise<{ status: number; body: T }> {
  const response = await fetch(url, {
    method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  })
  const text = await response.text()
  return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as T }
}

// Only a real server can be shared by processes; .ci/run sets DATABASE_URL whenever it can.
describe.runIf(connectionString !== undefined && connectionString !== '')(
  'webchat on two server processes sharing one PostgreSQL',
  () => {
    const schema = `switchboard_webchat_${randomBytes(6).toString('hex')}`
    let admin: Db
    const servers: ServerProcess[] = []
    const visitors: Visitor[] = []

    beforeAll(async () => {
      admin = createPgDb({ connectionString, max: 1 })
      await admin.query(`CREATE SCHEMA ${schema}`)
    })
    afterAll(async () => {
      await Promise.all(visitors.map((visitor) => visitor.close()))
      await Promise.all(servers.map((server) => server.stop()))
      await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      await admin?.close()
    })

    it('reaches the visitor on process A with what process B does', { timeout: 60_000 }, async () => {
      const environment = {
        DATABASE_URL: inSchema(connectionString!, schema),
        JWT_SECRET: randomBytes(32).toString('hex'),
        DATA_DIR: 'memory',
      }
      // One after the other, so the second finds the schema migrated.
      servers.push(startServerProcess(environment))
      const a = await servers[0]!.listening
      servers.push(startServerProcess(environment))
      const b = await servers[1]!.listening

      const owner = { email: 'owner@webchat-two.test', password: 'correct horse battery' }
      await call(`${a}/api/auth/register`, { body: { ...owner, companyName: 'Shop' } })
      const login = await call<{ session: { access_token: string } }>(`${b}/api/auth/login`, { body: owner })
      const token = login.body.session.access_token
      const agent = await call<{ id: number }>(`${a}/api/agents`, { token, body: { name: 'Concierge' } })
      // The offline model answers with the passage that shares a word with the message.
      await call(`${a}/api/agents/${agent.body.id}/knowledge`, {
        token,
        body: { title: 'Hours', content: 'Our shop opens at nine and closes at five.' },
      })
      const integration = await call<{ id: string }>(`${b}/api/integrations`, {
        token,
        body: { type: 'webchat', name: 'Widget', entryAgentId: agent.body.id },
      })
      const socketUrl = (base: string, visitorToken?: string) =>
        `${base.replace(/^http/, 'ws')}/api/webchat/${integration.body.id}` +
        (visitorToken === undefined ? '' : `?token=${encodeURIComponent(visitorToken)}`)

      const visitor = await connectVisitor(socketUrl(a))
      visitors.push(visitor)
      const session = await visitor.next('session', 10_000)
      // Answered by whichever process takes the job; it reaches the socket on A either way.
      visitor.send({ type: 'message', text: 'When does the shop open?', clientMessageId: 'm-1' })
      await visitor.next('ack', 10_000)
      expect(await visitor.next('message', 15_000)).toMatchObject({
        role: 'agent',
        text: 'Our shop opens at nine and closes at five.',
      })

      // What an operator does on B travels over PostgreSQL to the socket on A.
      const path = `${b}/api/sessions/${session.sessionId}`
      expect((await call(`${path}/pause`, { token, body: {} })).status).toBe(200)
      expect(await visitor.next('state', 10_000)).toEqual({ type: 'state', state: 'paused' })
      const sent = await call<{ id: string }>(`${path}/messages`, {
        token,
        body: { text: 'Ann here, from B.' },
      })
      expect(sent.status).toBe(201)
      expect(await visitor.next('message', 10_000)).toMatchObject({
        messageId: sent.body.id,
        role: 'operator',
        text: 'Ann here, from B.',
      })

      // The token A signed resumes the conversation on B, with its history.
      const onB = await connectVisitor(socketUrl(b, session.visitorToken as string))
      visitors.push(onB)
      expect(await onB.next('session', 10_000)).toMatchObject({
        sessionId: session.sessionId,
        state: 'paused',
      })
      onB.send({ type: 'history' })
      const history = await Promise.all([1, 2, 3].map(() => onB.next('message', 10_000)))
      expect(history.map((frame) => frame.role)).toEqual(['customer', 'agent', 'operator'])
    })
  },
)
