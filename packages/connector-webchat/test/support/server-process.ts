import { type ChildProcess, spawn } from 'node:child_process'
import { once } from 'node:events'

const main = new URL('../../../../examples/reference-server/src/main.ts', import.meta.url).pathname

export interface ServerProcess {
  readonly child: ChildProcess
  /** The printed `listening on` URL; rejects if the process exits first. */
  readonly listening: Promise<string>
  /** SIGTERM, then the exit code. */
  stop(): Promise<number | null>
}

/** The reference server as `npm start` runs it, from sources, in a process of its own. */
export function startServerProcess(environment: Record<string, string>): ServerProcess {
  const { DATABASE_URL: _database, JWT_SECRET: _secret, ...inherited } = process.env
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main], {
    env: { ...inherited, LOG_LEVEL: 'silent', HOST: '127.0.0.1', PORT: '0', ...environment },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = once(child, 'exit') as Promise<[number | null]>
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', () => {
      const match = /listening on (https?:\/\/\S+)/.exec(stdout)
      if (match) resolve(match[1]!)
    })
    void exited.then(([code]) => reject(new Error(`exited with ${code}: ${stderr}`)))
  })
  listening.catch(() => undefined)
  return {
    child,
    listening,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const [code] = await exited
      return code
    },
  }
}
