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
