/**
 * SQL that reads, for each distinct value of a JSON array parameter, the one row `match` finds
 * for it: `match` is a `SELECT … FROM … WHERE …` that compares a key column with `wanted.value`
 * (text). Each value becomes one probe of a unique index. The plain `key IN (SELECT values)`
 * leaves the plan to the statistics, and PostgreSQL keeps a connection's generic plan for as long
 * as the connection lives: one chosen while the table was small went on reading every row of the
 * integration for each batch of webhooks as the table grew. A lateral subquery with a LIMIT is
 * never flattened into a join, so no such plan exists for it. `locking` (` FOR SHARE`) locks each
 * row found.
 */
export function lookUpEachSql(valuesParameter: string, match: string, locking = ''): string {
  return `SELECT found.* FROM (SELECT DISTINCT value FROM jsonb_array_elements_text(${valuesParameter}::jsonb)) AS wanted
    CROSS JOIN LATERAL (${match} LIMIT 1${locking}) AS found`
}
