import {
  Agent,
  type AgentOutputItem,
  handoff,
  type Model,
  type ModelRequest,
  type ModelResponse,
  run,
  type StreamEvent,
  setTracingDisabled,
  tool,
  Usage,
} from '@openai/agents'
import { z } from 'zod'
import { type Contender, expectEqual } from './contender.js'
import {
  CUSTOMER_TEXT,
  FACT_KEY,
  FACT_VALUE,
  RECEPTION_PROMPT,
  REPLY_TEXT,
  SALES_PROMPT,
  SAVE_FACT_ARGUMENTS,
  type Scenario,
  SUPPORT_PROMPT,
} from './scenario.js'

interface BenchContext {
  readonly facts: Record<string, string>
}

/**
 * The same conversations on @openai/agents: the SDK's own runner, tools and handoffs, with a
 * `Model` that answers at once. Tracing is off, so nothing leaves the process.
 */
export function createOpenAiAgentsContender(scenario: Scenario): Contender {
  // Tracing would export spans over the network; a bench run must stay offline.
  setTracingDisabled(true)
  return {
    label: '@openai/agents 0.14.3',
    scenario: scenario.name,
    role: 'openai-agents',
    async open() {
      const entry = scenario.delegates ? createDelegatingTeam() : createSupportAgent()
      let lastContext: BenchContext | null = null
      let lastAgentName: string | undefined
      let lastOutput: unknown
      let finished = 0
      return {
        async run(first, count) {
          for (let index = first; index < first + count; index++) {
            const context: BenchContext = { facts: {} }
            const result = await run(entry, CUSTOMER_TEXT, { context })
            lastContext = context
            lastAgentName = result.lastAgent?.name
            lastOutput = result.finalOutput
            finished += 1
          }
        },
        async verify(turns) {
          expectEqual('runs finished', finished, turns)
          expectEqual('last reply', lastOutput, REPLY_TEXT)
          if (scenario.delegates) {
            expectEqual('active agent', lastAgentName, 'sales')
            expectEqual('saved fact', lastContext?.facts[FACT_KEY], FACT_VALUE)
          }
        },
        async close() {},
      }
    },
  }
}

function createSupportAgent(): Agent<BenchContext> {
  return new Agent<BenchContext>({
    name: 'support',
    instructions: SUPPORT_PROMPT,
    model: new ZeroLatencyAgentsModel('reply'),
  })
}

function createDelegatingTeam(): Agent<BenchContext> {
  const sales = new Agent<BenchContext>({
    name: 'sales',
    instructions: SALES_PROMPT,
    model: new ZeroLatencyAgentsModel('reply'),
  })
  const saveFact = tool({
    name: 'save_fact',
    description: 'Remember a fact about the customer for every agent of this conversation.',
    parameters: z.object({ key: z.string(), value: z.string() }),
    execute: ({ key, value }, runContext) => {
      const facts = (runContext?.context as BenchContext | undefined)?.facts
      if (facts !== undefined) facts[key] = value
      return 'saved'
    },
  })
  return new Agent<BenchContext>({
    name: 'reception',
    instructions: RECEPTION_PROMPT,
    model: new ZeroLatencyAgentsModel('save-fact-then-handoff'),
    tools: [saveFact],
    handoffs: [handoff(sales, { toolNameOverride: 'handoff_to_agent' })],
  })
}

/**
 * Answers by behaviour, like the Switchboard bench model answers by agent id. It builds a fresh
 * response on every call, so runs never share response objects: the SDK keeps the items in its
 * run state and results.
 */
class ZeroLatencyAgentsModel implements Model {
  constructor(private readonly behaviour: 'reply' | 'save-fact-then-handoff') {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    return {
      usage: new Usage({ requests: 1, inputTokens: 10, outputTokens: 5, totalTokens: 15 }),
      output: this.answer(request),
    }
  }

  getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error('bench: the core-turn bench never streams')
  }

  private answer(request: ModelRequest): AgentOutputItem[] {
    if (this.behaviour === 'reply') {
      return [
        {
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: REPLY_TEXT }],
        },
      ]
    }
    // The first call sees only the customer message; the second also sees save_fact's result.
    const input = request.input
    const last = typeof input === 'string' ? undefined : input[input.length - 1]
    if (last?.type === 'function_call_result') {
      return [
        {
          type: 'function_call',
          callId: 'call_handoff',
          name: 'handoff_to_agent',
          arguments: '{}',
          status: 'completed',
        },
      ]
    }
    return [
      {
        type: 'function_call',
        callId: 'call_save_fact',
        name: 'save_fact',
        arguments: SAVE_FACT_ARGUMENTS,
        status: 'completed',
      },
    ]
  }
}
