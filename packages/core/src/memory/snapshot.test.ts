import { describe, expect, it } from 'vitest'
import { snapshot } from './snapshot.js'

describe('snapshot', () => {
  it('copies deeply, freezes every level and drops undefined keys', () => {
    const input = { name: 'Ann', note: undefined, tags: ['a'], nested: { count: 1, gone: undefined } }

    const copy = snapshot(input)

    expect(copy).toEqual({ name: 'Ann', tags: ['a'], nested: { count: 1 } })
    expect(Object.keys(copy)).not.toContain('note')
    expect(Object.keys(copy.nested)).not.toContain('gone')
    expect(copy.tags).not.toBe(input.tags)
    expect(Object.isFrozen(copy) && Object.isFrozen(copy.tags) && Object.isFrozen(copy.nested)).toBe(true)
  })

  it('copies a frozen object the caller made, whose insides the caller can still change', () => {
    const inside = { count: 1 }
    const copy = snapshot({ outer: Object.freeze({ inside }) })

    inside.count = 2
    expect(copy.outer.inside.count).toBe(1)
  })

  it('keeps the parts carried over from the snapshot it replaces and copies the rest', () => {
    const previous = snapshot({ customer: { id: 'c1' }, path: [{ step: 1 }], facts: { name: 'Ann' } })
    const facts = { name: 'Bob' }

    const next = snapshot({ ...previous, path: [...previous.path, { step: 2 }], facts }, previous)

    expect(next.customer).toBe(previous.customer)
    expect(next.path[0]).toBe(previous.path[0])
    expect(next.path).not.toBe(previous.path)
    expect(next.facts).not.toBe(facts)
    expect(Object.isFrozen(next.path) && Object.isFrozen(next.path[1]) && Object.isFrozen(next.facts)).toBe(
      true,
    )
  })
})
