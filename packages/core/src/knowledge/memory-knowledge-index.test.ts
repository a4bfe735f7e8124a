import { describe, expect, it } from 'vitest'
import { runKnowledgeIndexConformance } from '../testing/conformance/knowledge-index-conformance.js'
import { createMemoryKnowledgeIndex } from './memory-knowledge-index.js'

runKnowledgeIndexConformance('memory knowledge index', createMemoryKnowledgeIndex)

describe('createMemoryKnowledgeIndex', () => {
  const scope = { companyId: 1, agentId: 7 }

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
