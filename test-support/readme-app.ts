import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// Shared by the packages' README tests, which run a README's app the way a reader would: the code
// block exactly as written, saved as a file of its own and run with node.

const LISTEN = 'app.listen(3000)'

/** The first code block of the given language under a heading of the README, exactly as written. */
export async function readmeBlock(readme: URL, heading: string, language: string): Promise<string> {
  const text = await readFile(readme, 'utf8')
  const start = text.indexOf(heading)
  const code = new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``).exec(text.slice(start))?.[1]
  if (start < 0 || code === undefined)
    throw new Error(`the README has no ${language} block under "${heading}"`)
  return code
}

export interface ReadmeApp {
  /** `http://127.0.0.1:<port>`, where the app listens instead of the README's port 3000. */
  readonly base: string
  /** Stops the app and removes its file. */
  stop(): Promise<void>
}

/**
 * Runs a README's Express app, which must end in `app.listen(3000)`, from a folder inside the
 * package (so that its imports resolve as they would from an app's node_modules), with
 * `JWT_SECRET` set. Only the port differs from the README: the app takes a free one.
 */
export async function startReadmeApp(packageUrl: URL, code: string): Promise<ReadmeApp> {
  if (!code.includes(LISTEN)) throw new Error(`the README's app does not end in ${LISTEN}`)
  const packageDir = fileURLToPath(packageUrl)
  const folder = await mkdtemp(join(packageDir, '.readme-'))
  const file = join(folder, 'app.mts')
  await writeFile(
    file,
    code.replace(
      LISTEN,
      'const server = app.listen(0, () => console.log((server.address() as { port: number }).port))',
    ),
  )
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', file], {
    cwd: packageDir,
    env: { ...process.env, JWT_SECRET: 'a-secret-of-at-least-thirty-two-characters' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill()
      await once(child, 'exit')
    }
    await rm(folder, { recursive: true, force: true })
  }
  try {
    return { base: `http://127.0.0.1:${await firstLine(child)}`, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

async function firstLine(child: ChildProcess): Promise<string> {
  let output = ''
  let errors = ''
  child.stderr?.on('data', (chunk) => {
    errors += chunk
  })
  for await (const chunk of child.stdout!) {
    output += chunk
    if (output.includes('\n')) return output.slice(0, output.indexOf('\n'))
  }
  throw new Error(`the example printed nothing and ended: ${errors}`)
}
