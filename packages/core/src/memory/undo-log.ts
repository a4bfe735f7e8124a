/**
 * What a repository sees while it writes: every write registers its inverse, so a transaction
 * that fails is taken back write by write instead of restoring a copy of the whole store.
 */
export interface UndoLog {
  /** Registers how to take back a write that was just made. */
  record(undo: () => void): void
  set<K, V>(map: Map<K, V>, key: K, value: V): void
  /**
   * `set` of a key the caller just found absent, or of one it just read as `previous`: a row's
   * table is a large map, and `set` looks the key up twice more to learn what to take back.
   */
  insert<K, V>(map: Map<K, V>, key: K, value: V): void
  replace<K, V>(map: Map<K, V>, key: K, value: V, previous: V): void
  delete<K, V>(map: Map<K, V>, key: K): void
  /** `delete` of a key the caller just read as `previous`, for the same reason. */
  remove<K, V>(map: Map<K, V>, key: K, previous: V): void
  /** Runs `effect` once the writes are committed; never when they are rolled back. */
  afterCommit(effect: () => void): void
}

export interface UndoMark {
  readonly undos: number
  readonly effects: number
}

export interface Journal extends UndoLog {
  /** The first statement of the transaction that failed: its transaction commits nothing then. */
  readonly failure: { readonly error: unknown } | null
  failed(error: unknown): void
  mark(): UndoMark
  /** Takes back the writes made since `mark`, keeping the earlier ones. */
  undoTo(mark: UndoMark): void
  commit(): void
  rollback(): void
}

const EMPTY_MARK: UndoMark = { undos: 0, effects: 0 }

/**
 * A class with plain fields rather than an object literal: every storage call uses a journal, and
 * a literal with a getter kept V8 off its fast property access (about 20 times the cost of a
 * create and commit).
 */
class UndoJournal implements Journal {
  failure: { readonly error: unknown } | null = null
  private undos: Array<() => void> = []
  private effects: Array<() => void> = []

  record(undo: () => void): void {
    this.undos.push(undo)
  }

  set<K, V>(map: Map<K, V>, key: K, value: V): void {
    if (map.has(key)) {
      const previous = map.get(key) as V
      this.undos.push(() => map.set(key, previous))
    } else {
      this.undos.push(() => map.delete(key))
    }
    map.set(key, value)
  }

  insert<K, V>(map: Map<K, V>, key: K, value: V): void {
    this.undos.push(() => map.delete(key))
    map.set(key, value)
  }

  replace<K, V>(map: Map<K, V>, key: K, value: V, previous: V): void {
    this.undos.push(() => map.set(key, previous))
    map.set(key, value)
  }

  delete<K, V>(map: Map<K, V>, key: K): void {
    if (!map.has(key)) return
    const previous = map.get(key) as V
    this.undos.push(() => map.set(key, previous))
    map.delete(key)
  }

  remove<K, V>(map: Map<K, V>, key: K, previous: V): void {
    this.undos.push(() => map.set(key, previous))
    map.delete(key)
  }

  afterCommit(effect: () => void): void {
    this.effects.push(effect)
  }

  failed(error: unknown): void {
    this.failure ??= { error }
  }

  mark(): UndoMark {
    return { undos: this.undos.length, effects: this.effects.length }
  }

  undoTo(mark: UndoMark): void {
    const undos = this.undos
    while (undos.length > mark.undos) undos.pop()!()
    if (this.effects.length > mark.effects) this.effects.length = mark.effects
  }

  commit(): void {
    // Dropped rather than emptied in place (a slower call): nothing is taken back after a commit.
    // Reads record nothing and keep theirs.
    if (this.undos.length > 0) this.undos = []
    // Most calls register no effect; only the ones that do pay for a fresh list.
    if (this.effects.length === 0) return
    const effects = this.effects
    this.effects = []
    for (const effect of effects) effect()
  }

  rollback(): void {
    this.undoTo(EMPTY_MARK)
  }
}

export function createJournal(): Journal {
  return new UndoJournal()
}

/**
 * Runs the synchronous body of one repository call. All of a call's writes happen in one
 * synchronous stretch, so a call is atomic; the runner decides what surrounds it (the lock and a
 * journal of its own, or the journal of the enclosing transaction).
 */
export type Statement = <T>(body: (log: UndoLog) => T) => Promise<T>

/** Where the statements of a storage's transactions find the journal of the one running now. */
export interface TransactionSlot {
  /** Null between transactions. */
  readonly journal: Journal | null
}

/**
 * Statements inside a transaction: no lock (the transaction holds it), the running transaction's
 * journal. Read from `slot` at each call, so one set of repositories serves every transaction.
 */
export function transactionStatement(slot: TransactionSlot): Statement {
  return (body) => {
    const journal = slot.journal
    if (journal === null) {
      return Promise.reject(new Error('The transaction is already over; use the storage instead'))
    }
    // A failing call leaves none of its own writes behind, like a failed SQL statement, and, as
    // in PostgreSQL, dooms its transaction even if the caller goes on.
    const mark = journal.mark()
    try {
      return Promise.resolve(body(journal))
    } catch (error) {
      journal.undoTo(mark)
      journal.failed(error)
      return Promise.reject(error)
    }
  }
}
