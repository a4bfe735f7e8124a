export type {
  AckFrame,
  ClientFrame,
  ErrorFrame,
  MessageFrame,
  ServerFrame,
  SessionFrame,
  StateFrame,
  TypingFrame,
} from './frames.js'
export { MAX_FRAME_BYTES, MAX_MESSAGE_CHARACTERS } from './frames.js'
export type { WebchatAssets } from './webchat-assets.js'
export { webchatAssets } from './webchat-assets.js'
export type { WebchatConnector, WebchatConnectorOptions } from './webchat-connector.js'
export { createWebchatConnector, WEBCHAT_TYPE } from './webchat-connector.js'
export type { WebchatServer, WebchatServerOptions } from './webchat-server.js'
export { createWebchatServer } from './webchat-server.js'
