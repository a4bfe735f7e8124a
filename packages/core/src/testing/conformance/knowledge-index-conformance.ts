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

/** An index with a fresh company and agent, whose documents and searches are that agent's. */
async function oneAgentsKnowledge(createIndex: () => Promise<KnowledgeIndex> | KnowledgeIndex) {
  const index = await createIndex()
  const companyId = uniqueId()
  const agentId = uniqueId()
  return {
    add: (documentId: string, content: string) => index.add({ companyId, agentId, documentId, content }),
    search: (query: string, limit: number) => index.search({ companyId, agentId, query, limit }),
  }
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
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('policy', RETURNS_POLICY)

      const results = await knowledge.search('When do refunds arrive?', 10)

      expect(results).toHaveLength(1)
      expect(results[0]).toMatchObject({
        documentId: 'policy',
        text: 'Refunds reach the original payment method within five business days.',
      })
      expect(results[0]!.score).toBeGreaterThan(0)
    })

    it('takes words of any length, in documents and queries alike', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      // Longer than a PostgreSQL lexeme may be (2046 bytes), in letters of two and three bytes too.
      const long = 'b'.repeat(3000)
      const wide = 'ж'.repeat(1500)
      await knowledge.add('long', `Refunds take two weeks ${long}.\n\nShipping ${wide} is free.`)

      expect(await knowledge.search(`refunds ${'c'.repeat(3000)}`, 10)).toEqual([
        expect.objectContaining({ text: `Refunds take two weeks ${long}.` }),
      ])
      expect((await knowledge.search(`${wide}?`, 10)).map((found) => found.text)).toEqual([
        `Shipping ${wide} is free.`,
      ])
      expect(await knowledge.search('b'.repeat(2999), 10)).toEqual([])
    })

    it('keeps the lines of one paragraph together', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      const content = '  Opening hours:\nMonday to Friday, nine to five.\n\nClosed on holidays.  \n'
      await knowledge.add('hours', content)

      const results = await knowledge.search('opening hours', 10)

      expect(results.map((passage) => passage.text)).toEqual([
        'Opening hours:\nMonday to Friday, nine to five.',
      ])
    })

    it('answers only passages that share a word with the query', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('policy', RETURNS_POLICY)

      expect(await knowledge.search('free shipping', 10)).toEqual([
        expect.objectContaining({ text: 'Shipping is free for orders above fifty euros.' }),
      ])
      expect(await knowledge.search('warranty repairs', 10)).toEqual([])
      expect(await knowledge.search('', 10)).toEqual([])
    })

    it('matches words whatever their case and punctuation', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('policy', RETURNS_POLICY)

      const results = await knowledge.search('REFUNDS?!', 10)

      expect(results.map((passage) => passage.text)).toEqual([
        'Refunds reach the original payment method within five business days.',
      ])
    })

    it('matches words of any alphabet', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add(
        'multilingual',
        'Die Rückerstattung dauert fünf Tage.\n\nВозврат занимает пять дней.',
      )

      const german = await knowledge.search('rückerstattung', 10)
      const russian = await knowledge.search('ВОЗВРАТ', 10)

      expect(german.map((passage) => passage.text)).toEqual(['Die Rückerstattung dauert fünf Tage.'])
      expect(russian.map((passage) => passage.text)).toEqual(['Возврат занимает пять дней.'])
    })

    it('matches words written with marks, and a letter typed decomposed as the composed one', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('marks', 'किताब दस दिन में लौटाएँ।\n\nकीमत में कर शामिल है।\n\nCafé and crème daily.')

      const hindi = await knowledge.search('कीमत क्या है?', 10)
      const decomposed = await knowledge.search('CAFE\u0301?', 10)

      expect(hindi.map((passage) => passage.text)).toEqual(['कीमत में कर शामिल है।'])
      expect(decomposed.map((passage) => passage.text)).toEqual(['Café and crème daily.'])
    })

    it('matches nothing on stop words and short words alone', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add(
        'faq',
        'What can you do for me about this?\n\nPlease tell us how to help with that and we will.',
      )

      const results = await knowledge.search(
        'What can you do for me about this, please? I want and need that from you.',
        10,
      )

      expect(results).toEqual([])
    })

    it('ranks a passage with more of the query words first', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      // Equal lengths, so only the number of shared words can decide the order.
      await knowledge.add(
        'delivery',
        [
          'Parcels travel by courier daily.',
          'Express parcels travel overnight.',
          'Gift cards never expire.',
          'Express parcels travel daily.',
        ].join('\n\n'),
      )

      const results = await knowledge.search('express parcels overnight', 10)

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
      const knowledge = await oneAgentsKnowledge(createIndex)
      const refundsToCard =
        'Refunds reach the original card within fourteen working days once the returned parcel arrives at our warehouse and passes inspection by the returns team there.'
      await knowledge.add(
        'payments',
        [
          refundsToCard,
          'Refunds: contact us.',
          'Gift card balances never expire.',
          'Pay by card or bank transfer.',
          'Your card is charged when the order ships.',
        ].join('\n\n'),
      )

      const results = await knowledge.search('card refunds?', 3)

      expect(results.map((passage) => passage.text).slice(0, 2)).toEqual([
        refundsToCard,
        'Refunds: contact us.',
      ])
      expect(results[0]!.score).toBeGreaterThan(results[1]!.score)
      expect(results[1]!.score).toBeGreaterThan(results[2]!.score)
    })

    it('ranks across the documents of one agent', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('one', 'Invoices are emailed monthly by post.')
      await knowledge.add('two', 'Invoices list every payment monthly.')

      const results = await knowledge.search('monthly payment invoices', 10)

      expect(results.map((passage) => passage.documentId)).toEqual(['two', 'one'])
    })

    it('answers at most `limit` passages, the best ones', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add(
        'stores',
        [
          'Berlin store.',
          'Berlin store opens daily downtown.',
          'Munich store.',
          'Hamburg store opens daily, always.',
          'Cologne store.',
        ].join('\n\n'),
      )

      const all = await knowledge.search('store opens daily downtown', 10)
      const two = await knowledge.search('store opens daily downtown', 2)

      expect(all).toHaveLength(5)
      expect(two.map((passage) => passage.text)).toEqual([
        'Berlin store opens daily downtown.',
        'Hamburg store opens daily, always.',
      ])
      expect(await knowledge.search('store', 1)).toHaveLength(1)
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
      const knowledge = await oneAgentsKnowledge(createIndex)
      await knowledge.add('hours', 'Open weekdays.\n\nClosed weekends.')
      await knowledge.add('hours', 'Open weekdays and weekends.')

      expect(await knowledge.search('closed', 10)).toEqual([])
      const results = await knowledge.search('weekdays weekends', 10)
      expect(results.map((passage) => passage.text)).toEqual(['Open weekdays and weekends.'])
    })

    // An index may keep each agent's passage count, word total and the passages holding each word
    // as documents come and go, instead of counting them at every search: these cases check that
    // the scores always match an index given only what is left, in the order it was added.
    it('scores what is left after documents are replaced and removed as if only that had been added', async () => {
      const index = await createIndex()
      const agentId = uniqueId()
      const edited = { companyId: uniqueId(), agentId }
      const fresh = { companyId: uniqueId(), agentId }
      await index.add({
        ...edited,
        documentId: 'one',
        content: 'Refunds take five days.\n\nShipping is free.',
      })
      await index.add({
        ...edited,
        documentId: 'two',
        content: 'Card refunds take longer than refunds by transfer.\n\nCard payments are instant.',
      })
      await index.add({ ...edited, documentId: 'three', content: 'Parcels ship daily.\n\nRefunds are rare.' })
      await index.add({ ...edited, documentId: 'two', content: 'Card refunds take ten days.' })
      await index.remove({ companyId: edited.companyId, documentId: 'one' })
      await index.add({
        ...edited,
        documentId: 'four',
        content: 'Shipping refunds are free, shipping is fast.',
      })
      await index.add({ ...fresh, documentId: 'three', content: 'Parcels ship daily.\n\nRefunds are rare.' })
      await index.add({ ...fresh, documentId: 'two', content: 'Card refunds take ten days.' })
      await index.add({
        ...fresh,
        documentId: 'four',
        content: 'Shipping refunds are free, shipping is fast.',
      })

      for (const query of ['card refunds shipping', 'refunds', 'free payments', 'parcels']) {
        const expected = await index.search({ ...fresh, query, limit: 10 })
        expect(await index.search({ ...edited, query, limit: 10 })).toEqual(expected)
      }
      expect((await index.search({ ...edited, query: 'refunds', limit: 10 })).length).toBe(3)
    })

    it("scores an agent's passages apart from other agents' and companies' holding the same words", async () => {
      const index = await createIndex()
      const companyId = uniqueId()
      const agentId = uniqueId()
      const alone = { companyId: uniqueId(), agentId }
      const faq = 'Refunds take five days.\n\nShipping is free.\n\nRefunds by card are instant.'
      await index.add({ companyId, agentId, documentId: 'faq', content: faq })
      await index.add({ ...alone, documentId: 'faq', content: faq })
      const busy = Array.from({ length: 12 }, (_, position) => `Refunds note ${numberedWord(position)}.`)
      await index.add({
        companyId,
        agentId: uniqueId(),
        documentId: 'other-agent',
        content: busy.join('\n\n'),
      })
      await index.add({ companyId: uniqueId(), agentId, documentId: 'faq', content: busy.join('\n\n') })
      // Added for this agent, then for another: the document moves, and leaves this agent's counts.
      await index.add({ companyId, agentId, documentId: 'moved', content: busy.join('\n\n') })
      await index.add({ companyId, agentId: uniqueId(), documentId: 'moved', content: busy.join('\n\n') })

      for (const query of ['refunds', 'card refunds', 'shipping']) {
        const expected = await index.search({ ...alone, query, limit: 10 })
        expect(await index.search({ companyId, agentId, query, limit: 10 })).toEqual(expected)
      }
    })

    it('scores documents added and removed at the same time as if added one after the other', async () => {
      const index = await createIndex()
      const together = { companyId: uniqueId(), agentId: uniqueId() }
      const oneByOne = { companyId: uniqueId(), agentId: together.agentId }
      const contentOf = (document: number) =>
        Array.from(
          { length: 1 + (document % 4) },
          (_, passage) =>
            `Refunds ${numberedWord(document * 10 + passage)} ${'policy '.repeat(passage)}terms.`,
        ).join('\n\n')
      const leaving = Array.from({ length: 6 }, (_, document) => `leaving-${document}`)
      await Promise.all(
        leaving.map((documentId) => index.add({ ...together, documentId, content: 'Refunds go.' })),
      )

      await Promise.all([
        ...Array.from({ length: 12 }, (_, document) =>
          index.add({ ...together, documentId: `document-${document}`, content: contentOf(document) }),
        ),
        ...leaving.map((documentId) => index.remove({ companyId: together.companyId, documentId })),
      ])
      for (let document = 0; document < 12; document++) {
        await index.add({ ...oneByOne, documentId: `document-${document}`, content: contentOf(document) })
      }

      // Added at once, they may tie in another order: compare each passage's score.
      const byText = (passages: readonly { text: string; score: number }[]) =>
        Object.fromEntries(passages.map((passage) => [passage.text, passage.score]))
      for (const query of ['refunds', 'policy terms', `refunds ${numberedWord(31)}`]) {
        const expected = await index.search({ ...oneByOne, query, limit: 100 })
        expect(byText(await index.search({ ...together, query, limit: 100 }))).toEqual(byText(expected))
      }
      expect(await index.search({ ...together, query: 'refunds', limit: 100 })).toHaveLength(30)
    })

    it("scores an agent's knowledge right when its last document is removed as another is added", async () => {
      const index = await createIndex()
      const fresh = { companyId: uniqueId(), agentId: uniqueId() }
      await index.add({ ...fresh, documentId: 'new', content: 'Refunds take a week.\n\nFree refunds.' })
      const expected = await index.search({ ...fresh, query: 'free refunds', limit: 10 })

      for (let round = 0; round < 10; round++) {
        const racing = { companyId: uniqueId(), agentId: fresh.agentId }
        await index.add({ ...racing, documentId: 'old', content: 'Refunds take five days.\n\nOld rules.' })
        await Promise.all([
          index.remove({ companyId: racing.companyId, documentId: 'old' }),
          index.add({ ...racing, documentId: 'new', content: 'Refunds take a week.\n\nFree refunds.' }),
        ])
        expect(await index.search({ ...racing, query: 'free refunds', limit: 10 })).toEqual(expected)
      }
    })

    // A document added again for another agent moves there, changing both agents' counts at once:
    // two moving between the same agents in opposite directions must each wait for the other.
    it('moves documents between two agents in opposite directions at the same time', async () => {
      const index = await createIndex()
      const first = uniqueId()
      const second = uniqueId()
      for (let round = 0; round < 10; round++) {
        const companyId = uniqueId()
        await index.add({ companyId, agentId: first, documentId: 'north', content: 'North depot refunds.' })
        await index.add({ companyId, agentId: second, documentId: 'south', content: 'South depot refunds.' })

        await Promise.all([
          index.add({ companyId, agentId: second, documentId: 'north', content: 'North depot refunds.' }),
          index.add({ companyId, agentId: first, documentId: 'south', content: 'South depot refunds.' }),
        ])

        const ofFirst = await index.search({ companyId, agentId: first, query: 'depot refunds', limit: 10 })
        const ofSecond = await index.search({ companyId, agentId: second, query: 'depot refunds', limit: 10 })
        expect(ofFirst.map((passage) => passage.documentId)).toEqual(['south'])
        expect(ofSecond.map((passage) => passage.documentId)).toEqual(['north'])
      }
    })

    it('answers nothing once every document is gone, and scores documents added afterwards afresh', async () => {
      const index = await createIndex()
      const agentId = uniqueId()
      const emptied = { companyId: uniqueId(), agentId }
      const fresh = { companyId: uniqueId(), agentId }
      await index.add({
        ...emptied,
        documentId: 'old',
        content: 'Refunds take five days.\n\nOld shipping rules.',
      })
      await index.remove({ companyId: emptied.companyId, documentId: 'old' })
      // Removing twice, or a document never added, changes nothing.
      await index.remove({ companyId: emptied.companyId, documentId: 'old' })

      expect(await index.search({ ...emptied, query: 'refunds shipping', limit: 10 })).toEqual([])

      await index.add({ ...emptied, documentId: 'new', content: 'Refunds take a week.\n\nFree refunds.' })
      await index.add({ ...fresh, documentId: 'new', content: 'Refunds take a week.\n\nFree refunds.' })
      const expected = await index.search({ ...fresh, query: 'free refunds', limit: 10 })
      expect(await index.search({ ...emptied, query: 'free refunds', limit: 10 })).toEqual(expected)
    })

    it('ranks a long message against many passages in about their sum of lookups, not their product', async () => {
      const knowledge = await oneAgentsKnowledge(createIndex)
      // Every passage shares "common" with the query, so every passage is ranked.
      const passages = Array.from({ length: 2_000 }, (_, position) => `${numberedWord(position)} common`)
      await knowledge.add('faq', passages.join('\n\n'))
      const words = Array.from({ length: 2_000 }, (_, position) => numberedWord(position + 1_000))
      const query = ['common', ...words].join(' ')

      let results: unknown[] = []
      const lookups = await countLookups(async () => {
        results = await knowledge.search(query, 3)
      })

      expect(results).toHaveLength(3)
      // Walking every query word for every passage made over 4,000,000.
      expect(lookups).toBeLessThan(60_000)
    })
  })
}
