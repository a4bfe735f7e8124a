import type { Db, DbClient } from '../../src/index.js'

interface PlanNode {
  readonly 'Node Type': string
  readonly 'Relation Name'?: string
  readonly 'Actual Rows'?: number
  readonly 'Actual Loops'?: number
  readonly 'Rows Removed by Filter'?: number
  readonly 'Rows Removed by Index Recheck'?: number
  readonly Plans?: readonly PlanNode[]
}

/** The table rows (or index entries) a plan's scans read, kept or filtered out, over all loops. */
function rowsReadBy(node: PlanNode): number {
  const read =
    node['Relation Name'] === undefined
      ? 0
      : ((node['Actual Rows'] ?? 0) +
          (node['Rows Removed by Filter'] ?? 0) +
          (node['Rows Removed by Index Recheck'] ?? 0)) *
        (node['Actual Loops'] ?? 1)
  return read + (node.Plans ?? []).reduce((sum, child) => sum + rowsReadBy(child), 0)
}

/**
 * `db`, counting the table rows each of its reads (`SELECT`, `WITH`) reads, as `EXPLAIN ANALYZE`
 * finds them: each is explained (so run once more) before it runs. For tests only.
 */
export function countingRowsRead(db: Db): { db: Db; rowsRead: () => number } {
  let rowsRead = 0
  const counting = (client: DbClient): DbClient['query'] =>
    (async (sql: string, params?: readonly unknown[]) => {
      if (/^\s*(SELECT|WITH)\b/i.test(sql)) {
        const [explained] = await client.query<{ 'QUERY PLAN': unknown }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`,
          params,
        )
        const plan = explained?.['QUERY PLAN']
        // pg parses the JSON, PGlite hands it over as text.
        const [root] = (typeof plan === 'string' ? JSON.parse(plan) : plan) as { Plan: PlanNode }[]
        rowsRead += rowsReadBy(root!.Plan)
        console.log(
          sql.slice(0, 60),
          JSON.stringify(
            root!.Plan,
            [
              'Node Type',
              'Relation Name',
              'Index Name',
              'Actual Rows',
              'Actual Loops',
              'Plans',
              'Join Type',
              'Rows Removed by Filter',
            ],
            1,
          ),
        )
      }
      return client.query(sql, params)
    }) as DbClient['query']
  return {
    db: {
      ...db,
      query: counting(db),
      transaction: (fn) => db.transaction((client) => fn({ query: counting(client) })),
    },
    rowsRead: () => rowsRead,
  }
}
