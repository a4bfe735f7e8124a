/**
 * What a repository sees while it writes: every write registers its inverse, so a transaction
 * that fails is taken back write by write instead of restoring a copy of the whole store.
 */
export interface UndoLog {
  /** Registers how to take back a write that was just made. */
  record(undo: () => void): void
  set<K, V>(map: Map<K, V>, key: K, value: V): void
  delete<K, V>(map: Map<K, V>, key: K): void
  /** Runs `effect` once the writes are committed; never when they are rolled back. */
  afterCommit(effect: () => void): void
}

export interface UndoMark {
  readonly undos: number
  readonly effects: number
}

export interface Journal extends UndoLog {
  readonly open: boolean
  mark(): UndoMark
  /** Takes back the writes made since `mark`, keeping the earlier ones. */
  undoTo(mark: UndoMark): void
  commit(): void
  rollback(): void
}

export function createJournal(): Journal {
  const undos: Array<() => void> = []
  const effects: Array<() => void> = []
  let open = true

  const undoTo = (mark: UndoMark): void => {
    while (undos.length > mark.undos) undos.pop()!()
    effects.length = Math.min(effects.length, mark.effects)
  }

  const journal: Journal = {
    get open() {
      return open
    },
    record(undo) {
      undos.push(undo)
    },
    set(map, key, value) {
      if (map.has(key)) {
        const previous = map.get(key) as typeof value
        undos.push(() => map.set(key, previous))
      } else {
        undos.push(() => map.delete(key))
      }
      map.set(key, value)
    },
    delete(map, key) {
      if (!map.has(key)) return
      const previous = map.get(key) as Parameters<typeof map.set>[1]
      undos.push(() => map.set(key, previous))
      map.delete(key)
    },
    afterCommit(effect) {
      effects.push(effect)
    },
    mark: () => ({ undos: undos.length, effects: effects.length }),
    undoTo,
    commit() {
      open = false
      undos.length = 0
      for (const effect of effects.splice(0)) effect()
    },
    rollback() {
      open = false
      undoTo({ undos: 0, effects: 0 })
    },
  }
  return journal
}

/**
 * Runs the synchronous body of one repository call. All of a call's writes happen in one
 * synchronous stretch, so a call is atomic; the runner decides what surrounds it (the lock and a
 * journal of its own, or the journal of the enclosing transaction).
 */
export type Statement = <T>(body: (log: UndoLog) => T) => Promise<T>

/** Statements inside a transaction: no lock (the transaction holds it), one shared journal. */
export function transactionStatement(journal: Journal): Statement {
  return (body) => {
    if (!journal.open) {
      return Promise.reject(new Error('The transaction is already over; use the storage instead'))
    }
    // A failing call leaves none of its own writes behind, like a failed SQL statement.
    const mark = journal.mark()
    try {
      return Promise.resolve(body(journal))
    } catch (error) {
      journal.undoTo(mark)
      return Promise.reject(error)
    }
  }
}
