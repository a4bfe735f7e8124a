export type {
  MsgPlatformConnector,
  MsgPlatformConnectorOptions,
} from './create-msgplatform-connector.js'
export { createMsgPlatformConnector } from './create-msgplatform-connector.js'
export type { MsgPlatformWebhookHandlerOptions } from './create-webhook-handler.js'
export { createMsgPlatformWebhookHandler } from './create-webhook-handler.js'
export type { MsgPlatformWebhook, StatusHookType } from './parse-webhook.js'
export { parseMsgPlatformWebhook, readMsgPlatformPayload, STATUS_HOOK_TYPES } from './parse-webhook.js'
export type { PlatformConfig } from './platform-config.js'
export { MSGPLATFORM_TYPE } from './platform-config.js'
