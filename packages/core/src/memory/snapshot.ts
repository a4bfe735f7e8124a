import type { AgentPathEntry } from '../domain/agent-path.js'
import type { Customer, PauseState, RoutingOutcome, Session, SessionMetadata } from '../domain/session.js'
import type { SharedContext } from '../domain/shared-context.js'
import { storableText } from '../domain/storable-text.js'

/**
 * A deep, frozen copy of plain data, without the keys whose value is undefined (as a database
 * round trip would drop them). Stored records are snapshots, so neither the caller who wrote one
 * nor a caller who read one can change what is stored.
 *
 * Strings, and the keys of objects, are stored as PostgreSQL stores them: with U+FFFD in place of
 * each U+0000 and lone surrogate (`storableText`), which its text and JSON columns cannot hold. So
 * a fact, a journey step or a pause reason reads back alike on every storage; two keys that differ
 * only in such characters become one, the later value kept where the first key stood. Keys that
 * must stay exact (a customer's ids) are kept by the repositories apart from snapshots.
 *
 * `previous` is the stored snapshot that `value` replaces. A caller usually builds the new record
 * from it, carrying most parts over: a part that is the very object found at the same place in
 * `previous` is already a frozen copy of our own, so it is kept as it is instead of copied again.
 */
export function snapshot<T>(value: T, previous?: T): T {
  return copy(value, previous) as T
}

/**
 * `snapshot` of a session stored as `version`, with its fields spelled out: every turn stores a
 * session or two, and a literal of known shape costs a fraction of the generic copy, or of the
 * spread a caller would otherwise make to set the version. Only the session's fields are kept.
 */
export function snapshotSession(
  session: Omit<Session, 'version'>,
  version: number,
  previous?: Session,
): Session {
  const customer = exactCustomer(session.customer, previous?.customer)
  const metadata = snapshotMetadata(session.metadata, previous?.metadata)
  const row: { -readonly [Key in keyof Session]: Session[Key] } = {
    id: session.id,
    companyId: session.companyId,
    integrationId: session.integrationId,
    customer,
    state: session.state,
    activeAgentId: session.activeAgentId,
    entryAgentId: session.entryAgentId,
    metadata,
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    version,
  }
  if (session.pauseState !== undefined) {
    row.pauseState = copy(session.pauseState, previous?.pauseState) as PauseState
  }
  return Object.freeze(row)
}

/**
 * The metadata of a session, its own parts spelled out as the session's fields are: every new
 * session stores one (an agent path of one entry, an empty shared context), and the generic copy,
 * a keyed store and two text checks per key of every level, cost a turn more than a tenth of it.
 * Only the metadata's fields, and a path entry's, are kept; facts, journey steps, errors and the
 * routing outcome are copied as any data, their keys in the order they were written. Metadata or
 * an entry that lacks a field it must have is not one the runtime wrote: it is copied as any data.
 */
function snapshotMetadata(metadata: SessionMetadata, previous: SessionMetadata | undefined): SessionMetadata {
  if (metadata === previous) return metadata
  if (
    metadata.agentPath === undefined ||
    metadata.sharedContext === undefined ||
    metadata.errors === undefined
  ) {
    return copy(metadata, previous) as SessionMetadata
  }
  const row: { -readonly [Key in keyof SessionMetadata]: SessionMetadata[Key] } = {
    agentPath: snapshotAgentPath(metadata.agentPath, previous?.agentPath),
    sharedContext: snapshotSharedContext(metadata.sharedContext, previous?.sharedContext),
    errors: copy(metadata.errors, previous?.errors) as SessionMetadata['errors'],
  }
  if (metadata.routing !== undefined) {
    row.routing = copy(metadata.routing, previous?.routing) as RoutingOutcome
  }
  if (metadata.pauses !== undefined) row.pauses = metadata.pauses
  return Object.freeze(row)
}

function snapshotAgentPath(
  path: readonly AgentPathEntry[],
  previous: readonly AgentPathEntry[] | undefined,
): readonly AgentPathEntry[] {
  if (path === previous) return path
  if (path.length === 0) return EMPTY_ARRAY as readonly AgentPathEntry[]
  return Object.freeze(path.map((entry, index) => snapshotPathEntry(entry, previous?.[index])))
}

/** In the key order `pathEntry` writes, which the API shows. */
function snapshotPathEntry(entry: AgentPathEntry, previous: AgentPathEntry | undefined): AgentPathEntry {
  if (entry === previous) return entry
  if (
    entry.agentId === undefined ||
    entry.agentName === undefined ||
    entry.timestamp === undefined ||
    entry.via === undefined
  ) {
    return copy(entry, previous) as AgentPathEntry
  }
  const row = { agentId: entry.agentId, agentName: storedText(entry.agentName) } as {
    -readonly [Key in keyof AgentPathEntry]: AgentPathEntry[Key]
  }
  if (entry.role !== undefined) row.role = storedText(entry.role)
  if (entry.confidence !== undefined) row.confidence = entry.confidence
  if (entry.routeId !== undefined) row.routeId = storedText(entry.routeId)
  row.timestamp = storedText(entry.timestamp)
  row.via = storedText(entry.via) as AgentPathEntry['via']
  if (entry.depth !== undefined) row.depth = entry.depth
  if (entry.reason !== undefined) row.reason = storedText(entry.reason)
  return Object.freeze(row)
}

function snapshotSharedContext(context: SharedContext, previous: SharedContext | undefined): SharedContext {
  if (context === previous) return context
  if (context.facts === undefined || context.journey === undefined)
    return copy(context, previous) as SharedContext
  const facts = copy(context.facts, previous?.facts) as SharedContext['facts']
  const journey = copy(context.journey, previous?.journey) as SharedContext['journey']
  if (facts === EMPTY_OBJECT && journey === EMPTY_ARRAY) return EMPTY_SHARED_CONTEXT
  return Object.freeze({ facts, journey })
}

/**
 * The customer's ids exactly as given: replies go back to them, and two customers whose ids differ
 * only in characters PostgreSQL cannot hold stay two (it stores them with `storableKey`).
 */
function exactCustomer(customer: Customer, previous: Customer | undefined): Customer {
  if (customer === previous) return customer
  const row: { -readonly [Key in keyof Customer]: Customer[Key] } = { clientId: customer.clientId }
  if (customer.channelId !== undefined) row.channelId = customer.channelId
  if (customer.transport !== undefined) row.transport = customer.transport
  return Object.freeze(row)
}

/** The text as stored: itself nearly always, which two native checks tell without a copy. */
export function storedText(text: string): string {
  return text.isWellFormed() && !text.includes('\u0000') ? text : storableText(text)
}

function copy(value: unknown, previous: unknown): unknown {
  if (typeof value === 'string') return storedText(value)
  return typeof value === 'object' && value !== null && value !== previous
    ? copyObject(value, previous)
    : value
}

/**
 * Frozen and empty, so every stored record can share them: a new session holds three empty parts
 * (its errors, facts and journey), and each would otherwise be an object kept for good.
 */
const EMPTY_ARRAY: readonly unknown[] = Object.freeze([])
const EMPTY_OBJECT: object = Object.freeze({})
/** Every new session's shared context, no fact and no step yet. */
const EMPTY_SHARED_CONTEXT: SharedContext = Object.freeze({
  facts: EMPTY_OBJECT as SharedContext['facts'],
  journey: EMPTY_ARRAY as SharedContext['journey'],
})

function copyObject(value: object, previous: unknown): object {
  if (Array.isArray(value)) {
    if (value.length === 0) return EMPTY_ARRAY
    const before: readonly unknown[] | undefined = Array.isArray(previous) ? previous : undefined
    const result: unknown[] = []
    for (let index = 0; index < value.length; index++) result.push(copy(value[index], before?.[index]))
    return Object.freeze(result)
  }
  if (value instanceof Date) return new Date(value.getTime())
  const before =
    typeof previous === 'object' && previous !== null ? (previous as Record<string, unknown>) : undefined
  const result: Record<string, unknown> = {}
  let empty = true
  // `for…in` rather than `Object.entries`, which builds an array per key; plain data has no
  // enumerable inherited keys, so both see the same ones.
  for (const given in value) {
    const entry = (value as Record<string, unknown>)[given]
    if (entry === undefined) continue
    const key = storedText(given)
    const copied =
      typeof entry === 'object' && entry !== null
        ? copy(entry, before?.[key])
        : typeof entry === 'string'
          ? storedText(entry)
          : entry
    // Assigning `__proto__` would call Object.prototype's setter and lose the key (a fact's name
    // comes from a model); defining it keeps it as the own property a database would return.
    if (key === '__proto__') {
      Object.defineProperty(result, key, {
        value: copied,
        enumerable: true,
        writable: true,
        configurable: true,
      })
    } else result[key] = copied
    empty = false
  }
  return empty ? EMPTY_OBJECT : Object.freeze(result)
}
