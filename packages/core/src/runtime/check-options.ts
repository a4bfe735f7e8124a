import {
  ConfigError,
  describeOptionValue as describeValue,
  isObject,
  missingMembers as missing,
} from '../domain/errors.js'
import type { Connector } from '../ports/connector.js'
import type { Repositories } from '../ports/storage.js'
import type { SwitchboardOptions } from './create-switchboard.js'

// A Record over the keys, so a repository added to the port fails the build until listed here.
const REPOSITORIES: Readonly<Record<keyof Repositories, true>> = {
  agents: true,
  integrations: true,
  sessions: true,
  messages: true,
  outbox: true,
  humanTransfers: true,
  jobs: true,
  companies: true,
  users: true,
  refreshTokens: true,
  apiTokens: true,
  billing: true,
  pipelines: true,
  loginFailures: true,
  webhookLogs: true,
  webhookDeliveries: true,
  knowledgeDocuments: true,
}

/**
 * Called from plain JavaScript, a missing port surfaced much later as "Cannot read properties of
 * undefined" deep in a turn, or not at all: a missing model only left every customer the fallback
 * reply. Checked here, it fails at start with what to fix.
 */
export function checkSwitchboardOptions(options: SwitchboardOptions): void {
  if (!isObject(options)) {
    throw new ConfigError(
      `createSwitchboard needs an options object with storage, model and knowledge, got ${describeValue(options)}`,
    )
  }
  const storage = missing(options.storage, ['transaction'], Object.keys(REPOSITORIES))
  if (storage !== null) {
    throw new ConfigError(
      `createSwitchboard: storage must be a Storage (createMemoryStorage(), createPostgresStorage()), got ${storage}`,
    )
  }
  const model = missing(options.model, ['complete'])
  if (model !== null) {
    throw new ConfigError(
      `createSwitchboard: model must be an LlmProvider with a complete() method (createOpenAiProvider(), createOfflineProvider()), got ${model}`,
    )
  }
  const knowledge = missing(options.knowledge, ['add', 'remove', 'search'])
  if (knowledge !== null) {
    throw new ConfigError(
      `createSwitchboard: knowledge must be a KnowledgeIndex (createMemoryKnowledgeIndex(), createPostgresKnowledgeIndex()), got ${knowledge}`,
    )
  }
  const { concurrency, leaseMs, pollMs } = options
  if (concurrency !== undefined && !(Number.isSafeInteger(concurrency) && concurrency >= 0)) {
    throw new ConfigError(
      `createSwitchboard: concurrency must be a whole number of 0 or more (0 only ingests), got ${describeValue(concurrency)}`,
    )
  }
  for (const [name, value] of [
    ['leaseMs', leaseMs],
    ['pollMs', pollMs],
  ] as const) {
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
      throw new ConfigError(
        `createSwitchboard: ${name} must be a positive whole number of milliseconds, got ${describeValue(value)}`,
      )
    }
  }
  if (options.connectors !== undefined && !Array.isArray(options.connectors)) {
    throw new ConfigError(
      `createSwitchboard: connectors must be an array of connectors, got ${describeValue(options.connectors)}`,
    )
  }
}

/**
 * Before `connector` joins `registered`: replies go to the connector of their integration's type,
 * so one without a type would never be used, and a second of one type would silently replace the
 * first. The same connector again is no second one.
 */
export function checkConnector(connector: Connector, registered: ReadonlyMap<string, Connector>): void {
  if (!isObject(connector)) {
    throw new ConfigError(
      `a connector must be an object with a type and send(), got ${describeValue(connector)}`,
    )
  }
  const { type } = connector
  if (typeof type !== 'string' || type.trim() === '') {
    throw new ConfigError(
      `a connector type must be a non-empty string (the type of the integrations it serves), got ${describeValue(type)}`,
    )
  }
  if (typeof connector.send !== 'function') {
    throw new ConfigError(`connector "${type}" must have a send() method`)
  }
  const existing = registered.get(type)
  if (existing !== undefined && existing !== connector) {
    throw new ConfigError(
      `two connectors of type "${type}": replies to a "${type}" integration can go through one only`,
    )
  }
}
