import { ConfigError, describeOptionValue as describeValue, missingMembers } from '@switchboard/core'

/**
 * The options `factory` cannot start without. A missing eventBus otherwise surfaced only once a
 * visitor wrote, as a socket closed with 1011 and no message; a missing server as "Cannot read
 * properties of undefined (reading 'on')", after the connector was registered.
 */
export function checkWebchatOptions(
  factory: 'createWebchatServer' | 'createWebchatConnector',
  options: unknown,
): void {
  const names =
    factory === 'createWebchatServer' ? 'switchboard, eventBus and server' : 'switchboard and eventBus'
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError(`${factory} needs an options object with ${names}, got ${describeValue(options)}`)
  }
  const { switchboard, eventBus, server } = options as Record<string, unknown>
  const notSwitchboard = missingMembers(switchboard, ['registerConnector', 'ingest', 'openSession'])
  if (notSwitchboard !== null) {
    throw new ConfigError(
      `${factory}: switchboard must be a Switchboard (from createSwitchboard()), got ${notSwitchboard}`,
    )
  }
  const notEventBus = missingMembers(eventBus, ['publish', 'subscribe'])
  if (notEventBus !== null) {
    throw new ConfigError(
      `${factory}: eventBus must be an EventBus (createMemoryEventBus(), createPostgresEventBus()), got ${notEventBus}`,
    )
  }
  // An object, not merely something with `on`: an Express app has `on` too, but is a function
  // that never hears an upgrade.
  const notServer =
    factory === 'createWebchatServer' ? missingMembers(server, ['on', 'off', 'listenerCount']) : null
  if (notServer !== null) {
    throw new ConfigError(
      `${factory}: server must be a Node HTTP or HTTPS server (what app.listen() or http.createServer() returns), got ${notServer}`,
    )
  }
}
