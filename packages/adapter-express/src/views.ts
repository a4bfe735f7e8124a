import type {
  Agent,
  HandoffConfig,
  Message,
  PauseState,
  RoutingConfig,
  Session,
  UsageRecord,
  WebhookLog,
} from '@switchboard/core'

/*
 * The JSON shapes of CONTRACT §4, §5, §8 and §9. Each lists its fields one by one, so a field
 * added to a stored record (a company id, a version) never reaches a client by accident, and the
 * keys come in the same order whatever the storage: PostgreSQL's jsonb hands an object's keys back
 * in an order of its own (shorter keys first), the memory storage in the order they were written.
 */

function handoffView(handoff: HandoffConfig) {
  const { msgplatform } = handoff
  return {
    enabled: handoff.enabled,
    allowedTargets: handoff.allowedTargets,
    announceHandoff: handoff.announceHandoff,
    handoffMessageTemplate: handoff.handoffMessageTemplate,
    messageHistoryDepth: handoff.messageHistoryDepth,
    msgplatform: {
      ...(msgplatform.targetOperatorId === undefined
        ? {}
        : { targetOperatorId: msgplatform.targetOperatorId }),
      ...(msgplatform.targetGroupId === undefined ? {} : { targetGroupId: msgplatform.targetGroupId }),
      sendSystemMessage: msgplatform.sendSystemMessage,
    },
  }
}

function routingConfigView(routingConfig: RoutingConfig) {
  return {
    enabled: routingConfig.enabled,
    routes: routingConfig.routes.map((route) => ({
      id: route.id,
      agentId: route.agentId,
      description: route.description,
    })),
    confidenceThreshold: routingConfig.confidenceThreshold,
  }
}

function pauseStateView(pauseState: PauseState) {
  return {
    pausedAt: pauseState.pausedAt,
    ...(pauseState.reason === undefined ? {} : { reason: pauseState.reason }),
    ...(pauseState.externalReference === undefined
      ? {}
      : { externalReference: pauseState.externalReference }),
  }
}

export function agentView(agent: Agent) {
  return {
    id: agent.id,
    name: agent.name,
    ...(agent.role === undefined ? {} : { role: agent.role }),
    kind: agent.kind,
    systemPrompt: agent.systemPrompt,
    llmModel: agent.llmModel,
    ...(agent.routingModel === undefined ? {} : { routingModel: agent.routingModel }),
    ...(agent.routingConfig === undefined ? {} : { routingConfig: routingConfigView(agent.routingConfig) }),
    maxDepth: agent.maxDepth,
    handoff: handoffView(agent.handoff),
    fallbackReply: agent.fallbackReply,
    createdAt: agent.createdAt,
    updatedAt: agent.updatedAt,
  }
}

/** `pauseState` only while paused (CONTRACT §8). */
function pauseStateOf(session: Session) {
  return session.state === 'paused' && session.pauseState !== undefined
    ? { pauseState: pauseStateView(session.pauseState) }
    : {}
}

export function sessionView(session: Session) {
  const { customer, metadata } = session
  return {
    id: session.id,
    state: session.state,
    activeAgentId: session.activeAgentId,
    integrationId: session.integrationId,
    customer: {
      clientId: customer.clientId,
      // Every key of CONTRACT §8's shape, null on a channel without them (webchat).
      channelId: customer.channelId ?? null,
      transport: customer.transport ?? null,
    },
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    metadata: {
      agentPath: metadata.agentPath,
      sharedContext: metadata.sharedContext,
      ...(metadata.routing === undefined ? {} : { routing: metadata.routing }),
      errors: metadata.errors,
    },
    ...pauseStateOf(session),
  }
}

export function sessionStatusView(session: Session) {
  return {
    id: session.id,
    state: session.state,
    activeAgentId: session.activeAgentId,
    ...pauseStateOf(session),
  }
}

export function sessionContextView(session: Session) {
  return {
    sharedContext: session.metadata.sharedContext,
    agentPath: session.metadata.agentPath,
    ...(session.metadata.routing === undefined ? {} : { routing: session.metadata.routing }),
  }
}

export function messageView(message: Message) {
  return {
    id: message.id,
    role: message.role,
    text: message.text,
    ...(message.agentId === undefined ? {} : { agentId: message.agentId }),
    at: message.at,
    ...(message.delivery === undefined ? {} : { delivery: message.delivery }),
  }
}

export function webhookLogView(log: WebhookLog) {
  return {
    id: log.id,
    receivedAt: log.receivedAt,
    httpStatus: log.httpStatus,
    outcome: log.outcome,
    ...(log.reason === undefined ? {} : { reason: log.reason }),
    ...(log.sessionId === undefined ? {} : { sessionId: log.sessionId }),
    ...(log.messageId === undefined ? {} : { messageId: log.messageId }),
  }
}

export function usageView(usage: UsageRecord) {
  return {
    id: usage.id,
    at: usage.at,
    model: usage.model,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    costUsd: usage.costUsd,
    sessionId: usage.sessionId,
  }
}
