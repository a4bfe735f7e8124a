import type { EventEmitter } from 'eventemitter3'
import type { PriceTable } from '../billing/model-prices.js'
import type { Clock, IdGenerator } from '../ports/clock.js'
import type { Connector } from '../ports/connector.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import type { LlmProvider } from '../ports/llm-provider.js'
import type { Storage } from '../ports/storage.js'
import type { ToolRegistry } from '../tools/tool-registry.js'
import type { SwitchboardEvents } from './events.js'

export interface RuntimeLogger {
  warn(object: Record<string, unknown>, message: string): void
  error(object: Record<string, unknown>, message: string): void
}

/** The ports and settings the runtime's services share; built once by createSwitchboard. */
export interface RuntimeContext {
  readonly storage: Storage
  readonly model: LlmProvider
  readonly knowledge: KnowledgeIndex
  readonly tools: ToolRegistry
  readonly connectors: Map<string, Connector>
  readonly clock: Clock
  readonly ids: IdGenerator
  readonly events: EventEmitter<SwitchboardEvents>
  readonly logger: RuntimeLogger
  readonly leaseMs: number
  readonly prices: PriceTable
  /** When true, a company at or below 0 USD gets no model calls (CREDITS_EXHAUSTED). */
  readonly enforceCredits: boolean
}

/** Whether anyone listens, so hot paths skip building payloads nobody reads. */
export function listening(context: RuntimeContext, name: keyof SwitchboardEvents): boolean {
  return context.events.listenerCount(name) > 0
}

export function emitSafely<Name extends keyof SwitchboardEvents>(
  context: RuntimeContext,
  name: Name,
  ...payload: SwitchboardEvents[Name]
): void {
  try {
    ;(context.events.emit as (event: Name, ...args: SwitchboardEvents[Name]) => boolean)(name, ...payload)
  } catch (error) {
    // An app's listener must not break the runtime's bookkeeping.
    context.logger.error({ event: name, error: String(error) }, 'event listener threw')
  }
}
