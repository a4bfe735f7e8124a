export { buildSystemPrompt } from './agent/build-prompt.js'
export { MAX_MODEL_CALLS_PER_MESSAGE } from './agent/run-turn.js'
export type {
  Agent,
  AgentInput,
  AgentKind,
  AgentPatch,
  HandoffConfig,
  Route,
  RoutingConfig,
} from './domain/agent.js'
export {
  agentInputSchema,
  agentPatchSchema,
  DEFAULT_FALLBACK_REPLY,
  handoffConfigSchema,
  MAX_ROUTING_DEPTH,
  routingConfigSchema,
  routingDepthCap,
} from './domain/agent.js'
export type { AgentPathEntry, AgentPathVia } from './domain/agent-path.js'
export type { ErrorCode, SessionErrorCode, SwitchboardError } from './domain/errors.js'
export { ConfigError, ERROR_CODES, SESSION_ERROR_CODES, switchboardError } from './domain/errors.js'
export type {
  Customer,
  Delivery,
  Message,
  MessageRole,
  PauseState,
  RoutingOutcome,
  RoutingReason,
  Session,
  SessionErrorRecord,
  SessionMetadata,
  SessionState,
} from './domain/session.js'
export type { SessionCommand } from './domain/session-state-machine.js'
export { transition } from './domain/session-state-machine.js'
export type { JourneyStep, SharedContext } from './domain/shared-context.js'
export { MAX_HANDOFFS_PER_MESSAGE } from './handoff/decide-handoff.js'
export { createMemoryKnowledgeIndex } from './knowledge/memory-knowledge-index.js'
export { splitPassages } from './knowledge/split-passages.js'
export { contentWords } from './knowledge/text-words.js'
export type { MemoryEventBusOptions } from './memory/memory-event-bus.js'
export { createMemoryEventBus } from './memory/memory-event-bus.js'
export { createMemoryStorage } from './memory/memory-storage.js'
export { createOfflineProvider } from './offline/offline-provider.js'
export type { Clock, IdGenerator } from './ports/clock.js'
export type { Connector, HumanTransferOutcome, HumanTransferRequest, SendOutcome } from './ports/connector.js'
export { supportsHumanTransfer } from './ports/connector.js'
export type { EventBus } from './ports/event-bus.js'
export type { KnowledgeDocumentInput, KnowledgeIndex } from './ports/knowledge-index.js'
export type {
  Classification,
  ClassifyRequest,
  Completion,
  CompletionRequest,
  KnowledgePassage,
  LlmProvider,
  ModelMessage,
  ResponseFormat,
  TokenUsage,
  ToolCall,
  ToolDefinition,
} from './ports/llm-provider.js'
export { supportsClassify } from './ports/llm-provider.js'
export type {
  AgentRepository,
  Integration,
  IntegrationPatch,
  IntegrationRepository,
  JobLease,
  JobQueue,
  MessageRepository,
  NewAgent,
  NewIntegration,
  NewMessage,
  OutboxItem,
  OutboxRepository,
  Page,
  PageRequest,
  Repositories,
  SessionRepository,
  Storage,
  StorageKind,
} from './ports/storage.js'
export { ROUTE_DECISION_FORMAT } from './routing/classify.js'
export type { Switchboard, SwitchboardOptions } from './runtime/create-switchboard.js'
export { createSwitchboard } from './runtime/create-switchboard.js'
export type { SwitchboardEventName, SwitchboardEvents } from './runtime/events.js'
export type { InboundMessage, IngestResult } from './runtime/ingest.js'
export type { RuntimeLogger } from './runtime/runtime-context.js'
export type { SessionOperations } from './runtime/session-operations.js'
export { createRandomIds, createSystemClock } from './runtime/system-clock.js'
export type { PreparedTool, Tool, ToolContext } from './tools/tool.js'
export { defineTool } from './tools/tool.js'
export type { VerifyWebhookSignatureOptions } from './webhooks/verify-signature.js'
export { signWebhookBody, verifyWebhookSignature } from './webhooks/verify-signature.js'
