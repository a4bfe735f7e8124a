/*
 * A page of a session's messages ends at an insertion sequence; the cursor carries it, encoded so
 * that clients treat it as opaque and the storage's numbering can change without breaking them.
 */

export function encodeMessageCursor(sequence: number): string {
  return Buffer.from(JSON.stringify({ after: sequence })).toString('base64url')
}

/** Null when the cursor is not one this API handed out. */
export function decodeMessageCursor(cursor: string): number | null {
  try {
    const decoded: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (typeof decoded !== 'object' || decoded === null || !('after' in decoded)) return null
    const { after } = decoded
    return typeof after === 'number' && Number.isSafeInteger(after) && after >= 0 ? after : null
  } catch {
    return null
  }
}
