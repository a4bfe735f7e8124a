import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createAgentService, defineTool } from '../src/index.js'
import type { ModelMessage } from '../src/ports/llm-provider.js'
import {
  type ConversationHarness,
  createConversationHarness,
  createScriptedModel,
  type HarnessAgent,
  type RecordedRequest,
  type ScriptedModel,
} from '../src/testing/index.js'
import {
  APP_TOOL,
  CLOCK_STEP_MS,
  type ExpectedConversationMessage,
  type ExpectedOutcome,
  type ExpectedRequest,
  type ExpectedSession,
  type ExpectedSharedContext,
  type ExpectedTransfer,
  type OperatorAction,
  runOracle,
} from './support/team-oracle.js'
import { type Team, type TokenCount, teamArbitrary, teamScriptArbitrary } from './support/team-script.js'

/**
 * Entry routing and handoff chains of random teams (support/team-script.ts), answered by random
 * classifier and model scripts reporting random token counts, with an operator reassigning,
 * resuming, writing, closing, editing agents or changing the company's small balance between the
 * customer's messages, against an oracle written from the contract's words
 * (support/team-oracle.ts): what each session records (path, routing, active agent, errors, SCC,
 * state, timestamps), what is stored, sent and transferred, what each call is charged and the
 * balance after each message, and what each model call is for and is given. TEAM_ORACLE_RUNS
 * explores further (a few milliseconds a run).
 */
const RUNS = Number(process.env.TEAM_ORACLE_RUNS ?? 150)

const lookupOrder = defineTool({
  name: APP_TOOL,
  description: 'Find an order by its number.',
  parameters: z.object({ orderNumber: z.string() }),
  execute: () => ({ status: 'shipped' }),
})

const TRANSFER_FAILURE = 'the platform refused the transfer'

const keyOf = (index: number) => `agent-${index}`

/** The scripted model, its calls reporting the script's token counts in turn rather than its fixed ones. */
function reportingTokens(model: ScriptedModel, tokens: readonly TokenCount[]): ScriptedModel {
  return {
    ...model,
    async complete(request) {
      // The scripted model records the request as the call starts: this call's number.
      const call = model.requests.length
      const completion = await model.complete(request)
      return { ...completion, usage: { ...tokens[call % tokens.length]! } }
    },
  }
}

function harnessAgents(team: Team): Record<string, HarnessAgent> {
  return Object.fromEntries(
    team.agents.map((agent, index): [string, HarnessAgent] => {
      const { handoff, routing } = agent
      return [
        keyOf(index),
        {
          name: agent.name,
          ...(agent.role === undefined ? {} : { role: agent.role }),
          kind: agent.kind,
          llmModel: agent.llmModel,
          ...(agent.routingModel === undefined ? {} : { routingModel: agent.routingModel }),
          maxDepth: agent.maxDepth,
          ...(agent.fallbackReply === undefined ? {} : { fallbackReply: agent.fallbackReply }),
          ...(routing === undefined
            ? {}
            : {
                routingConfig: {
                  enabled: routing.enabled,
                  routes: routing.routes.map((route) => ({
                    id: route.id,
                    agent: keyOf(route.target),
                    description: `questions for agent ${route.target}`,
                  })),
                  confidenceThreshold: routing.threshold,
                },
              }),
          handoff: {
            enabled: handoff.enabled,
            allowedTargets: handoff.allowedTargets.map(keyOf),
            announceHandoff: handoff.announceHandoff,
            handoffMessageTemplate: handoff.template,
            messageHistoryDepth: handoff.messageHistoryDepth,
            msgplatform: {
              ...(handoff.operatorId === undefined ? {} : { targetOperatorId: handoff.operatorId }),
              ...(handoff.groupId === undefined ? {} : { targetGroupId: handoff.groupId }),
              sendSystemMessage: handoff.sendSystemMessage,
            },
          },
        },
      ]
    }),
  )
}

/**
 * The SCC of a system prompt's `## Shared context` section (CONTRACT §10 layout): `key: value`
 * lines, then `- <at> <step>` lines.
 */
function promptSharedContext(prompt: string): ExpectedSharedContext {
  const section = prompt.split('## Shared context\n')[1]?.split('\n\n')[0] ?? ''
  const facts: Record<string, string> = {}
  const journey: string[] = []
  for (const line of section.split('\n')) {
    if (line === '(empty)' || line === '') continue
    if (line.startsWith('- ')) {
      journey.push(line.slice(2))
      continue
    }
    const separator = line.indexOf(': ')
    facts[line.slice(0, separator)] = line.slice(separator + 2)
  }
  return { facts, journey }
}

function conversationOf(messages: readonly ModelMessage[]): ExpectedConversationMessage[] {
  return messages.slice(1).map((message): ExpectedConversationMessage => {
    if (message.role === 'tool') {
      // Handoff call ids start with `h-`: a result the model sees for one must say it failed.
      return message.toolCallId.startsWith('h-')
        ? {
            role: 'tool',
            toolCallId: message.toolCallId,
            ...(/error/i.test(message.content) ? { handoffRejected: true } : {}),
          }
        : { role: 'tool', toolCallId: message.toolCallId }
    }
    if (message.role === 'assistant' && message.toolCalls !== undefined && message.toolCalls.length > 0) {
      return {
        role: 'assistant',
        content: message.content,
        toolCallIds: message.toolCalls.map((call) => call.id),
      }
    }
    return { role: message.role === 'system' ? 'assistant' : message.role, content: message.content }
  })
}

function requestOf(request: RecordedRequest, expected: ExpectedRequest | undefined): unknown {
  const agentId = request.agentId ?? -1
  if (request.purpose === 'route') {
    return {
      purpose: 'route',
      agentId,
      model: request.model,
      format: request.responseFormat?.jsonSchema.name,
      classifies: request.messages.find((message) => message.role === 'user')?.content,
    }
  }
  const system = request.messages[0]
  return {
    purpose: 'turn',
    agentId,
    model: request.model,
    tools: (request.tools ?? []).map((tool) => tool.name).sort(),
    conversation: system?.role === 'system' ? conversationOf(request.messages) : ['no system message first'],
    ...(expected?.purpose === 'turn' && expected.sharedContext !== undefined && system?.role === 'system'
      ? { sharedContext: promptSharedContext(system.content) }
      : {}),
  }
}

async function observeSession(
  harness: ConversationHarness,
  sessionId: string,
  expected: ExpectedSession | undefined,
): Promise<ExpectedSession> {
  const session = (await harness.storage.sessions.get({ id: sessionId }))!
  const stored = await harness.storage.messages.list({ sessionId, limit: 10_000 })
  const { metadata } = session
  const errors = metadata.errors.map((error) => ({
    code: error.code,
    agentId: error.agentId ?? -1,
    at: error.at,
  }))
  // What the contract leaves open after routing to a human is taken as expected.
  const routedToHuman = expected?.routedToHuman ?? false
  return {
    stored: stored.map((message) => ({
      role: message.role as 'customer' | 'agent' | 'system' | 'operator',
      text: message.text,
      ...(message.role === 'agent' ? { agentId: message.agentId ?? -1 } : {}),
      at: message.at,
      ...(message.role === 'customer' ? {} : { delivery: message.delivery as 'sent' }),
    })),
    agentPath: metadata.agentPath.map((entry) => ({
      via: entry.via as 'initial',
      agentId: entry.agentId,
      agentName: entry.agentName,
      timestamp: entry.timestamp,
      role: entry.role,
      depth: entry.depth,
      confidence: entry.confidence,
      routeId: entry.routeId,
      reason: entry.reason,
    })),
    ...(metadata.routing === undefined
      ? {}
      : {
          routing: {
            reason: metadata.routing.reason,
            depth: metadata.routing.depth,
            at: metadata.routing.at,
          },
        }),
    activeAgentId: session.activeAgentId,
    errors: routedToHuman ? errors.filter((error) => error.code !== 'HUMAN_TRANSFER_UNSUPPORTED') : errors,
    sharedContext: {
      facts: { ...metadata.sharedContext.facts },
      journey: metadata.sharedContext.journey.map((entry) => `${entry.at} ${entry.step}`),
    },
    routedToHuman,
    state: routedToHuman && expected?.state !== 'closed' ? expected!.state : session.state,
    ...(expected?.pauseReason === undefined
      ? {}
      : {
          pauseReason: session.pauseState?.reason?.includes(TRANSFER_FAILURE)
            ? expected.pauseReason
            : (`reason ${JSON.stringify(session.pauseState?.reason)}` as 'names the transfer failure'),
        }),
  }
}

async function observe(
  harness: ConversationHarness,
  sessionIds: readonly string[],
  balances: readonly number[],
  expected: ExpectedOutcome,
): Promise<ExpectedOutcome> {
  const routedToHuman = sessionIds.filter((_, index) => expected.sessions[index]?.routedToHuman === true)
  return {
    requests: harness.model.requests.map((request, index) =>
      requestOf(request, expected.requests[index]),
    ) as ExpectedRequest[],
    sent: harness.connector.sent.map((sent) => ({
      role: sent.role as 'agent' | 'system' | 'operator',
      text: sent.text,
    })),
    transfers: harness.connector.transfers
      .filter((transfer) => !routedToHuman.includes(transfer.sessionId))
      .map((transfer): ExpectedTransfer => {
        const named = transfer.operatorId !== undefined || transfer.groupId !== undefined
        return {
          ...(transfer.operatorId === undefined ? {} : { operatorId: transfer.operatorId }),
          ...(transfer.groupId === undefined ? {} : { groupId: transfer.groupId }),
          ...(named ? { systemMessage: transfer.systemMessage } : {}),
          sentBefore: transfer.sentBefore,
          session: sessionIds.indexOf(transfer.sessionId),
        }
      }),
    usage: (await harness.storage.billing.listUsage({ companyId: harness.companyId, limit: 1000 })).items
      .map(
        (record) =>
          `${sessionIds.indexOf(record.sessionId)} ${record.model} ${record.inputTokens} ${record.outputTokens} ${record.costUsd}`,
      )
      .sort(),
    balances,
    balance: await harness.storage.billing.getBalance({ companyId: harness.companyId }),
    sessions: await Promise.all(
      sessionIds.map((sessionId, index) => observeSession(harness, sessionId, expected.sessions[index])),
    ),
  }
}

function operate(harness: ConversationHarness, sessionId: string, action: OperatorAction) {
  const target = { companyId: harness.companyId, sessionId }
  const { sessions } = harness.switchboard
  switch (action.kind) {
    case 'reassign':
      return sessions.reassign({ ...target, agentId: action.agentId, operatorId: action.operatorId })
    case 'resume':
      return sessions.resume({ ...target, note: action.note })
    case 'operator-message':
      return sessions.sendOperatorMessage({ ...target, text: action.text })
    case 'close':
      return sessions.close(target)
    case 'edit':
      return createAgentService({ storage: harness.storage, clock: harness.clock }).update(
        harness.companyId,
        action.agentId,
        action.patch,
      )
  }
}

describe('teams against an oracle of the contract', () => {
  it(
    'routes, hands off, answers, transfers and charges as CONTRACT §8 to §10 word them, between operator actions',
    async () => {
      await fc.assert(
        fc.asyncProperty(teamArbitrary, teamScriptArbitrary, async (team, script) => {
          const harness = await createConversationHarness({
            agents: harnessAgents(team),
            entry: keyOf(0),
            humanTransfer: team.humanTransfer,
            tools: [lookupOrder],
            model: reportingTokens(createScriptedModel(), script.tokens),
            ...(team.creditsNanos === undefined ? {} : { creditsUsd: team.creditsNanos / 1e9 }),
          })
          const problems: string[] = []
          let observed: ExpectedOutcome | undefined
          let expected: ExpectedOutcome | undefined
          try {
            const ids = team.agents.map((_, index) => harness.agent(keyOf(index)))
            const oracle = runOracle(team, script, ids, harness.clock.now())
            expected = oracle.expected
            if (team.transferFails) harness.connector.failNextTransfer(TRANSFER_FAILURE)
            const customer = harness.customer()
            const sessionIds: string[] = []
            const balances: number[] = []
            for (const [index, text] of oracle.texts.entries()) {
              for (const { agentId, step } of oracle.steps[index]!) harness.model.script(agentId, step)
              await harness.clock.advance(CLOCK_STEP_MS)
              await customer.says(text).catch((error: Error) => problems.push(error.message))
              const sessionId = (await customer.session()).id
              if (!sessionIds.includes(sessionId)) sessionIds.push(sessionId)
              balances.push(await harness.storage.billing.getBalance({ companyId: harness.companyId }))
              await harness.clock.advance(CLOCK_STEP_MS)
              const action = oracle.actions[index]
              if (action !== null && action !== undefined) {
                const done = await operate(harness, sessionId, action)
                if (done.isErr()) problems.push(`${action.kind}: ${done.error.code} ${done.error.message}`)
                await harness.switchboard.idle()
              }
              const topUp = oracle.topUps[index]
              if (topUp !== null && topUp !== undefined) {
                await harness.storage.billing.adjust({
                  companyId: harness.companyId,
                  amountUsd: topUp,
                  at: harness.clock.now(),
                })
              }
            }
            observed = await observe(harness, sessionIds, balances, expected)
          } finally {
            await harness.finish().catch((error: Error) => problems.push(error.message))
          }
          expect({ ...observed, problems }).toEqual({ ...expected, problems: [] })
        }),
        // A run that hangs (idle never resolving, say) fails as a counterexample of its own.
        { numRuns: RUNS, timeout: 5_000 },
      )
    },
    20_000 + RUNS * 50,
  )
})
