import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { contentWords, STOP_WORDS } from './text-words.js'

describe('contentWords', () => {
  it('keeps lowercase words of three or more letters, in order, with repeats', () => {
    expect(contentWords('Refund my ORDER, refund it now: 42 items!')).toEqual([
      'refund',
      'order',
      'refund',
      'items',
    ])
  })

  it('drops the stop words the contract requires', () => {
    const required =
      'the and for you your with are this that have what how can not but from about please want need'
    expect(contentWords(required)).toEqual([])
    expect(contentWords(required.toUpperCase())).toEqual([])
  })

  it('splits at anything that is not a letter, including apostrophes and digits', () => {
    expect(contentWords("customer's e-mail: abc123def")).toEqual(['customer', 'mail', 'abc', 'def'])
    expect(contentWords("I don't know, I'm sure it isn't")).toEqual(['know', 'sure'])
  })

  it('keeps letters of any alphabet', () => {
    expect(contentWords('Rückerstattung für Bestellung — Возврат заказа')).toEqual([
      'rückerstattung',
      'für',
      'bestellung',
      'возврат',
      'заказа',
    ])
  })

  it('keeps a word whole with the marks written in it, and a decomposed letter as the composed one', () => {
    // Devanagari vowel signs and Hebrew points are marks, not letters: a word is cut at none of them.
    expect(contentWords('किताब की कीमत')).toEqual(['किताब', 'कीमत'])
    expect(contentWords('שָׁלוֹם')).toEqual(['שָׁלוֹם'.normalize('NFC')])
    // An accent typed as its own character: the same word as the composed one, not "cafe".
    expect(contentWords('Cafe\u0301 cafés')).toEqual(['café', 'cafés'])
    expect(contentWords('Tie\u0302\u0301ng Việt')).toEqual(['tiếng', 'việt'])
  })

  it('answers nothing for empty or letterless text', () => {
    expect(contentWords('')).toEqual([])
    expect(contentWords('12 34 ?! ok')).toEqual([])
  })

  it('lists only lowercase words of three or more letters, as the tokenizer produces', () => {
    for (const word of STOP_WORDS) expect(word).toMatch(/^\p{Ll}{3,}$/u)
  })

  it('answers only lowercase, non-stop words of three or more letters (with their marks) found in the text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (text) => {
        const lowercase = text.toLowerCase().normalize('NFC')
        for (const word of contentWords(text)) {
          expect(word).toMatch(/^\p{L}\p{M}*(?:\p{L}\p{M}*){2,}$/u)
          expect(word).toBe(word.toLowerCase())
          expect(STOP_WORDS.has(word)).toBe(false)
          expect(lowercase).toContain(word)
        }
      }),
    )
  })
})
