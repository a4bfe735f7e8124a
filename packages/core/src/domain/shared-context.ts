export interface JourneyStep {
  readonly step: string
  /** ISO 8601 UTC with milliseconds. */
  readonly at: string
}

/** The Shared Conversation Context every newly active agent receives in its system prompt. */
export interface SharedContext {
  readonly facts: Readonly<Record<string, string>>
  readonly journey: readonly JourneyStep[]
}

export function emptySharedContext(): SharedContext {
  return { facts: {}, journey: [] }
}

export function withFact(context: SharedContext, key: string, value: string): SharedContext {
  return { facts: { ...context.facts, [key]: value }, journey: context.journey }
}

export function withJourneyStep(context: SharedContext, step: string, at: Date): SharedContext {
  return { facts: context.facts, journey: [...context.journey, { step, at: at.toISOString() }] }
}

/** What a turn added to the SCC, applied on top of whatever the session holds at commit time. */
export interface SharedContextChanges {
  readonly facts: Readonly<Record<string, string>>
  readonly journey: readonly JourneyStep[]
}

export function applySharedContextChanges(
  context: SharedContext,
  changes: SharedContextChanges,
): SharedContext {
  if (Object.keys(changes.facts).length === 0 && changes.journey.length === 0) return context
  return {
    facts: { ...context.facts, ...changes.facts },
    journey: [...context.journey, ...changes.journey],
  }
}
