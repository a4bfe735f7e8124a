import { ConfigError, describeOptionValue as describeValue, hasMethods } from '@switchboard/core'

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
  if (!hasMethods(switchboard, ['registerConnector', 'ingest', 'openSession'])) {
    throw new ConfigError(
      `${factory}: switchboard must be a Switchboard (from createSwitchboard()), got ${describeValue(switchboard)}`,
    )
  }
  if (!hasMethods(eventBus, ['publish', 'subscribe'])) {
    throw new ConfigError(
      `${factory}: eventBus must be an EventBus (createMemoryEventBus(), createPostgresEventBus()), got ${describeValue(eventBus)}`,
    )
  }
  // An object, not merely something with `on`: an Express app has `on` too, but is a function
  // that never hears an upgrade.
  if (factory === 'createWebchatServer' && !hasMethods(server, ['on', 'off', 'listenerCount'])) {
    throw new ConfigError(
      `${factory}: server must be a Node HTTP or HTTPS server (what app.listen() or http.createServer() returns), got ${describeValue(server)}`,
    )
  }
}
