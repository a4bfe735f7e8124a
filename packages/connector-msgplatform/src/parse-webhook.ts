/** The status hooks the platform sends about a customer's dialog. */
export const STATUS_HOOK_TYPES = ['close_dialog', 'close_request', 'dialog_transferred'] as const

export type StatusHookType = (typeof STATUS_HOOK_TYPES)[number]

/** A signed webhook body, understood: a customer message, a status hook, or why it is ignored. */
export type MsgPlatformWebhook =
  | {
      readonly kind: 'message'
      readonly clientId: string
      readonly channelId: string
      readonly transport: string
      readonly text: string
      /** The platform's id of the message, if it sent one. */
      readonly messageId?: string
    }
  | {
      readonly kind: 'status'
      readonly hookType: StatusHookType
      readonly clientId: string
      readonly operatorId?: string
      readonly dialogId?: string
    }
  | { readonly kind: 'ignored'; readonly reason: string }

/** Ids longer than this are not ids; they are dropped rather than stored. */
const ID_MAX = 500
/** Enough of an unknown hook type to recognise it in the webhook log. */
const HOOK_TYPE_EXCERPT = 60

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * Reads the raw bytes of a webhook whose signature was already checked. Never throws: a body
 * that cannot be used is `ignored` with a reason, because retrying the same bytes cannot help.
 */
export function parseMsgPlatformWebhook(rawBody: Uint8Array): MsgPlatformWebhook {
  let value: unknown
  try {
    value = JSON.parse(utf8.decode(rawBody))
  } catch {
    return ignored('body is not JSON')
  }
  return readMsgPlatformPayload(value)
}

/** The same as `parseMsgPlatformWebhook`, for a body already parsed as JSON. */
export function readMsgPlatformPayload(value: unknown): MsgPlatformWebhook {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return ignored('body is not a JSON object')
  }
  const body = value as Record<string, unknown>
  const hookType = body.hook_type
  if (hookType === undefined || hookType === null || hookType === 'inbox') return readMessage(body)
  if (typeof hookType === 'string' && isStatusHookType(hookType)) return readStatusHook(hookType, body)
  const shown = typeof hookType === 'string' ? hookType.slice(0, HOOK_TYPE_EXCERPT) : typeof hookType
  return ignored(`unsupported hook_type "${shown}"`)
}

function readMessage(body: Record<string, unknown>): MsgPlatformWebhook {
  const clientId = stringId(body.client_id)
  const channelId = stringId(body.channel_id)
  const transport = stringId(body.transport)
  const text = typeof body.text === 'string' ? body.text : undefined
  const missing = [
    text === undefined ? 'text' : null,
    clientId === undefined ? 'client_id' : null,
    channelId === undefined ? 'channel_id' : null,
    transport === undefined ? 'transport' : null,
  ].filter((field) => field !== null)
  if (missing.length > 0) return ignored(`missing or invalid fields: ${missing.join(', ')}`)
  if (text!.trim() === '') return ignored('text is empty')
  const messageId = identifier(body.message_id)
  return {
    kind: 'message',
    clientId: clientId!,
    channelId: channelId!,
    transport: transport!,
    text: text!,
    ...(messageId === undefined ? {} : { messageId }),
  }
}

function readStatusHook(hookType: StatusHookType, body: Record<string, unknown>): MsgPlatformWebhook {
  const clientId = stringId(body.client_id)
  if (clientId === undefined) return ignored('missing or invalid fields: client_id')
  const operatorId = identifier(body.operator_id)
  const dialogId = identifier(body.dialog_id)
  return {
    kind: 'status',
    hookType,
    clientId,
    ...(operatorId === undefined ? {} : { operatorId }),
    ...(dialogId === undefined ? {} : { dialogId }),
  }
}

/**
 * A non-empty string of at most `ID_MAX` characters. The customer's ids are sent back verbatim in
 * replies, so they are taken only as the strings the contract names, never converted.
 */
function stringId(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' && value.length <= ID_MAX ? value : undefined
}

/**
 * A platform id that is only read, never sent back, as a string. Numbers are accepted too (many platforms number their operators and
 * messages) and kept in their JSON spelling; anything else is absent.
 */
function identifier(value: unknown): string | undefined {
  if (typeof value === 'string') return stringId(value)
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
  return undefined
}

function isStatusHookType(value: string): value is StatusHookType {
  return (STATUS_HOOK_TYPES as readonly string[]).includes(value)
}

function ignored(reason: string): MsgPlatformWebhook {
  return { kind: 'ignored', reason }
}
