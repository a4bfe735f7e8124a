// `npm install` (prepare) and `npm start` (prestart) build only what is missing or older than its
// sources: the install builds everything once, so the first start is as fast as any (CONTRACT §1
// asks for 5 s once built), and a checkout installed with --ignore-scripts still builds at start.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
const order = [
  'packages/core',
  'packages/adapter-express',
  'packages/adapter-postgres',
  'packages/provider-openai',
  'packages/connector-msgplatform',
  'packages/connector-webchat',
  'examples/reference-server',
]

function newest(dir) {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

for (const relative of order) {
  const dir = join(root, relative)
  if (!existsSync(join(dir, 'package.json'))) continue
  const src = join(dir, 'src')
  const dist = join(dir, 'dist')
  if (!existsSync(src)) continue
  if (existsSync(dist) && newest(dist) >= newest(src)) continue
  console.error(`building ${relative}…`)
  const result = spawnSync('npm', ['run', 'build', '--silent'], {
    cwd: dir,
    // tsup's progress is noise here; its errors still show on stderr.
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, SWITCHBOARD_BUILD_FOR_START: '1' },
  })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

if (!existsSync(join(root, 'examples/reference-server/package.json'))) {
  console.error('The reference server is not built yet: it arrives with the HTTP API (issue 3).')
  process.exit(1)
}
