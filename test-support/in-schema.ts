/**
 * A PostgreSQL URL whose connections use `schema` first (the `options` parameter), so server
 * processes a test starts see only the tables of that test.
 */
export function inSchema(url: string, schema: string): string {
  const withSchema = new URL(url)
  withSchema.searchParams.set('options', `-c search_path=${schema}`)
  return withSchema.toString()
}
