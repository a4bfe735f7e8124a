import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { isoTimestamp, timeOfIsoTimestamp } from './iso-timestamp.js'

describe('isoTimestamp', () => {
  it('formats any instant as toISOString does, whatever came before', () => {
    const instant = fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true })
    fc.assert(
      fc.property(fc.array(instant, { minLength: 1, maxLength: 5 }), (dates) => {
        for (const date of dates) expect(isoTimestamp(date)).toBe(date.toISOString())
      }),
    )
  })

  it('throws on an invalid date, then still formats the last valid one', () => {
    const at = new Date('2026-01-02T03:04:05.678Z')
    expect(isoTimestamp(at)).toBe('2026-01-02T03:04:05.678Z')
    expect(() => isoTimestamp(new Date(Number.NaN))).toThrow(RangeError)
    expect(isoTimestamp(new Date(at.getTime()))).toBe('2026-01-02T03:04:05.678Z')
  })

  it('reads a timestamp back as Date.parse does, whether or not it is the last one formatted', () => {
    const instant = fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true })
    const text = fc.oneof(
      instant.map((date) => date.toISOString()),
      fc.string(),
    )
    fc.assert(
      fc.property(fc.array(instant, { maxLength: 3 }), text, (formatted, read) => {
        for (const date of formatted) isoTimestamp(date)
        expect(timeOfIsoTimestamp(read)).toBe(Date.parse(read))
        const last = formatted[formatted.length - 1]
        if (last !== undefined) expect(timeOfIsoTimestamp(isoTimestamp(last))).toBe(last.getTime())
      }),
    )
  })
})
