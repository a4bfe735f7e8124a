import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseClientFrame } from './frames.js'

describe('client frames', () => {
  it('read a message frame and a history frame', () => {
    expect(parseClientFrame('{"type":"message","text":"hi","clientMessageId":"a"}')).toEqual({
      ok: true,
      frame: { type: 'message', text: 'hi', clientMessageId: 'a' },
    })
    expect(parseClientFrame('{"type":"history"}')).toEqual({ ok: true, frame: { type: 'history' } })
  })

  it('count characters, not UTF-16 units, against the 4000 limit', () => {
    expect(parseClientFrame(JSON.stringify({ type: 'message', text: '😀'.repeat(4000) })).ok).toBe(true)
    expect(parseClientFrame(JSON.stringify({ type: 'message', text: '😀'.repeat(4001) })).ok).toBe(false)
  })

  it('describe, never throw on, anything else', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.json(),
          fc.jsonValue().map((value) => JSON.stringify(value)),
        ),
        (data) => {
          const parsed = parseClientFrame(data)
          if (!parsed.ok) expect(parsed.message).toMatch(/\S/)
        },
      ),
    )
  })
})
