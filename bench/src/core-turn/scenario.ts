/**
 * The two conversations every contender of the core-turn bench has, with the same texts, so
 * that each one does the same work: build the prompt, call the model, run tools, switch agents,
 * deliver one reply.
 */
export type ScenarioName = 'A' | 'B'

export interface Scenario {
  readonly name: ScenarioName
  readonly description: string
  /** Whether the entry agent saves a fact and hands off before the second agent answers. */
  readonly delegates: boolean
}

export const SCENARIOS: readonly Scenario[] = [
  { name: 'A', description: 'one agent answers one customer message with text', delegates: false },
  {
    name: 'B',
    description: 'agent 1 calls save_fact, then handoff_to_agent; agent 2 answers',
    delegates: true,
  },
]

export const CUSTOMER_TEXT = 'Hi, I am Ann. What does the pro plan cost?'
export const FACT_KEY = 'customer_name'
export const FACT_VALUE = 'Ann'
export const SAVE_FACT_ARGUMENTS = JSON.stringify({ key: FACT_KEY, value: FACT_VALUE })

export const RECEPTION_PROMPT = 'You greet customers and pass pricing questions to sales.'
export const SALES_PROMPT = 'You sell the pro plan.'
export const SUPPORT_PROMPT = 'You answer customers of the pro plan.'

/** The text the answering agent replies with; every contender checks it reached the customer. */
export const REPLY_TEXT = 'Hi Ann, the pro plan is 20 USD a month.'
