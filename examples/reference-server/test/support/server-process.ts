import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'

/** The server's entry point, from its sources. */
export const main = new URL('../../src/main.ts', import.meta.url).pathname

export interface ServerProcess {
  readonly child: ChildProcess
  /** The printed `listening on` URL; rejects if the process exits first. */
  readonly listening: Promise<string>
  output(): { stdout: string; stderr: string }
  /** SIGTERM, then the exit code (null when a signal ended it). */
  stop(): Promise<number | null>
}

/**
 * The server as `npm start` runs it, from sources, in its own process. The test's own
 * environment may point at a database (CI exports DATABASE_URL): each test says which storage it
 * wants.
 */
export function startServerProcess(
  environment: Record<string, string>,
  /** Another way to start it, such as `npm start` in a given folder. */
  command: { file: string; args: readonly string[]; cwd?: string } = {
    file: process.execPath,
    args: ['--conditions=source', '--import', 'tsx', main],
  },
): ServerProcess {
  const { DATABASE_URL: _database, JWT_SECRET: _secret, ...inherited } = process.env
  const child = spawn(command.file, command.args, {
    env: { ...inherited, LOG_LEVEL: 'silent', HOST: '127.0.0.1', PORT: '0', ...environment },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(command.cwd === undefined ? {} : { cwd: command.cwd }),
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
  const listening = new Promise<string>((resolve, reject) => {
    const check = () => {
      const match = /listening on (https?:\/\/\S+)/.exec(stdout)
      if (match) resolve(match[1]!)
    }
    child.stdout!.on('data', check)
    void exited.then(([code]) => reject(new Error(`exited with ${code}: ${stderr}`)))
  })
  // A test that fails before awaiting it must not leave an unhandled rejection behind.
  listening.catch(() => {})
  return {
    child,
    listening,
    output: () => ({ stdout, stderr }),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const [code] = await exited
      return code
    },
  }
}
