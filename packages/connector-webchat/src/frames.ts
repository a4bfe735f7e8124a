import type { ErrorCode, Message, MessageRole, SessionState } from '@switchboard/core'
import { z } from 'zod'

/** Longest `text` of a customer's message frame, in characters. */
export const MAX_MESSAGE_CHARACTERS = 4000
/** Longest frame a client may send; a longer one closes the connection with 1009. */
export const MAX_FRAME_BYTES = 64 * 1024
/** Longest `clientMessageId`; it is the message's idempotency key, not content. */
const MAX_CLIENT_MESSAGE_ID_LENGTH = 100

export interface SessionFrame {
  readonly type: 'session'
  readonly sessionId: string
  readonly visitorToken: string
  readonly state: SessionState
}

export interface AckFrame {
  readonly type: 'ack'
  /** Absent when the client's message frame had none. */
  readonly clientMessageId?: string
  readonly messageId: string
}

export interface MessageFrame {
  readonly type: 'message'
  readonly messageId: string
  readonly role: MessageRole
  readonly text: string
  readonly agentId?: number
  readonly at: string
}

export interface TypingFrame {
  readonly type: 'typing'
  readonly on: boolean
}

export interface StateFrame {
  readonly type: 'state'
  readonly state: SessionState
}

export interface ErrorFrame {
  readonly type: 'error'
  readonly code: ErrorCode
  readonly message: string
}

/** Every frame the server sends. */
export type ServerFrame = SessionFrame | AckFrame | MessageFrame | TypingFrame | StateFrame | ErrorFrame

export function messageFrame(message: Message): MessageFrame {
  return {
    type: 'message',
    messageId: message.id,
    role: message.role,
    text: message.text,
    ...(message.agentId === undefined ? {} : { agentId: message.agentId }),
    at: message.at,
  }
}

const text = z
  .string()
  // 1..4000 characters as CONTRACT §7 counts them: a space is one.
  .min(1, 'must not be empty')
  // Characters, not UTF-16 units: an emoji counts once.
  .refine(
    (value) => value.length <= MAX_MESSAGE_CHARACTERS || [...value].length <= MAX_MESSAGE_CHARACTERS,
    `must be at most ${MAX_MESSAGE_CHARACTERS} characters`,
  )

const clientFrameSchema = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('message'),
    text,
    clientMessageId: z.string().min(1).max(MAX_CLIENT_MESSAGE_ID_LENGTH).optional(),
  }),
  z.object({ type: z.literal('history'), since: z.string().min(1).max(100).optional() }),
])

/** A frame a client may send. */
export type ClientFrame = z.output<typeof clientFrameSchema>

export type ParsedClientFrame =
  | { readonly ok: true; readonly frame: ClientFrame }
  | { readonly ok: false; readonly message: string }

/** Reads one client frame; anything else is described for a `VALIDATION_ERROR` frame. */
export function parseClientFrame(data: string): ParsedClientFrame {
  let json: unknown
  try {
    json = JSON.parse(data)
  } catch {
    return { ok: false, message: 'a frame must be a JSON object' }
  }
  const parsed = clientFrameSchema.safeParse(json)
  if (parsed.success) return { ok: true, frame: parsed.data }
  const problems = parsed.error.issues.map((issue) =>
    issue.path.length === 0 ? issue.message : `${issue.path.join('.')}: ${issue.message}`,
  )
  const type =
    typeof json === 'object' && json !== null && 'type' in json ? (json as { type: unknown }).type : undefined
  if (type !== 'message' && type !== 'history') {
    return { ok: false, message: 'a frame needs a "type" of "message" or "history"' }
  }
  return { ok: false, message: `invalid ${type} frame: ${problems.join('; ')}` }
}
