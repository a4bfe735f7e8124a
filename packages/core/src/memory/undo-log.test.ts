import { describe, expect, it } from 'vitest'
import { createJournal } from './undo-log.js'

describe('the undo journal', () => {
  it('takes back inserts, replacements and removals, latest first, on rollback and not after a commit', () => {
    const rows = new Map([['kept', 1]])
    const journal = createJournal()
    journal.insert(rows, 'new', 2)
    journal.replace(rows, 'kept', 3, 1)
    journal.replace(rows, 'new', 4, 2)
    journal.remove(rows, 'kept', 3)
    journal.rollback()
    expect([...rows]).toEqual([['kept', 1]])

    journal.insert(rows, 'new', 5)
    journal.replace(rows, 'kept', 6, 1)
    journal.insert(rows, 'gone', 7)
    journal.remove(rows, 'gone', 7)
    journal.commit()
    journal.rollback()
    expect([...rows]).toEqual([
      ['kept', 6],
      ['new', 5],
    ])
  })
})
