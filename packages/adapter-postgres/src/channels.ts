import { createHash } from 'node:crypto'
import type { DbClient } from './db.js'

export const JOBS_CHANNEL = 'switchboard_jobs'
export const EVENTS_CHANNEL = 'switchboard_events'

const CHANNEL_MAX = 63

/**
 * The channel name for this database's schema. Channels are shared by the whole database while
 * tables live in a schema, so two installations in two schemas (tests, tenants of a host) must not
 * wake each other's workers or hear each other's events. `public` keeps the plain name.
 */
export async function scopedChannel(client: DbClient, base: string): Promise<string> {
  const [row] = await client.query<{ schema: string | null }>('SELECT current_schema() AS schema')
  const schema = row?.schema ?? 'public'
  if (schema === 'public') return base
  const suffix = schema.toLowerCase().replace(/[^a-z0-9_]/g, '_')
  const name = `${base}__${suffix}`
  if (name.length <= CHANNEL_MAX && suffix === schema) return name
  // Long or unusual schema names: a hash keeps the name valid and distinct.
  const digest = createHash('sha256').update(schema).digest('hex').slice(0, 16)
  return `${base}__${suffix}`.slice(0, CHANNEL_MAX - digest.length - 1) + `_${digest}`
}
