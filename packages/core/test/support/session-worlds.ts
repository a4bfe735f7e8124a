import type { MessageTag } from './rule-model.js'

/** The agents of the model test: two AI agents that hand off to each other, and a human queue. */
export type AgentKey = 'A' | 'B' | 'H'
export type StateName = 'ongoing' | 'paused' | 'closed'

/**
 * How a queued message's turn ended, as far as the customer and the session can tell:
 * - answered: its reply (if its rule has one) was committed for delivery, its handoff stood;
 * - answeredInPlace: as answered, by the agent it asked to hand over to, which was active already;
 * - answeredVoid: as answered, but an operator's reassign meanwhile voided its handoff: the
 *   operator's choice of agent stands (the contract says nothing of a reassign mid-turn, and the
 *   runtime keeps the reassign);
 * - silenced: someone paused or closed the session while it ran, its replies are blocked;
 * - skipped: the session was not answerable when its job came up, no model call at all.
 */
export type Outcome = 'answered' | 'answeredInPlace' | 'answeredVoid' | 'silenced' | 'skipped'

export type Operation =
  | { readonly type: 'pause' }
  | { readonly type: 'resume' }
  | { readonly type: 'close' }
  | { readonly type: 'reassign'; readonly agent: AgentKey }

export type OperationResult =
  | { readonly ok: true; readonly state: StateName; readonly active: AgentKey }
  | { readonly ok: false; readonly code: string }

export interface QueuedTurn {
  readonly number: number
  readonly tag: MessageTag
}

/** What the storage, the channel and the model show of one queued message once all is idle. */
export interface TurnObservation {
  /** A turn for it committed (one a stopped process could not commit does not count). */
  readonly called: boolean
  /** Its handoff left a path entry. */
  readonly effect: boolean
  readonly reply: Delivered
  /** The handoff announcement its turn stored (handoff and human messages only). */
  readonly announcement: Delivered
}

export type Delivered = 'none' | 'sent' | 'blocked' | 'several' | 'pending' | 'failed'

/** An operation disturbed a turn still to come: `s` silences (pause, close, human), `r` reassigns. */
type Disturbance = '' | 's' | 'r' | 'sr'

interface World {
  readonly state: StateName
  readonly active: AgentKey
  /** The first queued turn this world has not decided yet; turns are decided in arrival order. */
  readonly next: number
  /** By turn index: operations that happened while it was still to come. */
  readonly disturbed: readonly Disturbance[]
  /** By turn index, for decided turns. */
  readonly outcomes: readonly (Outcome | null)[]
  /** By turn index: a reply committed before a pause or close, which may block it unsent. */
  readonly blockable: readonly boolean[]
}

/** Its turn replies: with the rule's text, or with the agent's fallback reply when the model fails. */
const repliesTo = (tag: MessageTag) => tag !== 'quiet' && tag !== 'human'
/** The AI agent a `toA` or `toB` message hands over to (if it is not the one answering already). */
const aiTarget = (tag: MessageTag): AgentKey | null => (tag === 'toA' ? 'A' : tag === 'toB' ? 'B' : null)
const keyOf = (world: World) => JSON.stringify(world)

/**
 * The session as a set of possible worlds. Turns run in the background, so between two looks the
 * session may be anywhere its queued turns could have taken it: every world is one order of
 * events the contract allows (turns decided in arrival order, each at any point among the
 * operator's operations, with the outcomes its situation allows). Each observation keeps the
 * worlds that agree with it; none left is a contract violation.
 */
export class SessionWorlds {
  private readonly turns: QueuedTurn[] = []
  private worlds: World[]
  /** Turns before this index were checked at an idle point already. */
  private settled = 0
  private readonly history: string[] = []

  constructor(readonly id: string) {
    this.worlds = [{ state: 'ongoing', active: 'A', next: 0, disturbed: [], outcomes: [], blockable: [] }]
  }

  /** The state and agent once everything settled; null while turns may still move them. */
  known(): { state: StateName; active: AgentKey } | null {
    if (this.worlds.length !== 1 || this.worlds[0]!.next !== this.turns.length) return null
    const [world] = this.worlds
    return { state: world!.state, active: world!.active }
  }

  /** Whether the session is closed in every world (only an operator closes it). */
  closed(): boolean {
    return this.worlds.every((world) => world.state === 'closed')
  }

  /** A customer message stored while the session looked like `seen`; `queued` turns come later. */
  ingest(seen: { state: StateName; active: AgentKey }, turn: QueuedTurn | null): void {
    this.history.push(`ingest m${turn?.number ?? '-'} seen ${seen.state}/${seen.active}`)
    this.keep(
      this.expand().filter((world) => world.state === seen.state && world.active === seen.active),
      `a message arrived while the session was ${seen.state} with ${seen.active} active`,
    )
    if (turn !== null) this.turns.push(turn)
  }

  operate(operation: Operation, observed: OperationResult): void {
    this.history.push(`${describe(operation)} -> ${describeResult(observed)}`)
    const next: World[] = []
    for (const world of this.expand()) {
      const predicted = apply(world, operation, this.turns.length)
      if (sameResult(predicted.result, observed)) next.push(predicted.world)
    }
    this.keep(next, `${describe(operation)} answered ${describeResult(observed)}`)
  }

  /**
   * What was seen happened in one of several orders: the worlds of every order that explains it.
   * Each order is applied to a copy of this session.
   */
  either(orders: readonly ((worlds: SessionWorlds) => void)[]): void {
    const found: World[] = []
    const failures: unknown[] = []
    for (const order of orders) {
      const copy = new SessionWorlds(this.id)
      copy.turns.push(...this.turns)
      copy.worlds = this.worlds
      copy.settled = this.settled
      copy.history.push(...this.history)
      try {
        order(copy)
        found.push(...copy.worlds)
        this.pending = copy.history.slice(this.history.length)
      } catch (error) {
        failures.push(error)
      }
    }
    if (found.length === 0) throw failures[0]
    this.history.push(`one of ${orders.length} orders: ${this.pending.join(', ')}`)
    this.keep(found, 'either order')
  }

  /** The history of the last order `either` found possible. */
  private pending: string[] = []

  /**
   * Everything is idle: every queued turn is decided. `observe(index)` tells what became of the
   * queued turn with that index.
   */
  settle(seen: { state: StateName; active: AgentKey }, observe: (turn: QueuedTurn) => TurnObservation): void {
    const observations = this.turns.map((turn, index) => (index < this.settled ? null : observe(turn)))
    this.history.push(
      `idle: ${seen.state}/${seen.active}; ${this.turns
        .slice(this.settled)
        .map(
          (turn, index) =>
            `m${turn.number} ${turn.tag} ${JSON.stringify(observations[this.settled + index])}`,
        )
        .join('; ')}`,
    )
    const complete = this.expand().filter(
      (world) =>
        world.next === this.turns.length &&
        world.state === seen.state &&
        world.active === seen.active &&
        this.turns.every((turn, index) => {
          const observation = observations[index]
          return (
            observation === null ||
            observation === undefined ||
            allows(world.outcomes[index]!, turn.tag, world.blockable[index] ?? false, observation)
          )
        }),
    )
    this.keep(complete, 'what idle shows')
    this.settled = this.turns.length
    this.worlds = [
      {
        state: seen.state,
        active: seen.active,
        next: this.turns.length,
        disturbed: [],
        outcomes: [],
        blockable: [],
      },
    ]
  }

  private keep(worlds: World[], what: string): void {
    if (worlds.length === 0) {
      throw new Error(
        `session ${this.id}: no order of events the contract allows explains ${what}.\nqueued turns: ${this.turns
          .map((turn, index) => `${index}:m${turn.number} ${turn.tag}`)
          .join(', ')}\nhistory:\n  ${this.history.join('\n  ')}`,
      )
    }
    const unique = new Map(worlds.map((world) => [keyOf(world), world]))
    this.worlds = [...unique.values()]
  }

  /** Every world reachable by deciding zero or more further turns. */
  private expand(): World[] {
    const found = new Map<string, World>()
    const queue = [...this.worlds]
    while (queue.length > 0) {
      const world = queue.pop()!
      const key = keyOf(world)
      if (found.has(key)) continue
      found.set(key, world)
      if (world.next < this.turns.length) queue.push(...decide(world, this.turns[world.next]!))
    }
    return [...found.values()]
  }
}

/** The outcomes the next turn may have in this world, and the worlds they lead to. */
function decide(world: World, turn: QueuedTurn): World[] {
  const index = world.next
  const answerable = world.state === 'ongoing' && world.active !== 'H'
  const disturbed = world.disturbed[index] ?? ''
  const silencedBy = disturbed.includes('s')
  const reassignedBy = disturbed.includes('r')
  const decided = (outcome: Outcome, changes: Partial<World> = {}): World => {
    const outcomes = [...world.outcomes]
    outcomes[index] = outcome
    return { ...world, ...changes, next: index + 1, outcomes }
  }
  const worlds: World[] = []
  if (answerable) {
    const target = aiTarget(turn.tag)
    if (target === world.active) worlds.push(decided('answeredInPlace'))
    else if (target !== null) worlds.push(decided('answered', { active: target }))
    else if (turn.tag === 'human') {
      // The transfer pauses the session and blocks the replies that have not left yet.
      worlds.push(
        decided('answered', {
          state: 'paused',
          active: 'H',
          blockable: markAnswered(world, world.blockable),
        }),
      )
    } else worlds.push(decided('answered'))
  }
  if (answerable && reassignedBy) worlds.push(decided('answeredVoid'))
  if (silencedBy) worlds.push(decided('silenced'))
  if (!answerable) worlds.push(decided('skipped'))
  return worlds
}

/** The decided turns with a committed reply may see it blocked by what happens now. */
function markAnswered(world: World, blockable: readonly boolean[]): boolean[] {
  const marked = [...blockable]
  world.outcomes.forEach((outcome, index) => {
    if (outcome !== null && outcome !== 'silenced' && outcome !== 'skipped') marked[index] = true
  })
  return marked
}

/** The turns still to come in this world are disturbed by an operation of this kind. */
function disturb(world: World, count: number, kind: 's' | 'r'): Disturbance[] {
  const disturbed = [...world.disturbed]
  for (let index = world.next; index < count; index += 1) {
    const before = disturbed[index] ?? ''
    if (!before.includes(kind)) disturbed[index] = (kind === 's' ? `s${before}` : `${before}r`) as Disturbance
  }
  return disturbed
}

/** What the contract says an operation answers in this world, and where it leaves it. */
function apply(
  world: World,
  operation: Operation,
  queued: number,
): { result: OperationResult; world: World } {
  const invalid = { result: { ok: false, code: 'INVALID_STATE' } as const, world }
  const silence = (changes: Partial<World>): World => ({
    ...world,
    ...changes,
    disturbed: disturb(world, queued, 's'),
    blockable: markAnswered(world, world.blockable),
  })
  const ok = (next: World) => ({
    result: { ok: true, state: next.state, active: next.active } as const,
    world: next,
  })
  if (world.state === 'closed') return invalid
  switch (operation.type) {
    case 'pause':
      return world.state === 'ongoing' ? ok(silence({ state: 'paused' })) : invalid
    case 'resume':
      return world.state === 'paused' ? ok({ ...world, state: 'ongoing' }) : invalid
    case 'close':
      return ok(silence({ state: 'closed' }))
    case 'reassign':
      if (operation.agent === 'H') return ok(silence({ state: 'paused', active: 'H' }))
      return ok({ ...world, active: operation.agent, disturbed: disturb(world, queued, 'r') })
  }
}

function allows(outcome: Outcome, tag: MessageTag, blockable: boolean, seen: TurnObservation): boolean {
  // Committed for delivery: it leaves, unless a pause, close or transfer came after the commit.
  const left = (expected: boolean, delivered: Delivered) =>
    expected ? delivered === 'sent' || (blockable && delivered === 'blocked') : delivered === 'none'
  const blocked = (expected: boolean, delivered: Delivered) => delivered === (expected ? 'blocked' : 'none')
  const handsOff = tag === 'human' || aiTarget(tag) !== null
  // Voided or silenced, the turn's agent is unknown: it asked for a handoff, and announced it,
  // unless it was the target of a `toA` or `toB` already.
  const mayAnnounce = (expect: (expected: boolean, delivered: Delivered) => boolean) =>
    expect(handsOff, seen.announcement) || (aiTarget(tag) !== null && seen.announcement === 'none')
  switch (outcome) {
    case 'answered':
      return (
        seen.called &&
        seen.effect === handsOff &&
        left(repliesTo(tag), seen.reply) &&
        left(handsOff, seen.announcement)
      )
    case 'answeredInPlace':
      return seen.called && !seen.effect && left(true, seen.reply) && seen.announcement === 'none'
    case 'answeredVoid':
      return seen.called && !seen.effect && left(repliesTo(tag), seen.reply) && mayAnnounce(left)
    case 'silenced':
      return seen.called && !seen.effect && blocked(repliesTo(tag), seen.reply) && mayAnnounce(blocked)
    case 'skipped':
      return !seen.called && !seen.effect && seen.reply === 'none' && seen.announcement === 'none'
  }
}

function sameResult(predicted: OperationResult, observed: OperationResult): boolean {
  if (predicted.ok !== observed.ok) return false
  if (!predicted.ok || !observed.ok) return !predicted.ok && !observed.ok && predicted.code === observed.code
  return predicted.state === observed.state && predicted.active === observed.active
}

function describe(operation: Operation): string {
  return operation.type === 'reassign' ? `reassign to ${operation.agent}` : operation.type
}

function describeResult(result: OperationResult): string {
  return result.ok ? `ok ${result.state}/${result.active}` : result.code
}
