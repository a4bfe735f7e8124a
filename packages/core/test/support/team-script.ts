import fc from 'fast-check'

/**
 * A team and what its models answer, as fast-check draws them for the team oracle test. Agents are
 * named by their index in the team; agent 0 is the integration's entry agent. Choices that depend
 * on the agent a call turns out to be for (which route, which allowed target, how far from the
 * threshold) stay choices here: the oracle resolves them against that agent.
 */

export interface TeamAgent {
  readonly name: string
  readonly role?: string
  readonly kind: 'ai' | 'human'
  readonly llmModel: string
  readonly routingModel?: string
  readonly maxDepth: number
  /** Undefined: the default of CONTRACT §4. */
  readonly fallbackReply?: string | null
  readonly routing?: {
    readonly enabled: boolean
    readonly routes: readonly { readonly id: string; readonly target: number }[]
    readonly threshold: number
  }
  readonly handoff: {
    readonly enabled: boolean
    readonly allowedTargets: readonly number[]
    readonly announceHandoff: boolean
    readonly template: string
    readonly messageHistoryDepth: number
    readonly operatorId?: number
    readonly groupId?: number
    readonly sendSystemMessage: boolean
  }
}

export interface Team {
  readonly agents: readonly TeamAgent[]
  /**
   * The company's balance before the first message, in nano-dollars (whole: the ledger is exact to
   * 9 decimal places); undefined: credits are not enforced, though every call is still charged.
   */
  readonly creditsNanos?: number
  /** Whether the channel can transfer to a human (msgplatform can, webchat cannot). */
  readonly humanTransfer: boolean
  /** Whether the channel's transfer call fails. */
  readonly transferFails: boolean
}

/** How the classifier's confidence relates to the classifying agent's threshold. */
export type ConfidenceChoice =
  | { readonly kind: 'at-threshold' }
  | { readonly kind: 'just-below' }
  | { readonly kind: 'just-above' }
  | { readonly kind: 'value'; readonly value: number }

export type ClassifierAnswer =
  | {
      readonly kind: 'decision'
      /** A route of the classifying agent (by index, modulo its routes), null, or an id it lacks. */
      readonly route:
        | { readonly kind: 'route'; readonly index: number }
        | { readonly kind: 'null' }
        | { readonly kind: 'unknown' }
      readonly confidence: ConfidenceChoice
    }
  | { readonly kind: 'malformed'; readonly text: string }

export type HandoffTarget =
  /** One of the caller's allowedTargets (by index, modulo them; agent 0 when it has none). */
  | { readonly kind: 'allowed'; readonly index: number }
  /** Any agent of the team, the caller included. */
  | { readonly kind: 'agent'; readonly index: number }
  /** An id no agent has. */
  | { readonly kind: 'unknown' }

export type ToolCallChoice =
  | { readonly kind: 'handoff'; readonly target: HandoffTarget; readonly reason?: string }
  | { readonly kind: 'save-fact'; readonly key: string; readonly value: string }
  | { readonly kind: 'append-journey'; readonly step: string }
  | { readonly kind: 'app-tool' }
  | { readonly kind: 'unknown-tool' }

export type Round =
  | { readonly kind: 'text'; readonly empty: boolean }
  | { readonly kind: 'fail' }
  | { readonly kind: 'tools'; readonly withText: boolean; readonly calls: readonly ToolCallChoice[] }

/** What an operator does after a customer message was answered (CONTRACT §8). */
export type OperatorChoice =
  | { readonly kind: 'none' }
  /** Reassign to any agent of the team (by index), naming an operator or not. */
  | { readonly kind: 'reassign'; readonly index: number; readonly operatorId?: number }
  | { readonly kind: 'resume'; readonly note?: string }
  | { readonly kind: 'operator-message' }
  /** The session closes; the customer's next message opens a new one, routed again. */
  | { readonly kind: 'close' }
  /** An edit of an agent through the agent service: what later turns and transitions must see. */
  | { readonly kind: 'edit'; readonly index: number; readonly patch: AgentEdit }

export interface AgentEdit {
  readonly name?: string
  readonly role?: string
  /** Not applied to the entry agent: what a human entry agent does with routing is not said. */
  readonly kind?: 'ai' | 'human'
  readonly handoff?: {
    readonly enabled: boolean
    readonly allowedTargets: readonly number[]
    readonly announceHandoff: boolean
    readonly template: string
    readonly messageHistoryDepth: number
  }
  readonly fallbackReply?: string | null
}

/** What a model call reports it used. */
export interface TokenCount {
  readonly inputTokens: number
  readonly outputTokens: number
}

/**
 * An operator's change of the balance after a message (a top-up, or a charge when negative), in
 * nano-dollars; or the amount that brings the balance to exactly `balanceNanos`, whatever it is then.
 */
export type TopUp =
  | { readonly kind: 'amount'; readonly nanos: number }
  | { readonly kind: 'to-balance'; readonly balanceNanos: number }

export interface TeamScript {
  /** The token counts model calls report: call n (of the model's, counted from 0) reports n modulo their number. */
  readonly tokens: readonly TokenCount[]
  /** The classifier's answers, in the order classifications happen; used up, it answers null. */
  readonly classifier: readonly ClassifierAnswer[]
  /**
   * The customer's messages: each one's model rounds, in the order calls happen (used up, a
   * reply), and what an operator does once it was answered.
   */
  readonly messages: readonly {
    readonly rounds: readonly Round[]
    readonly operator: OperatorChoice
    /** After the operator's action. */
    readonly topUp?: TopUp
  }[]
}

/** Unparseable classifier content, and content of the wrong shape. */
export const MALFORMED_CLASSIFIER_TEXTS = [
  'sales, probably',
  '{"routeId": "r0", "confidence": 0.9',
  '',
  'null',
  '[]',
  '{}',
  '{"route": "r0", "score": 1}',
] as const

/**
 * Models of the default price table and models it lacks (priced as unknown), a prototype's key among
 * them: what a call costs depends on which one an agent uses.
 */
const modelArbitrary = (index: number, prefix: string) =>
  fc.constantFrom('gpt-4o-mini', 'gpt-4o', 'gpt-4.1-nano', 'o4-mini', `${prefix}-${index}`, 'constructor')

const THRESHOLDS = fc.oneof(fc.constantFrom(0, 0.5, 1), fc.double({ min: 0, max: 1, noNaN: true }))

function agentArbitrary(index: number, size: number, chain: boolean): fc.Arbitrary<TeamAgent> {
  const agentIndex = fc.nat({ max: size - 1 })
  return fc
    .record(
      {
        role: fc.constantFrom('sales', 'support', 'billing'),
        kind:
          index === 0
            ? fc.constant<'ai' | 'human'>('ai')
            : fc.oneof(
                { weight: chain ? 10 : 3, arbitrary: fc.constant<'ai' | 'human'>('ai') },
                { weight: 1, arbitrary: fc.constant<'ai' | 'human'>('human') },
              ),
        llmModel: modelArbitrary(index, 'model'),
        routingModel: modelArbitrary(index, 'router'),
        maxDepth: fc.integer({ min: 1, max: 9 }),
        fallbackReply: fc.constantFrom(null, `fallback of agent ${index}`),
        routing: chain
          ? // Every agent routes, its first route to the next agent along: chains reach the cap.
            fc.record({
              enabled: fc.constant(true),
              targets: fc
                .array(agentIndex, { maxLength: 3 })
                .map((others) => [(index + 1) % size, ...others]),
              threshold: THRESHOLDS,
            })
          : fc.record({
              enabled: fc.oneof(
                { weight: 4, arbitrary: fc.constant(true) },
                { weight: 1, arbitrary: fc.constant(false) },
              ),
              targets: fc.array(agentIndex, { maxLength: 4, size: 'max' }),
              threshold: THRESHOLDS,
            }),
        handoff: fc.record(
          {
            enabled: chain
              ? fc.constant(true)
              : fc.oneof(
                  { weight: 4, arbitrary: fc.constant(true) },
                  { weight: 1, arbitrary: fc.constant(false) },
                ),
            // A chain hands off to the next agent along first: handoffs reach the limit of 5.
            allowedTargets: chain
              ? fc
                  .uniqueArray(agentIndex, { maxLength: size - 1 })
                  .map((others) => [...new Set([(index + 1) % size, ...others])])
              : fc.uniqueArray(agentIndex, { maxLength: size }),
            announceHandoff: fc.boolean(),
            template: fc.constantFrom('', `Agent ${index} passes you on.`),
            messageHistoryDepth: fc.oneof(fc.integer({ min: 5, max: 8 }), fc.constant(50)),
            operatorId: fc.integer({ min: 1, max: 99 }),
            groupId: fc.integer({ min: 1, max: 99 }),
            sendSystemMessage: fc.boolean(),
          },
          {
            requiredKeys: [
              'enabled',
              'allowedTargets',
              'announceHandoff',
              'template',
              'messageHistoryDepth',
              'sendSystemMessage',
            ],
          },
        ),
      },
      {
        requiredKeys: chain
          ? ['kind', 'llmModel', 'maxDepth', 'handoff', 'routing']
          : ['kind', 'llmModel', 'maxDepth', 'handoff'],
      },
    )
    .map(({ routing, ...agent }) => ({
      ...agent,
      name: `agent ${index}`,
      ...(routing === undefined
        ? {}
        : {
            routing: {
              enabled: routing.enabled,
              routes: routing.targets.map((target, route) => ({ id: `r${route}`, target })),
              threshold: routing.threshold,
            },
          }),
    }))
}

/**
 * Small balances: none at all, at most a micro-dollar (one call of a few tokens crosses it), about
 * what a few calls cost (up to 0.05 USD, a call costing up to about 0.03), already below 0; now and
 * then plenty.
 */
const creditsArbitrary: fc.Arbitrary<number> = fc.oneof(
  { weight: 2, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 1000 }) },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 50_000_000 }) },
  { weight: 2, arbitrary: fc.integer({ min: -50_000_000, max: -1 }) },
  { weight: 1, arbitrary: fc.constant(5_000_000_000) },
)

export const teamArbitrary: fc.Arbitrary<Team> = fc
  .tuple(fc.oneof(fc.integer({ min: 2, max: 6 }), fc.constant(6)), fc.boolean())
  .chain(([size, chain]) =>
    fc.record(
      {
        agents: fc.tuple(...Array.from({ length: size }, (_, index) => agentArbitrary(index, size, chain))),
        humanTransfer: fc.boolean(),
        transferFails: fc.boolean(),
        creditsNanos: creditsArbitrary,
      },
      { requiredKeys: ['agents', 'humanTransfer', 'transferFails'] },
    ),
  )

const confidenceArbitrary: fc.Arbitrary<ConfidenceChoice> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'at-threshold' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'just-below' as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'just-above' as const }) },
  {
    weight: 1,
    arbitrary: fc.double({ min: 0, max: 1, noNaN: true }).map((value) => ({ kind: 'value' as const, value })),
  },
)

const classifierAnswerArbitrary: fc.Arbitrary<ClassifierAnswer> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('decision' as const),
      route: fc.oneof(
        {
          weight: 10,
          arbitrary: fc
            .oneof(fc.constant(0), fc.nat({ max: 3 }))
            .map((index) => ({ kind: 'route' as const, index })),
        },
        { weight: 1, arbitrary: fc.constant({ kind: 'null' as const }) },
        { weight: 1, arbitrary: fc.constant({ kind: 'unknown' as const }) },
      ),
      confidence: confidenceArbitrary,
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(...MALFORMED_CLASSIFIER_TEXTS)
      .map((text) => ({ kind: 'malformed' as const, text })),
  },
)

const handoffTargetArbitrary: fc.Arbitrary<HandoffTarget> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .oneof(fc.constant(0), fc.nat({ max: 5 }))
      .map((index) => ({ kind: 'allowed' as const, index })),
  },
  { weight: 2, arbitrary: fc.nat({ max: 5 }).map((index) => ({ kind: 'agent' as const, index })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unknown' as const }) },
)

const toolCallArbitrary: fc.Arbitrary<ToolCallChoice> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record(
      {
        kind: fc.constant('handoff' as const),
        target: handoffTargetArbitrary,
        reason: fc.constantFrom('billing question', 'wants a human'),
      },
      { requiredKeys: ['kind', 'target'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('save-fact' as const),
      key: fc.constantFrom('plan', 'name'),
      value: fc.constantFrom('pro', 'basic', 'Ann'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('asked about pricing', 'wants a refund')
      .map((step) => ({ kind: 'append-journey' as const, step })),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'app-tool' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unknown-tool' as const }) },
)

const roundArbitrary: fc.Arbitrary<Round> = fc.oneof(
  { weight: 3, arbitrary: fc.boolean().map((empty) => ({ kind: 'text' as const, empty })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'fail' as const }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('tools' as const),
      withText: fc.boolean(),
      calls: fc.array(toolCallArbitrary, { minLength: 1, maxLength: 3 }),
    }),
  },
)

/** A classifier sure of each agent's first route: with a chain team, routing reaches the cap. */
const confidentAnswerArbitrary: fc.Arbitrary<ClassifierAnswer> = fc
  .constantFrom({ kind: 'at-threshold' as const }, { kind: 'just-above' as const })
  .map((confidence) => ({ kind: 'decision', route: { kind: 'route', index: 0 }, confidence }))

/** Only tool calls, more rounds than the budget of 8 model calls. */
const busyRoundsArbitrary: fc.Arbitrary<Round[]> = fc.array(
  fc.record({
    kind: fc.constant('tools' as const),
    withText: fc.boolean(),
    calls: fc.array(toolCallArbitrary, { minLength: 1, maxLength: 3 }),
  }),
  { minLength: 8, maxLength: 11 },
)

const operatorArbitrary: fc.Arbitrary<OperatorChoice> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'none' as const }) },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        kind: fc.constant('reassign' as const),
        index: fc.nat({ max: 5 }),
        operatorId: fc.integer({ min: 100, max: 199 }),
      },
      { requiredKeys: ['kind', 'index'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      { kind: fc.constant('resume' as const), note: fc.constantFrom('called the customer back') },
      { requiredKeys: ['kind'] },
    ),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'operator-message' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'close' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('edit' as const),
      index: fc.nat({ max: 5 }),
      patch: fc.record(
        {
          name: fc.constantFrom('renamed agent'),
          role: fc.constantFrom('sales', 'retention'),
          kind: fc.constantFrom<'ai' | 'human'>('ai', 'human'),
          handoff: fc.record({
            enabled: fc.boolean(),
            allowedTargets: fc.uniqueArray(fc.nat({ max: 5 }), { maxLength: 4 }),
            announceHandoff: fc.boolean(),
            template: fc.constantFrom('', 'An edited announcement.'),
            messageHistoryDepth: fc.integer({ min: 5, max: 8 }),
          }),
          fallbackReply: fc.constantFrom(null, 'An edited fallback.'),
        },
        { requiredKeys: [] },
      ),
    }),
  },
)

/** None at all, a call of a few tokens, and calls of thousands. */
const tokenCountArbitrary: fc.Arbitrary<TokenCount> = fc.oneof(
  fc.constant({ inputTokens: 0, outputTokens: 0 }),
  fc.record({ inputTokens: fc.integer({ min: 0, max: 20 }), outputTokens: fc.integer({ min: 0, max: 20 }) }),
  fc.record({
    inputTokens: fc.integer({ min: 0, max: 5000 }),
    outputTokens: fc.integer({ min: 0, max: 2000 }),
  }),
)

const topUpArbitrary: fc.Arbitrary<TopUp> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc
      .oneof(fc.integer({ min: 1, max: 50_000_000 }), fc.integer({ min: -1000, max: -1 }))
      .map((nanos) => ({ kind: 'amount' as const, nanos })),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(-1, 0, 1)
      .map((balanceNanos) => ({ kind: 'to-balance' as const, balanceNanos })),
  },
)

export const teamScriptArbitrary: fc.Arbitrary<TeamScript> = fc.record({
  tokens: fc.array(tokenCountArbitrary, { minLength: 1, maxLength: 6 }),
  classifier: fc.oneof(
    {
      weight: 3,
      arbitrary: fc.array(classifierAnswerArbitrary, { minLength: 1, maxLength: 6, size: 'max' }),
    },
    { weight: 1, arbitrary: fc.array(confidentAnswerArbitrary, { minLength: 6, maxLength: 6 }) },
  ),
  messages: fc.array(
    fc.record(
      {
        rounds: fc.oneof(
          { weight: 3, arbitrary: fc.array(roundArbitrary, { maxLength: 11 }) },
          { weight: 1, arbitrary: busyRoundsArbitrary },
        ),
        operator: operatorArbitrary,
        topUp: topUpArbitrary,
      },
      { requiredKeys: ['rounds', 'operator'] },
    ),
    { minLength: 1, maxLength: 5 },
  ),
})
