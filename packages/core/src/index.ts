export type { AccountSettings } from './accounts/account-settings.js'
export { DEFAULT_ACCOUNT_SETTINGS } from './accounts/account-settings.js'
export type {
  Accounts,
  CreateAccountsOptions,
  LoginResult,
  SessionTokens,
} from './accounts/create-accounts.js'
export { createAccounts } from './accounts/create-accounts.js'
export type { Principal } from './accounts/principal.js'
export { API_TOKEN_PREFIX } from './accounts/secret-tokens.js'
export { buildSystemPrompt } from './agent/build-prompt.js'
export { MAX_MODEL_CALLS_PER_MESSAGE } from './agent/run-turn.js'
export type { AgentService, AgentServiceOptions } from './agents/agent-service.js'
export { createAgentService } from './agents/agent-service.js'
export type { Billing, CreateBillingOptions } from './billing/create-billing.js'
export { createBilling } from './billing/create-billing.js'
export type { ModelPrice, PriceTable } from './billing/model-prices.js'
export {
  createPriceTable,
  DEFAULT_MODEL_PRICES,
  DEFAULT_UNKNOWN_MODEL_PRICE,
} from './billing/model-prices.js'
export {
  DEFAULT_PIPELINE_NAME,
  DEFAULT_PIPELINE_STAGES,
  FREE_CREDITS_USD,
} from './billing/new-company-defaults.js'
export type {
  Agent,
  AgentInput,
  AgentKind,
  AgentPatch,
  AgentUpdate,
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
} from './domain/agent.js'
export type { AgentPathEntry, AgentPathVia } from './domain/agent-path.js'
export type { ErrorCode, SessionErrorCode, SwitchboardError } from './domain/errors.js'
export {
  ConfigError,
  describeOptionValue,
  ERROR_CODES,
  missingMembers,
  SESSION_ERROR_CODES,
  switchboardError,
} from './domain/errors.js'
export { type FieldProblem, parseInput } from './domain/parse-input.js'
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
export { EXTERNAL_REFERENCE_MAX, PAUSE_REASON_MAX, RESUME_NOTE_MAX } from './domain/session.js'
export type { SessionCommand } from './domain/session-state-machine.js'
export { transition } from './domain/session-state-machine.js'
export type { JourneyStep, SharedContext } from './domain/shared-context.js'
export { storableText } from './domain/storable-text.js'
export type { WebhookOutcome } from './domain/webhook-log.js'
export {
  WEBHOOK_DELIVERIES_KEPT_MS,
  WEBHOOK_LOGS_KEPT_PER_INTEGRATION,
  WEBHOOK_OUTCOMES,
} from './domain/webhook-log.js'
export { MAX_HANDOFFS_PER_MESSAGE } from './handoff/decide-handoff.js'
export type { IntegrationInput, IntegrationPatchInput } from './integrations/integration-schemas.js'
export {
  integrationInputSchema,
  integrationPatchSchema,
  MIN_WEBHOOK_SECRET_LENGTH,
} from './integrations/integration-schemas.js'
export type {
  CreatedIntegration,
  IntegrationService,
  IntegrationServiceOptions,
  IntegrationView,
} from './integrations/integration-service.js'
export {
  createIntegrationService,
  integrationUrl,
  STATUS_HOOK_EVENTS,
} from './integrations/integration-service.js'
export type { KnowledgeDocumentView, KnowledgeService } from './knowledge/knowledge-service.js'
export { createKnowledgeService } from './knowledge/knowledge-service.js'
export { createMemoryKnowledgeIndex } from './knowledge/memory-knowledge-index.js'
export type { KnowledgeStatistics, WordMatch } from './knowledge/passage-relevance.js'
export { passageRelevance } from './knowledge/passage-relevance.js'
export { splitPassages } from './knowledge/split-passages.js'
export { contentWords, passageScore, sharedWords } from './knowledge/text-words.js'
export type { MemoryEventBusOptions } from './memory/memory-event-bus.js'
export { createMemoryEventBus } from './memory/memory-event-bus.js'
export { createMemoryStorage } from './memory/memory-storage.js'
export { isCursor } from './memory/paging.js'
export { MAX_TOKENS_PER_CALL } from './models/model-answer.js'
export { createOfflineProvider } from './offline/offline-provider.js'
export type { AccessTokenClaims, PasswordHasher, TokenSigner } from './ports/accounts.js'
export type { Clock, IdGenerator } from './ports/clock.js'
export type {
  Connector,
  HumanTransferOutcome,
  HumanTransferRequest,
  SendOutcome,
  StatusHooksOutcome,
  StatusHooksRequest,
} from './ports/connector.js'
export { supportsHumanTransfer, supportsStatusHooks } from './ports/connector.js'
export type { EventBus, SubscribeOptions } from './ports/event-bus.js'
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
  AgentLock,
  AgentRepository,
  ApiToken,
  ApiTokenRepository,
  BillingRepository,
  Company,
  CompanyRepository,
  HumanTransferRepository,
  Integration,
  IntegrationPatch,
  IntegrationRepository,
  JobLease,
  JobQueue,
  KnowledgeDocument,
  KnowledgeDocumentRepository,
  LeasableJob,
  LoginFailureRepository,
  MessageInsertOptions,
  MessageRepository,
  NewAgent,
  NewIntegration,
  NewJob,
  NewMessage,
  NewUsageRecord,
  NewWebhookLog,
  OutboxItem,
  OutboxRepository,
  Page,
  PageRequest,
  PendingHumanTransfer,
  Pipeline,
  PipelineRepository,
  PipelineStage,
  RefreshToken,
  RefreshTokenRepository,
  Repositories,
  SessionRepository,
  Storage,
  StorageKind,
  Transaction,
  UsageRecord,
  User,
  UserRepository,
  WebhookDeliveryRepository,
  WebhookLog,
  WebhookLogRepository,
} from './ports/storage.js'
export { SessionClosedError, TransactionConflictError } from './ports/storage.js'
export type {
  WebhookAnswer,
  WebhookReceiver,
  WebhookRefusal,
  WebhookRequest,
} from './ports/webhook-receiver.js'
export { ROUTE_DECISION_FORMAT } from './routing/classify.js'
export type { Switchboard, SwitchboardOptions } from './runtime/create-switchboard.js'
export { createSwitchboard } from './runtime/create-switchboard.js'
export type { SwitchboardEventName, SwitchboardEvents } from './runtime/events.js'
export type { InboundMessage, IngestDecision, IngestOptions, IngestResult } from './runtime/ingest.js'
export type { CustomerAddress } from './runtime/open-session.js'
export type { RuntimeLogger } from './runtime/runtime-context.js'
export type { SessionOperations, WebhookDeliveryKey } from './runtime/session-operations.js'
export { createRandomIds, createSystemClock } from './runtime/system-clock.js'
export type { PreparedTool, Tool, ToolContext, ToolParameters } from './tools/tool.js'
export { defineTool } from './tools/tool.js'
export type { VerifyWebhookSignatureOptions } from './webhooks/verify-signature.js'
export { signWebhookBody, verifyWebhookSignature } from './webhooks/verify-signature.js'
