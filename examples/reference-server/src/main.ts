import { ConfigError } from '@switchboard/core'
import { readConfig } from './config.js'
import { startReferenceServer } from './start-reference-server.js'

const EXIT_DEADLINE_MS = 15_000

async function main(): Promise<void> {
  const config = readConfig(process.env)
  const service = await startReferenceServer(config)
  let stopping = false
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    service.logger.info({ signal }, 'shutting down')
    setTimeout(() => {
      service.logger.error('shutdown took too long; exiting')
      process.exit(1)
    }, EXIT_DEADLINE_MS).unref()
    service.close().then(
      () => process.exit(0),
      (error: unknown) => {
        service.logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // The one line a supervisor (or a person) waits for, whatever LOG_LEVEL says; after the signal
  // handlers, so a SIGTERM sent the moment it is read still drains and exits 0.
  process.stdout.write(`listening on ${service.url}\n`)
}

main().catch((error: unknown) => {
  if (ConfigError.isInstance(error) || error instanceof Error) {
    process.stderr.write(`switchboard: ${error.message}\n`)
  } else {
    process.stderr.write(`switchboard: ${String(error)}\n`)
  }
  process.exit(1)
})
