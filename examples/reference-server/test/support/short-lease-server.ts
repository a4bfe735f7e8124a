import { createMsgPlatformConnector } from '@switchboard/connector-msgplatform'
import { readConfig } from '../../src/config.js'
import { startReferenceServer } from '../../src/start-reference-server.js'

/*
 * The reference server as `src/main.ts` starts it, for tests that kill processes: a job of a
 * process that died is taken again after LEASE_MS rather than the default 55 s, and every request
 * to the platform says which process sent it (`x-sender-pid`), so a reply the platform got twice
 * can be traced to a process that died before recording the first.
 */

const leaseMs = Number(process.env.LEASE_MS)
if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0) {
  process.stderr.write(
    `short-lease-server: LEASE_MS must be a positive whole number, got ${process.env.LEASE_MS}\n`,
  )
  process.exit(1)
}

const sender = String(process.pid)
const taggedFetch: typeof fetch = (input, init) => {
  const headers = new Headers(init?.headers)
  headers.set('x-sender-pid', sender)
  return fetch(input, { ...init, headers })
}

const service = await startReferenceServer(readConfig(process.env), {
  leaseMs,
  connectors: [createMsgPlatformConnector({ fetch: taggedFetch })],
})
const stop = () => {
  service.close().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`short-lease-server: shutdown failed: ${String(error)}\n`)
      process.exit(1)
    },
  )
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
process.stdout.write(`listening on ${service.url}\n`)
