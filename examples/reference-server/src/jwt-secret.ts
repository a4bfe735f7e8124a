import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * The signing secret when JWT_SECRET is not set: generated once and kept in the data folder, so
 * sessions survive a restart. With `DATA_DIR=memory` nothing is kept, so neither is the secret.
 */
export async function loadOrCreateJwtSecret(dataDir: string): Promise<string> {
  if (dataDir === 'memory') return randomBytes(48).toString('base64url')
  const path = join(dataDir, 'jwt-secret')
  try {
    const existing = (await readFile(path, 'utf8')).trim()
    if (existing.length >= 32) return existing
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  await mkdir(dataDir, { recursive: true })
  const secret = randomBytes(48).toString('base64url')
  await writeFile(path, `${secret}\n`, { mode: 0o600 })
  return secret
}
