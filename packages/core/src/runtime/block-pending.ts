import type { MessageRole } from '../domain/session.js'
import type { Repositories } from '../ports/storage.js'

/**
 * Silences a session's outgoing messages of `roles` that have not left: they are marked blocked,
 * and those nobody is sending right now leave the outbox, so they hold back none of the session's
 * later messages (a turn's handoff announcement, an operator's message). One being sent still
 * finishes; its sender records it as sent.
 */
export async function blockPending(
  tx: Repositories,
  sessionId: string,
  roles: readonly MessageRole[],
  now: Date,
): Promise<void> {
  const blocked = await tx.messages.blockPending({ sessionId, roles })
  if (blocked.length > 0) await tx.outbox.removeWaiting({ sessionId, messageIds: blocked, now })
}
