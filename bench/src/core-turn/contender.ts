import type { ScenarioName } from './scenario.js'

/** One implementation of one scenario, opened fresh for every measured round. */
export interface Contender {
  /** The row label in the printed table. */
  readonly label: string
  readonly scenario: ScenarioName
  /**
   * What the row is compared as: the floor and @openai/agents are the baselines of the ratio
   * columns; `switchboard` is the row the 10× verdict is about, and variants are shown only.
   */
  readonly role: 'floor' | 'switchboard' | 'switchboard-variant' | 'openai-agents'
  /** Measured rounds run turns in multiples of this (a concurrent batch); 1 unless set. */
  readonly turnsPerStep?: number
  open(): Promise<ContenderInstance>
}

export interface ContenderInstance {
  /**
   * Answers `count` customer messages, numbered from `first`, and resolves once every reply was
   * delivered. How (one after another or all at once) is the contender's own.
   */
  run(first: number, count: number): Promise<void>
  /** Throws unless the turns so far did exactly what the scenario says, so no row skips work. */
  verify(turns: number): Promise<void>
  close(): Promise<void>
}

export function expectEqual(what: string, actual: unknown, expected: unknown): void {
  if (actual !== expected) {
    throw new Error(`bench: ${what} was ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`)
  }
}
