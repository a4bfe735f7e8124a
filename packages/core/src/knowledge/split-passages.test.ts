import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { splitPassages } from './split-passages.js'

describe('splitPassages', () => {
  it('splits at blank lines and trims each passage', () => {
    expect(splitPassages('  First passage.  \n\nSecond passage.\n')).toEqual([
      'First passage.',
      'Second passage.',
    ])
  })

  it('treats several blank or whitespace-only lines as one break', () => {
    expect(splitPassages('One.\n\n \t \n\n\nTwo.')).toEqual(['One.', 'Two.'])
  })

  it('keeps the lines of a paragraph together, as written', () => {
    expect(splitPassages('Line one\nline two\n\nNext')).toEqual(['Line one\nline two', 'Next'])
  })

  it('understands Windows and old Mac line breaks', () => {
    expect(splitPassages('One.\r\n\r\nTwo.\r\rThree.\r\n  \r\nFour.')).toEqual([
      'One.',
      'Two.',
      'Three.',
      'Four.',
    ])
  })

  it('drops empty passages', () => {
    expect(splitPassages('')).toEqual([])
    expect(splitPassages('\n\n  \n\n')).toEqual([])
    expect(splitPassages('\n\nOnly.\n\n')).toEqual(['Only.'])
  })

  it('answers trimmed, non-empty passages without blank lines, in order', () => {
    const line = fc.stringMatching(/^[a-z .]{0,12}$/)
    fc.assert(
      fc.property(fc.array(line), (lines) => {
        const content = lines.join('\n')
        const passages = splitPassages(content)
        let searchFrom = 0
        for (const passage of passages) {
          expect(passage).toBe(passage.trim())
          expect(passage).not.toBe('')
          expect(passage).not.toMatch(/\n\s*\n/)
          const position = content.indexOf(passage, searchFrom)
          expect(position).toBeGreaterThanOrEqual(searchFrom)
          searchFrom = position + passage.length
        }
        expect(passages.join('').replace(/\s/g, '')).toBe(content.replace(/\s/g, ''))
      }),
    )
  })
})
