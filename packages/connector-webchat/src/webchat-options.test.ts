import { createServer } from 'node:http'
import {
  ConfigError,
  createMemoryEventBus,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
  type Switchboard,
} from '@switchboard/core'
import { afterEach, describe, expect, it } from 'vitest'
import { createWebchatConnector, type WebchatConnectorOptions } from './webchat-connector.js'
import { createWebchatServer, type WebchatServerOptions } from './webchat-server.js'

let switchboard: Switchboard
afterEach(() => switchboard.stop())

function ports() {
  switchboard = createSwitchboard({
    storage: createMemoryStorage(),
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
  })
  return { switchboard, eventBus: createMemoryEventBus(), server: createServer() }
}

/** What a caller from plain JavaScript may pass, whatever the types say. */
const server = (options: unknown) => () => createWebchatServer(options as WebchatServerOptions)
const connector = (options: unknown) => () => createWebchatConnector(options as WebchatConnectorOptions)

describe('the webchat channel, given options it cannot work with', () => {
  it('createWebchatServer names a missing switchboard, eventBus or server', () => {
    const valid = ports()
    expect(server({ ...valid, server: undefined })).toThrow(ConfigError)
    expect(server({ ...valid, server: undefined })).toThrow(
      'createWebchatServer: server must be a Node HTTP or HTTPS server (what app.listen() or http.createServer() returns), got undefined',
    )
    // An Express app is a function with `on` too, and never hears an upgrade.
    expect(server({ ...valid, server: () => undefined })).toThrow(
      /server must be a Node HTTP .*, got a function/,
    )
    expect(server({ ...valid, eventBus: undefined })).toThrow(
      'createWebchatServer: eventBus must be an EventBus (createMemoryEventBus(), createPostgresEventBus()), got undefined',
    )
    expect(server({ ...valid, switchboard: undefined })).toThrow(
      'createWebchatServer: switchboard must be a Switchboard (from createSwitchboard()), got undefined',
    )
    expect(server(undefined)).toThrow(
      'createWebchatServer needs an options object with switchboard, eventBus and server, got undefined',
    )
    // Refused before anything is registered or listened to.
    expect(valid.switchboard.connector('webchat')).toBeUndefined()
  })

  it('createWebchatConnector names a missing switchboard or eventBus', () => {
    const valid = ports()
    expect(connector({ switchboard: valid.switchboard })).toThrow(
      'createWebchatConnector: eventBus must be an EventBus (createMemoryEventBus(), createPostgresEventBus()), got undefined',
    )
    expect(connector({ eventBus: valid.eventBus, switchboard: {} })).toThrow(
      /createWebchatConnector: switchboard must be a Switchboard .*, got an object/,
    )
  })
})
