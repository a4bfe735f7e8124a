import { EXTERNAL_REFERENCE_MAX, PAUSE_REASON_MAX, type Session, truncate } from '../domain/session.js'
import type { HumanTransferTarget } from '../handoff/human-transfer.js'
import { supportsHumanTransfer } from '../ports/connector.js'
import type { RuntimeContext } from './runtime-context.js'
import { updateSession } from './update-session.js'

/**
 * Calls the channel's transfer to a human for a session that is already paused, then records the
 * outcome on its pauseState: the platform's reference on success, the failure text otherwise. The
 * session stays paused either way.
 */
export async function transferToHuman(
  context: RuntimeContext,
  session: Session,
  target: HumanTransferTarget,
): Promise<Session> {
  const integration = await context.storage.integrations.get({ id: session.integrationId })
  const connector = integration === null ? undefined : context.connectors.get(integration.type)
  if (integration === null || connector === undefined || !supportsHumanTransfer(connector)) return session

  let note: { reason?: string; externalReference?: string }
  try {
    const outcome = await connector.transferToHuman({
      integration,
      session,
      ...(target.operatorId === undefined ? {} : { operatorId: target.operatorId }),
      ...(target.groupId === undefined ? {} : { groupId: target.groupId }),
      systemMessage: target.systemMessage,
    })
    note = outcome.ok
      ? outcome.externalReference === undefined
        ? {}
        : { externalReference: truncate(outcome.externalReference, EXTERNAL_REFERENCE_MAX) }
      : { reason: truncate(`transfer to a human failed: ${outcome.error}`, PAUSE_REASON_MAX) }
  } catch (error) {
    const text = error instanceof Error ? error.message : String(error)
    note = { reason: truncate(`transfer to a human failed: ${text}`, PAUSE_REASON_MAX) }
  }
  if (note.reason === undefined && note.externalReference === undefined) return session

  const updated = await updateSession(context.storage, { sessionId: session.id }, async (current) => {
    if (current.state !== 'paused' || current.pauseState === undefined)
      return { session: current, value: null }
    return {
      session: {
        ...current,
        pauseState: { ...current.pauseState, ...note },
        updatedAt: context.clock.now().toISOString(),
      },
      value: null,
    }
  })
  return updated.isOk() ? updated.value.session : session
}
