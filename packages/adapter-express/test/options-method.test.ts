import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createFixture, type Fixture, pathFor, ROUTES } from './support/route-table.js'
import { startTestServer, type TestServer } from './support/start-test-server.js'

let server: TestServer
let fixture: Fixture

beforeAll(async () => {
  server = await startTestServer()
  fixture = await createFixture(server)
})
afterAll(async () => {
  await server.close()
})

describe('OPTIONS, which no endpoint serves', () => {
  it('answers 404 in the contract error shape on every path, as any other method without a route', async () => {
    const paths = [
      ...new Set([
        ...ROUTES.map((route) => pathFor(route, fixture)),
        '/api/auth/login',
        '/api/health',
        `/api/webhook/msgplatform/${fixture.integrationId}`,
      ]),
    ]
    for (const path of paths) {
      for (const token of [undefined, fixture.company.jwt]) {
        const answer = await server.request('OPTIONS', path, { token })
        expect(answer.status, `OPTIONS ${path}`).toBe(404)
        expect(answer.headers.get('content-type'), `OPTIONS ${path}`).toMatch(/^application\/json/)
        expect(answer.body, `OPTIONS ${path}`).toEqual({
          error: { code: 'NOT_FOUND', message: expect.any(String) },
        })
      }
    }
  })
})
