import { describe, expect, it } from 'vitest'
import { createRandomIds } from './system-clock.js'

const VERSION_4_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe('createRandomIds', () => {
  it('makes version 4 UUIDs, none twice, across several refills of its random bytes', () => {
    const ids = createRandomIds()
    const made = Array.from({ length: 2000 }, () => ids.uuid())
    for (const id of made) expect(id).toMatch(VERSION_4_UUID)
    expect(new Set(made).size).toBe(made.length)
  })

  it('leaves every random digit random: each of the 16 values shows up at each such place', () => {
    const ids = createRandomIds()
    const made = Array.from({ length: 3000 }, () => ids.uuid())
    for (let position = 0; position < 36; position++) {
      if ([8, 13, 14, 18, 19, 23].includes(position)) continue
      expect(new Set(made.map((id) => id[position])).size).toBe(16)
    }
  })

  it('gives each generator its own sequence', () => {
    const first = createRandomIds()
    const second = createRandomIds()
    expect(first.uuid()).not.toBe(second.uuid())
  })
})
