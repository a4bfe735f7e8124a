import { describe, expect, it } from 'vitest'
import { trimSchedule } from './trim-schedule.js'

describe('the trim schedule', () => {
  it('trims each integration once every 64 of its own rows, however many integrations write in turn', () => {
    const schedule = trimSchedule(64)
    const integrations = Array.from({ length: 100 }, (_, index) => String(index + 1))
    const trims = new Map<string, number>()
    for (let round = 0; round < 640; round++) {
      for (const integrationId of integrations) {
        if (schedule.due(integrationId)) trims.set(integrationId, (trims.get(integrationId) ?? 0) + 1)
      }
    }
    // 640 rows each: ten trims each, not 640 (a counter shared by 64 or more integrations trimmed
    // on every row) and not none (`insertion % 64` skipped integrations that drew only odd numbers).
    expect([...new Set(trims.values())]).toEqual([10])
    expect(trims.size).toBe(100)
  })

  it('counts the rows of a batch together', () => {
    const schedule = trimSchedule(64)
    expect(schedule.due('1', 40)).toBe(false)
    expect(schedule.due('1', 30)).toBe(true)
    expect(schedule.due('1', 63)).toBe(false)
    expect(schedule.due('1')).toBe(true)
  })
})
