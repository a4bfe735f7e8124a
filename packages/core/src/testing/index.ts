export { signWebhookBody } from '../webhooks/verify-signature.js'
export type { EventBusConformanceOptions } from './conformance/event-bus-conformance.js'
export { runEventBusConformance } from './conformance/event-bus-conformance.js'
export { runJobQueueConformance } from './conformance/job-queue-conformance.js'
export { runKnowledgeIndexConformance } from './conformance/knowledge-index-conformance.js'
export { runStorageConformance } from './conformance/storage-conformance.js'
export type { StorageConformanceOptions } from './conformance/storage-fixtures.js'
export type {
  ConversationHarness,
  ConversationHarnessOptions,
  HarnessAgent,
  HarnessCustomer,
} from './conversation-harness.js'
export { createConversationHarness } from './conversation-harness.js'
export { createFakePasswordHasher } from './fake-password-hasher.js'
export { createFakeTokenSigner } from './fake-token-signer.js'
export type { ManualClock } from './manual-clock.js'
export { createManualClock } from './manual-clock.js'
export type {
  RecordedStatusHooks,
  RecordedTransfer,
  RecordingConnector,
  SentMessage,
} from './recording-connector.js'
export { createRecordingConnector } from './recording-connector.js'
export type { RecordedRequest, ScriptedModel, ScriptedStep } from './scripted-model.js'
export {
  createScriptedModel,
  fail,
  handoff,
  rawRoute,
  reply,
  route,
  toolCall,
  toolCalls,
} from './scripted-model.js'
export type { SeededChannel } from './seed-channel.js'
export { seedChannel } from './seed-channel.js'
