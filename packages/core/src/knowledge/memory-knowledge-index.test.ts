import { describe, expect, it } from 'vitest'
import { runKnowledgeIndexConformance } from '../testing/conformance/knowledge-index-conformance.js'
import { createMemoryKnowledgeIndex } from './memory-knowledge-index.js'

runKnowledgeIndexConformance('memory knowledge index', createMemoryKnowledgeIndex)

/**
 * The steps `run` takes through maps, sets and arrays: lookups (`get`, `has`) and elements walked
 * by iteration. A search that visits a passage takes at least one.
 */
async function countSteps(run: () => Promise<unknown>): Promise<number> {
  let steps = 0
  const counted = <Owner extends object>(owner: Owner, name: keyof Owner) => {
    const original = owner[name] as (...values: unknown[]) => unknown
    Object.defineProperty(owner, name, {
      configurable: true,
      writable: true,
      value(this: unknown, ...values: unknown[]) {
        steps += 1
        return original.apply(this, values)
      },
    })
    return () => Object.defineProperty(owner, name, { configurable: true, writable: true, value: original })
  }
  const iteratorOf = (iterable: Iterable<unknown>) => Object.getPrototypeOf(iterable[Symbol.iterator]())
  const restores = [
    counted(Map.prototype, 'get'),
    counted(Map.prototype, 'has'),
    counted(Set.prototype, 'has'),
    counted(iteratorOf(new Map()), 'next'),
    counted(iteratorOf(new Set()), 'next'),
    counted(iteratorOf([]), 'next'),
  ]
  try {
    await run()
  } finally {
    for (const restore of restores) restore()
  }
  return steps
}

describe('createMemoryKnowledgeIndex', () => {
  const scope = { companyId: 1, agentId: 7 }

  it("searches in steps that grow with the passages sharing the message's words, not with the agent's others", async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({
      ...scope,
      documentId: 'returns',
      content: 'Refunds take five days.\n\nParcels ship daily.',
    })
    const search = () => index.search({ ...scope, query: 'When do refunds arrive?', limit: 3 })
    const unrelated = (document: number) =>
      Array.from({ length: 100 }, (_, passage) => `Warehouse shelf ${document * 100 + passage} holds stock.`)

    const alone = await countSteps(search)
    for (let document = 0; document < 20; document++) {
      await index.add({
        ...scope,
        documentId: `stock-${document}`,
        content: unrelated(document).join('\n\n'),
      })
    }
    const beside = await countSteps(search)

    expect(await search()).toEqual([expect.objectContaining({ text: 'Refunds take five days.' })])
    // Walking every passage took over 2,000 steps more beside the 2,000 unrelated passages.
    expect(beside).toBe(alone)
  })

  it('breaks ties by document insertion order, then passage order', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({ ...scope, documentId: 'b', content: 'Refund policy one.\n\nRefund policy two.' })
    await index.add({ ...scope, documentId: 'a', content: 'Refund policy six.' })

    const results = await index.search({ ...scope, query: 'refund', limit: 10 })

    expect(results.map((passage) => passage.text)).toEqual([
      'Refund policy one.',
      'Refund policy two.',
      'Refund policy six.',
    ])
    expect(new Set(results.map((passage) => passage.score)).size).toBe(1)
  })

  it('orders a replaced document as a new insertion', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({ ...scope, documentId: 'first', content: 'Refund policy one.' })
    await index.add({ ...scope, documentId: 'second', content: 'Refund policy two.' })
    await index.add({ ...scope, documentId: 'first', content: 'Refund policy new.' })

    const results = await index.search({ ...scope, query: 'refund', limit: 10 })

    expect(results.map((passage) => passage.documentId)).toEqual(['second', 'first'])
  })

  it('weighs a rare word above a common one', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({
      ...scope,
      documentId: 'faq',
      content:
        'Orders ship daily.\n\nOrders ship weekly.\n\nOrders arrive broken rarely.\n\nBroken items return.',
    })

    const results = await index.search({ ...scope, query: 'orders broken', limit: 10 })

    expect(results.map((passage) => passage.text)).toEqual([
      'Orders arrive broken rarely.',
      'Broken items return.',
      'Orders ship daily.',
      'Orders ship weekly.',
    ])
  })

  it('moves a document to another agent when it is added again for that agent', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({ companyId: 1, agentId: 7, documentId: 'doc', content: 'Warranty terms.' })
    await index.add({ companyId: 1, agentId: 8, documentId: 'doc', content: 'Warranty terms.' })

    expect(await index.search({ companyId: 1, agentId: 7, query: 'warranty', limit: 5 })).toEqual([])
    expect(await index.search({ companyId: 1, agentId: 8, query: 'warranty', limit: 5 })).toHaveLength(1)
  })

  it('answers nothing for a limit below one', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({ ...scope, documentId: 'doc', content: 'Warranty terms.' })

    expect(await index.search({ ...scope, query: 'warranty', limit: 0 })).toEqual([])
    expect(await index.search({ ...scope, query: 'warranty', limit: -3 })).toEqual([])
  })

  it('ignores passages made only of stop words', async () => {
    const index = createMemoryKnowledgeIndex()
    await index.add({ ...scope, documentId: 'doc', content: 'And the.\n\nWarranty terms.' })

    const results = await index.search({ ...scope, query: 'warranty', limit: 10 })

    expect(results.map((passage) => passage.text)).toEqual(['Warranty terms.'])
  })
})
