import { z } from 'zod'
import type { Agent, Route } from '../domain/agent.js'
import { chargeableUsage } from '../models/model-answer.js'
import {
  type Classification,
  type LlmProvider,
  type ResponseFormat,
  supportsClassify,
} from '../ports/llm-provider.js'

export const ROUTE_DECISION_FORMAT: ResponseFormat = {
  type: 'json_schema',
  jsonSchema: {
    name: 'route_decision',
    schema: {
      type: 'object',
      properties: {
        routeId: { type: ['string', 'null'] },
        confidence: { type: 'number', minimum: 0, maximum: 1 },
      },
      required: ['routeId', 'confidence'],
      additionalProperties: false,
    },
  },
}

const decisionSchema = z.object({ routeId: z.string().nullable(), confidence: z.number().min(0).max(1) })

function routingPrompt(agent: Agent, routes: readonly Route[]): string {
  const lines = routes.map((route) => `- ${route.id}: ${route.description}`)
  return [
    agent.systemPrompt,
    'Classify the customer message into one of these routes. Answer with the routeId of the best route and your confidence from 0 to 1, or null when none fits.',
    ...lines,
  ]
    .filter((part) => part !== '')
    .join('\n')
}

/**
 * Asks the agent's routing model which route fits. Unparseable content is a classification with
 * no route; a failing model throws, and the caller treats it like an unsure classifier.
 */
export async function classifyMessage(
  model: LlmProvider,
  agent: Agent,
  routes: readonly Route[],
  text: string,
): Promise<Classification> {
  const routingModel = agent.routingModel ?? agent.llmModel
  if (supportsClassify(model)) {
    const classification = await model.classify({
      model: routingModel,
      text,
      routes: routes.map((route) => ({ id: route.id, description: route.description })),
      agentId: agent.id,
    })
    const { routeId, confidence } = classification
    const usage = chargeableUsage(classification.usage)
    const wellFormedRoute = typeof routeId === 'string' || routeId === null
    if (!wellFormedRoute || typeof confidence !== 'number' || !(confidence >= 0 && confidence <= 1)) {
      return { routeId: null, confidence: 0, usage }
    }
    return usage === classification.usage ? classification : { routeId, confidence, usage }
  }
  const completion = await model.complete({
    model: routingModel,
    messages: [
      { role: 'system', content: routingPrompt(agent, routes) },
      { role: 'user', content: text },
    ],
    responseFormat: ROUTE_DECISION_FORMAT,
    agentId: agent.id,
  })
  const usage = chargeableUsage(completion.usage)
  let content: unknown
  try {
    content = typeof completion.text === 'string' ? JSON.parse(completion.text) : undefined
  } catch {
    return { routeId: null, confidence: 0, usage }
  }
  const decision = decisionSchema.safeParse(content)
  if (!decision.success) return { routeId: null, confidence: 0, usage }
  return { ...decision.data, usage }
}
