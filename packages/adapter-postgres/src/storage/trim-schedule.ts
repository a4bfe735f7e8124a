/**
 * When to trim an integration's rows (its webhook log beyond the entries kept, its expired
 * delivery ids): on every `every`-th row this process writes for that integration, counted per
 * integration. A trim walks up to a thousand index entries, so it must not run on every row; a
 * counter shared by all integrations either skipped some for good (`insertion % 64`) or, once 64 or
 * more integrations wrote in turn, trimmed on every row. Counted in memory, so a rollback or
 * another process only moves a trim by a few rows: each process trims at least every `every` rows
 * it writes, and `list` leaves the surplus out meanwhile.
 */
export interface TrimSchedule {
  /** Counts `rows` written for the integration; true when its trim is due (and starts counting again). */
  due(integrationId: string, rows?: number): boolean
}

export function trimSchedule(every: number): TrimSchedule {
  const written = new Map<string, number>()
  return {
    due(integrationId, rows = 1) {
      const count = (written.get(integrationId) ?? 0) + rows
      if (count >= every) {
        written.delete(integrationId)
        return true
      }
      written.set(integrationId, count)
      return false
    },
  }
}
