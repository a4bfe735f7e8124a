import { ERROR_CODES, type ErrorCode } from '@switchboard/core'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ERROR_STATUS } from '../src/index.js'
import { createFixture, type Fixture, pathFor, ROUTES, type RouteCase } from './support/route-table.js'
import { type HttpAnswer, startTestServer, type TestServer } from './support/start-test-server.js'

let server: TestServer
let own: Fixture

beforeAll(async () => {
  server = await startTestServer()
  own = await createFixture(server, 'Fuzzed')
})
afterAll(async () => {
  await server.close()
})

// Modest by default so the file runs in seconds; FUZZ_RUNS=1000 for a long hunt.
const RUNS = Number(process.env.FUZZ_RUNS ?? 40)

/** Every answer of the API: never a 500, and every error in the contract's shape with its status. */
function expectWellFormed(answer: HttpAnswer, what: string): void {
  expect(answer.status, `${what} → ${answer.status} ${answer.text.slice(0, 300)}`).toBeLessThan(500)
  if (answer.status < 400) return
  const body = answer.body as { error?: { code?: unknown; message?: unknown } }
  expect(Object.keys(body), what).toEqual(['error'])
  expect(body.error, what).toEqual(
    expect.objectContaining({ code: expect.any(String), message: expect.any(String) }),
  )
  const code = body.error?.code as ErrorCode
  expect(ERROR_CODES, what).toContain(code)
  expect(ERROR_STATUS[code], what).toBe(answer.status)
  expect(answer.text, what).not.toMatch(/\n\s+at |node_modules|\.ts:\d+/)
}

/** Strings that stress parsers: empty, unicode of every plane, lone surrogates, very long. */
const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\ud800',
    '🦄'.repeat(3),
    'null',
    '1e309',
    '-0',
    '__proto__',
    'constructor',
  ),
  fc
    .tuple(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 2 }), fc.integer({ min: 500, max: 30_000 }))
    .map(([unit, times]) => unit.repeat(times)),
)

const nastyNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -1, 1.5, 2 ** 31, 2 ** 53, Number.MAX_SAFE_INTEGER, -Number.MAX_VALUE),
)

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  nastyString,
  nastyNumber,
  fc.boolean(),
  fc.constant(null),
  fc.jsonValue({ maxDepth: 4 }),
  fc.array(nastyString, { maxLength: 5 }),
)

/** JSON text that JSON.stringify of a generated value would not produce. */
const nastyRawBody = fc.oneof(
  fc.integer({ min: 1, max: 20_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  fc.integer({ min: 1, max: 5000 }).map((depth) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)),
  fc.string(),
  fc.constantFrom(
    '',
    '{',
    '{"text":',
    'undefined',
    'NaN',
    '{"a":1,}',
    "{'a':1}",
    '\u0000',
    '[]',
    'null',
    '"str"',
    '7',
  ),
  fc.constant(`{"text":"${'x'.repeat(1024 * 1024 + 1)}"}`),
)

/** Bodies with the route's own field names (and `companyId`) holding values of every wrong kind. */
const bodyFor = (route: RouteCase): fc.Arbitrary<{ json?: unknown; raw?: string }> =>
  fc.oneof(
    fc
      .dictionary(fc.constantFrom(...(route.fields ?? []), 'companyId', 'id', 'extra'), nastyValue, {
        maxKeys: 6,
      })
      .map((json) => ({ json })),
    nastyValue.map((json) => ({ json })),
    nastyRawBody.map((raw) => ({ raw })),
  )

/**
 * Path segments that are anything but a valid id of the caller. Dot segments are left out: the
 * URL parser resolves `/agents/..` before any request is sent, so they name another path.
 */
const malformedId = fc
  .oneof(
    fc.string({ minLength: 1 }).map(encodeURIComponent),
    fc.string({ unit: 'binary', minLength: 1 }).map(encodeURIComponent),
    fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
    fc.uuid().map((uuid) => uuid.toUpperCase()),
    fc.constantFrom(
      '0',
      '-1',
      '1.5',
      '1e3',
      '0x10',
      '%00',
      'null',
      'undefined',
      '%E2%80%AE',
      '..%2F..',
      '%25',
    ),
  )
  .filter((id) => id !== '.' && id !== '..')
  // Small numbers may be real ids of the fuzzed company (the body fuzzing creates agents too).
  .filter((id) => !/^[1-9][0-9]{0,5}$/.test(id))

/** Query strings of the known parameters and others, with repeated keys and odd values. */
const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(
        fc.constantFrom('limit', 'cursor', 'state', 'integrationId', 'companyId'),
        fc.string({ maxLength: 10 }),
      ),
      fc.oneof(
        fc.constantFrom(
          '',
          '0',
          '1',
          '50',
          '100',
          '101',
          '-5',
          '2.5',
          'NaN',
          'paused',
          'ongoing',
          '[]',
          '{}',
        ),
        fc.string({ maxLength: 40 }),
        fc.string({ unit: 'binary', maxLength: 40 }),
      ),
    ),
    { maxLength: 6 },
  )
  .map((pairs) => new URLSearchParams(pairs).toString())

const send = (route: RouteCase, path: string, body: { json?: unknown; raw?: string }) =>
  server.request(route.method, path, {
    token: own.company.jwt,
    ...(body.raw === undefined ? { body: body.json } : { rawBody: body.raw }),
  })

const withBody = ROUTES.filter((route) => route.fields !== undefined)
const withPathId = ROUTES.filter((route) => route.path.includes('/:'))
const readable = ROUTES.filter((route) => route.method === 'GET')

describe('fuzzing the JSON endpoints', () => {
  for (const route of withBody) {
    it(`${route.method} ${route.path}: any body`, async () => {
      await fc.assert(
        fc.asyncProperty(bodyFor(route), async (body) => {
          expectWellFormed(await send(route, pathFor(route, own), body), `${route.method} ${route.path}`)
        }),
        { numRuns: RUNS },
      )
    })
  }

  for (const route of withPathId) {
    it(`${route.method} ${route.path}: malformed ids answer 404`, async () => {
      await fc.assert(
        fc.asyncProperty(malformedId, async (id) => {
          const path = route.path.replace(/:[a-zA-Z]+/, id)
          const answer = await send(route, path, { json: route.body?.(own) })
          expectWellFormed(answer, `${route.method} ${path}`)
          expect(answer.status, `${route.method} ${path}`).toBe(404)
        }),
        { numRuns: RUNS },
      )
    })
  }

  for (const route of readable) {
    it(`${route.method} ${route.path}: any query string`, async () => {
      await fc.assert(
        fc.asyncProperty(queryString, async (query) => {
          const path = `${pathFor(route, own)}?${query}`
          expectWellFormed(await send(route, path, {}), `GET ${path}`)
        }),
        { numRuns: RUNS },
      )
    })
  }

  it('answers arbitrary bearer headers with 401, never 500', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'grapheme' }).map((text) => `Bearer ${text}`),
        ),
        async (header) => {
          // fetch refuses header values with control characters or code points above 255.
          const value = header.replace(/[^\u0020-\u007e]/g, '')
          const answer = await server.request('GET', '/api/agents', { headers: { authorization: value } })
          expectWellFormed(answer, `Authorization: ${value}`)
          expect(answer.status).toBe(401)
        },
      ),
      { numRuns: RUNS },
    )
  })

  it('still answers the health check afterwards, and the fuzzed company still works', async () => {
    await server.switchboard.idle()
    const health = await server.request('GET', '/api/health')
    expect(health.status).toBe(200)
    expect(health.body).toEqual({ ok: true, storage: 'memory' })
    const agents = await server.request('GET', '/api/agents', { token: own.company.jwt })
    expect(agents.status).toBe(200)
  })
})
