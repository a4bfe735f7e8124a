import { describe, expect, it } from 'vitest'
import { pathEntry } from '../domain/agent-path.js'
import type { Session } from '../domain/session.js'
import { snapshot, snapshotSession } from './snapshot.js'

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

  it('shares one frozen empty array and one frozen empty object among all records', () => {
    const first = snapshot({ errors: [], facts: {}, gone: { note: undefined } })
    const second = snapshot({ errors: [], facts: {} })

    expect(first).toEqual({ errors: [], facts: {}, gone: {} })
    expect(second.errors).toBe(first.errors)
    expect(second.facts).toBe(first.facts)
    expect(first.gone).toBe(first.facts)
    expect(Object.isFrozen(first.errors) && Object.isFrozen(first.facts)).toBe(true)
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

  describe('snapshotSession', () => {
    const input = (): Omit<Session, 'version'> => ({
      id: 's1',
      companyId: 1,
      integrationId: 'i1',
      customer: { clientId: 'c1', channelId: 'ch1' },
      state: 'ongoing',
      activeAgentId: 2,
      entryAgentId: 2,
      metadata: {
        agentPath: [
          { agentId: 2, agentName: 'Support', timestamp: '2026-01-01T00:00:00.000Z', via: 'initial' },
        ],
        sharedContext: { facts: { name: 'Ann' }, journey: [] },
        errors: [],
      },
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
    })

    it('stores the version given and a deep frozen copy the caller cannot change', () => {
      const written = input()
      const stored = snapshotSession(written, 3)

      ;(written.metadata.sharedContext.facts as Record<string, string>).name = 'Bob'
      ;(written.customer as { clientId: string }).clientId = 'c2'

      expect(stored.version).toBe(3)
      expect(stored.metadata.sharedContext.facts.name).toBe('Ann')
      expect(stored.customer.clientId).toBe('c1')
      expect(Object.isFrozen(stored) && Object.isFrozen(stored.metadata.agentPath[0])).toBe(true)
    })

    it('leaves out an absent pause state and keeps the fields of a session only', () => {
      const withExtra = { ...input(), pauseState: undefined, note: 'not a session field' }

      const stored = snapshotSession(withExtra, 1)

      expect(Object.keys(stored)).not.toContain('pauseState')
      expect(Object.keys(stored)).not.toContain('note')
      expect(
        snapshotSession({ ...input(), pauseState: { pausedAt: 'x', reason: undefined } }, 1).pauseState,
      ).toEqual({ pausedAt: 'x' })
    })

    it('keeps every field of a path entry, in the order pathEntry writes them, and copies the facts in theirs', () => {
      const entry = pathEntry({ id: 3, name: 'Sales', role: 'seller' }, 'entry_routing', new Date(0), {
        confidence: 0.5,
        routeId: 'r1',
        depth: 2,
        reason: 'pricing',
      })
      const facts = { plan: 'pro', name: 'Ann' }
      const written = input()
      const stored = snapshotSession(
        {
          ...written,
          metadata: { ...written.metadata, agentPath: [entry], sharedContext: { facts, journey: [] } },
        },
        1,
      )

      expect(stored.metadata.agentPath[0]).not.toBe(entry)
      expect(Object.entries(stored.metadata.agentPath[0]!)).toEqual(Object.entries(entry))
      expect(Object.keys(stored.metadata.sharedContext.facts)).toEqual(['plan', 'name'])
      expect(Object.isFrozen(stored.metadata.sharedContext)).toBe(true)
    })

    it('keeps the parts carried over from the session it replaces', () => {
      const previous = snapshotSession(input(), 1)
      const next = snapshotSession(
        { ...previous, state: 'paused', pauseState: { pausedAt: 'x' } },
        2,
        previous,
      )

      expect(next.metadata).toBe(previous.metadata)
      expect(next.customer).toBe(previous.customer)
      expect(next.pauseState).toEqual({ pausedAt: 'x' })
      expect(Object.isFrozen(next.pauseState)).toBe(true)
    })
  })
})
