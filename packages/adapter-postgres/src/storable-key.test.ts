import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { keyFromStorage, storableKey } from './storable-key.js'

/** Any UTF-16 text, lone surrogates and U+0000 included, which `fc.string()` rarely makes. */
const anyText = fc.string({
  unit: fc.oneof(
    fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
    fc.constantFrom('\u0000', '\uD800', '\uDC00', '\uFFFD', '\uFEFF', '\u0001', 'json:', '"', '\\'),
  ),
})

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

describe('storableKey', () => {
  it('gives back every key exactly, as text a PostgreSQL text column holds', () => {
    fc.assert(
      fc.property(anyText, (key) => {
        const stored = storableKey(key)
        expect(stored.includes('\u0000')).toBe(false)
        expect(LONE_SURROGATE.test(stored)).toBe(false)
        expect(keyFromStorage(stored)).toBe(key)
      }),
      { numRuns: 2000 },
    )
  })

  it('stores two different keys differently', () => {
    fc.assert(
      fc.property(anyText, anyText, (left, right) => {
        fc.pre(left !== right)
        expect(storableKey(left)).not.toBe(storableKey(right))
      }),
      { numRuns: 2000 },
    )
  })

  // Rows written before keys were encoded may hold anything, the marker included.
  it('reads a stored key that only looks encoded as it is, never failing', () => {
    for (const stored of ['\u0001json:oops', '\u0001json:', '\u0001json:42', '\u0001json:{"a":1}']) {
      expect(keyFromStorage(stored)).toBe(stored)
    }
  })

  // PGlite reads text through a TextDecoder, which drops a leading U+FEFF.
  it('stores a key starting with U+FEFF so that no text column starts with it', () => {
    for (const key of ['\uFEFF', '\uFEFFchat-42', '\uFEFF\uFEFF']) {
      expect(storableKey(key).startsWith('\uFEFF')).toBe(false)
      expect(keyFromStorage(storableKey(key))).toBe(key)
    }
    expect(storableKey('chat\uFEFF')).toBe('chat\uFEFF')
  })

  it('stores an ordinary key as it is', () => {
    for (const key of ['wamid.HBgL', 'customer-1', '', 'Grüße 👋', '\uFFFD'])
      expect(storableKey(key)).toBe(key)
  })
})
