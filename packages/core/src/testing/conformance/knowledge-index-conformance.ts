import { randomInt } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import type { KnowledgeIndex } from '../../ports/knowledge-index.js'

/** Within PostgreSQL's `integer`, and random so runs on a shared database never meet. */
function uniqueId(): number {
  return randomInt(1_000_000, 2_147_483_647)
}

const RETURNS_POLICY = [
  'Returns are accepted within thirty days of delivery.',
  '',
  'Refunds reach the original payment method within five business days.',
  '   ',
  '',
  'Shipping is free for orders above fifty euros.',
].join('\n')

/** Distinct words of letters only: `kaaa`, `kbaa`… */
function numberedWord(index: number): string {
  const letters = [0, 1, 2].map((digit) => String.fromCharCode(97 + (Math.floor(index / 26 ** digit) % 26)))
  return `k${letters.join('')}`
}

/** How many `has` lookups on maps and sets `run` makes: the work of ranking, counted. */
async function countLookups(run: () => Promise<unknown>): Promise<number> {
  const mapHas = Map.prototype.has
  const setHas = Set.prototype.has
  let lookups = 0
  Map.prototype.has = function (this: Map<unknown, unknown>, key: unknown) {
    lookups += 1
    return mapHas.call(this, key)
  }
  Set.prototype.has = function (this: Set<unknown>, key: unknown) {
    lookups += 1
    return setHas.call(this, key)
  }
  try {
    await run()
  } finally {
    Map.prototype.has = mapHas
    Set.prototype.has = setHas
  }
  return lookups
}

/**
 * The behaviour every `KnowledgeIndex` must share with the in-memory one: run it against an
 * adapter with a factory that answers a ready index. Every test uses its own random company, so
 * the suite can run against a database other tests are using.
 */
export function runKnowledgeIndexConformance(
  name: string,
  createIndex: () => Promise<KnowledgeIndex> | KnowledgeIndex,
): void {
  describe(`${name} (KnowledgeIndex conformance)`, () => {
    it('splits documents into trimmed passages at blank lines', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({ companyId, agentId, documentId: 'policy', content: RETURNS_POLICY })

      const results = await index.search({ companyId, agentId, query: 'When do refunds arrive?', limit: 10 })

      expect(results).toHaveLength(1)
      expect(results[0]).toMatchObject({
        documentId: 'policy',
        text: 'Refunds reach the original payment method within five business days.',
      })
      expect(results[0]!.score).toBeGreaterThan(0)
    })

    it('takes words of any length, in documents and queries alike', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      // Longer than a PostgreSQL lexeme may be (2046 bytes), in letters of two and three bytes too.
      const long = 'b'.repeat(3000)
      const wide = 'ж'.repeat(1500)
      await index.add({
        companyId,
        agentId,
        documentId: 'long',
        content: `Refunds take two weeks ${long}.\n\nShipping ${wide} is free.`,
      })

      expect(
        await index.search({ companyId, agentId, query: `refunds ${'c'.repeat(3000)}`, limit: 10 }),
      ).toEqual([expect.objectContaining({ text: `Refunds take two weeks ${long}.` })])
      expect(
        (await index.search({ companyId, agentId, query: `${wide}?`, limit: 10 })).map((found) => found.text),
      ).toEqual([`Shipping ${wide} is free.`])
      expect(await index.search({ companyId, agentId, query: 'b'.repeat(2999), limit: 10 })).toEqual([])
    })

    it('keeps the lines of one paragraph together', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      const content = '  Opening hours:\nMonday to Friday, nine to five.\n\nClosed on holidays.  \n'
      await index.add({ companyId, agentId, documentId: 'hours', content })

      const results = await index.search({ companyId, agentId, query: 'opening hours', limit: 10 })

      expect(results.map((passage) => passage.text)).toEqual([
        'Opening hours:\nMonday to Friday, nine to five.',
      ])
    })

    it('answers only passages that share a word with the query', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({ companyId, agentId, documentId: 'policy', content: RETURNS_POLICY })

      expect(await index.search({ companyId, agentId, query: 'free shipping', limit: 10 })).toEqual([
        expect.objectContaining({ text: 'Shipping is free for orders above fifty euros.' }),
      ])
      expect(await index.search({ companyId, agentId, query: 'warranty repairs', limit: 10 })).toEqual([])
      expect(await index.search({ companyId, agentId, query: '', limit: 10 })).toEqual([])
    })

    it('matches words whatever their case and punctuation', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({ companyId, agentId, documentId: 'policy', content: RETURNS_POLICY })

      const results = await index.search({ companyId, agentId, query: 'REFUNDS?!', limit: 10 })

      expect(results.map((passage) => passage.text)).toEqual([
        'Refunds reach the original payment method within five business days.',
      ])
    })

    it('matches words of any alphabet', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'multilingual',
        content: 'Die Rückerstattung dauert fünf Tage.\n\nВозврат занимает пять дней.',
      })

      const german = await index.search({ companyId, agentId, query: 'rückerstattung', limit: 10 })
      const russian = await index.search({ companyId, agentId, query: 'ВОЗВРАТ', limit: 10 })

      expect(german.map((passage) => passage.text)).toEqual(['Die Rückerstattung dauert fünf Tage.'])
      expect(russian.map((passage) => passage.text)).toEqual(['Возврат занимает пять дней.'])
    })

    it('matches words written with marks, and a letter typed decomposed as the composed one', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'marks',
        content: 'किताब दस दिन में लौटाएँ।\n\nकीमत में कर शामिल है।\n\nCafé and crème daily.',
      })

      const hindi = await index.search({ companyId, agentId, query: 'कीमत क्या है?', limit: 10 })
      const decomposed = await index.search({ companyId, agentId, query: 'CAFE\u0301?', limit: 10 })

      expect(hindi.map((passage) => passage.text)).toEqual(['कीमत में कर शामिल है।'])
      expect(decomposed.map((passage) => passage.text)).toEqual(['Café and crème daily.'])
    })

    it('matches nothing on stop words and short words alone', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'faq',
        content: 'What can you do for me about this?\n\nPlease tell us how to help with that and we will.',
      })

      const results = await index.search({
        companyId,
        agentId,
        query: 'What can you do for me about this, please? I want and need that from you.',
        limit: 10,
      })

      expect(results).toEqual([])
    })

    it('ranks a passage with more of the query words first', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      // Equal lengths, so only the number of shared words can decide the order.
      await index.add({
        companyId,
        agentId,
        documentId: 'delivery',
        content: [
          'Parcels travel by courier daily.',
          'Express parcels travel overnight.',
          'Gift cards never expire.',
          'Express parcels travel daily.',
        ].join('\n\n'),
      })

      const results = await index.search({
        companyId,
        agentId,
        query: 'express parcels overnight',
        limit: 10,
      })

      expect(results.map((passage) => passage.text)).toEqual([
        'Express parcels travel overnight.',
        'Express parcels travel daily.',
        'Parcels travel by courier daily.',
      ])
      expect(results[0]!.score).toBeGreaterThan(results[1]!.score)
      expect(results[1]!.score).toBeGreaterThan(results[2]!.score)
    })

    // BM25 alone put a short passage sharing one rare word above a long one sharing that word and
    // a common one: asked about card refunds, the answer was "Refunds: contact us."
    it("ranks a passage sharing more of the message's words first, whatever the lengths, with scores in that order", async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      const refundsToCard =
        'Refunds reach the original card within fourteen working days once the returned parcel arrives at our warehouse and passes inspection by the returns team there.'
      await index.add({
        companyId,
        agentId,
        documentId: 'payments',
        content: [
          refundsToCard,
          'Refunds: contact us.',
          'Gift card balances never expire.',
          'Pay by card or bank transfer.',
          'Your card is charged when the order ships.',
        ].join('\n\n'),
      })

      const results = await index.search({ companyId, agentId, query: 'card refunds?', limit: 3 })

      expect(results.map((passage) => passage.text).slice(0, 2)).toEqual([
        refundsToCard,
        'Refunds: contact us.',
      ])
      expect(results[0]!.score).toBeGreaterThan(results[1]!.score)
      expect(results[1]!.score).toBeGreaterThan(results[2]!.score)
    })

    it('ranks across the documents of one agent', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'one',
        content: 'Invoices are emailed monthly by post.',
      })
      await index.add({
        companyId,
        agentId,
        documentId: 'two',
        content: 'Invoices list every payment monthly.',
      })

      const results = await index.search({ companyId, agentId, query: 'monthly payment invoices', limit: 10 })

      expect(results.map((passage) => passage.documentId)).toEqual(['two', 'one'])
    })

    it('answers at most `limit` passages, the best ones', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'stores',
        content: [
          'Berlin store.',
          'Berlin store opens daily downtown.',
          'Munich store.',
          'Hamburg store opens daily, always.',
          'Cologne store.',
        ].join('\n\n'),
      })

      const all = await index.search({ companyId, agentId, query: 'store opens daily downtown', limit: 10 })
      const two = await index.search({ companyId, agentId, query: 'store opens daily downtown', limit: 2 })

      expect(all).toHaveLength(5)
      expect(two.map((passage) => passage.text)).toEqual([
        'Berlin store opens daily downtown.',
        'Hamburg store opens daily, always.',
      ])
      expect(await index.search({ companyId, agentId, query: 'store', limit: 1 })).toHaveLength(1)
    })

    it('keeps companies apart, even for the same agent and document ids', async () => {
      const index = await createIndex()
      const firstCompany = uniqueId()
      const secondCompany = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId: firstCompany,
        agentId,
        documentId: 'doc',
        content: 'Alpha warehouse policy.',
      })
      await index.add({
        companyId: secondCompany,
        agentId,
        documentId: 'doc',
        content: 'Beta warehouse policy.',
      })

      const first = await index.search({ companyId: firstCompany, agentId, query: 'warehouse', limit: 10 })
      const second = await index.search({ companyId: secondCompany, agentId, query: 'warehouse', limit: 10 })

      expect(first.map((passage) => passage.text)).toEqual(['Alpha warehouse policy.'])
      expect(second.map((passage) => passage.text)).toEqual(['Beta warehouse policy.'])
    })

    it('keeps the agents of one company apart', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const salesAgent = uniqueId()
      const supportAgent = uniqueId()
      await index.add({
        companyId,
        agentId: salesAgent,
        documentId: 'sales',
        content: 'Pricing starts at ten euros.',
      })
      await index.add({
        companyId,
        agentId: supportAgent,
        documentId: 'support',
        content: 'Pricing questions go to sales.',
      })

      const sales = await index.search({ companyId, agentId: salesAgent, query: 'pricing', limit: 10 })
      const support = await index.search({ companyId, agentId: supportAgent, query: 'pricing', limit: 10 })

      expect(sales.map((passage) => passage.documentId)).toEqual(['sales'])
      expect(support.map((passage) => passage.documentId)).toEqual(['support'])
      expect(await index.search({ companyId, agentId: uniqueId(), query: 'pricing', limit: 10 })).toEqual([])
    })

    it("removes a document's passages and nothing else", async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const otherCompany = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'old',
        content: 'Legacy coupon rules.\n\nCoupon stacking.',
      })
      await index.add({ companyId, agentId, documentId: 'new', content: 'Current coupon rules.' })
      await index.add({
        companyId: otherCompany,
        agentId,
        documentId: 'old',
        content: 'Coupon rules elsewhere.',
      })

      await index.remove({ companyId, documentId: 'old' })

      const results = await index.search({ companyId, agentId, query: 'coupon', limit: 10 })
      expect(results.map((passage) => passage.documentId)).toEqual(['new'])
      const elsewhere = await index.search({ companyId: otherCompany, agentId, query: 'coupon', limit: 10 })
      expect(elsewhere.map((passage) => passage.documentId)).toEqual(['old'])
      await expect(index.remove({ companyId, documentId: 'never-added' })).resolves.toBeUndefined()
    })

    it('replaces a document added again under the same id', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      await index.add({
        companyId,
        agentId,
        documentId: 'hours',
        content: 'Open weekdays.\n\nClosed weekends.',
      })
      await index.add({ companyId, agentId, documentId: 'hours', content: 'Open weekdays and weekends.' })

      expect(await index.search({ companyId, agentId, query: 'closed', limit: 10 })).toEqual([])
      const results = await index.search({ companyId, agentId, query: 'weekdays weekends', limit: 10 })
      expect(results.map((passage) => passage.text)).toEqual(['Open weekdays and weekends.'])
    })

    it('ranks a long message against many passages in about their sum of lookups, not their product', async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      // Every passage shares "common" with the query, so every passage is ranked.
      const passages = Array.from({ length: 2_000 }, (_, position) => `${numberedWord(position)} common`)
      await index.add({ companyId, agentId, documentId: 'faq', content: passages.join('\n\n') })
      const words = Array.from({ length: 2_000 }, (_, position) => numberedWord(position + 1_000))
      const query = ['common', ...words].join(' ')

      let results: unknown[] = []
      const lookups = await countLookups(async () => {
        results = await index.search({ companyId, agentId, query, limit: 3 })
      })

      expect(results).toHaveLength(3)
      // Walking every query word for every passage made over 4,000,000.
      expect(lookups).toBeLessThan(60_000)
    })
  })
}
