import WebSocket from 'ws'

/** A frame as the server sent it. */
export type Frame = { readonly type: string } & Record<string, unknown>

/** A `ws` client that keeps every frame, so a test can wait for the next one of a kind. */
export interface Visitor {
  readonly socket: WebSocket
  /** Every frame received so far, in order. */
  readonly frames: readonly Frame[]
  /** The next frame not taken yet that matches (by default: any); fails after `timeoutMs`. */
  next(match?: string | ((frame: Frame) => boolean), timeoutMs?: number): Promise<Frame>
  /** Waits `ms` and says whether a matching frame came meanwhile (without taking it). */
  quietFor(ms: number, match?: string | ((frame: Frame) => boolean)): Promise<boolean>
  send(frame: unknown): void
  /** Resolves with the close code. */
  readonly closed: Promise<number>
  close(): Promise<void>
}

export interface Refusal {
  readonly status: number
  readonly body: unknown
}

const toPredicate = (match: string | ((frame: Frame) => boolean) | undefined) =>
  match === undefined
    ? () => true
    : typeof match === 'string'
      ? (frame: Frame) => frame.type === match
      : match

/** Connects, and resolves once the socket is open. */
export async function connectVisitor(url: string, options: WebSocket.ClientOptions = {}): Promise<Visitor> {
  const socket = new WebSocket(url, options)
  const frames: Frame[] = []
  const taken = new Set<number>()
  const waiters = new Set<() => void>()
  socket.on('message', (data) => {
    frames.push(JSON.parse(data.toString()) as Frame)
    for (const wake of waiters) wake()
  })
  const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)))
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
    socket.once('unexpected-response', (_request, response) =>
      reject(new Error(`refused with ${response.statusCode}`)),
    )
  })
  socket.on('error', () => undefined)

  const find = (predicate: (frame: Frame) => boolean) =>
    frames.findIndex((frame, index) => !taken.has(index) && predicate(frame))

  return {
    socket,
    frames,
    closed,
    next(match, timeoutMs = 5000) {
      const predicate = toPredicate(match)
      return new Promise((resolve, reject) => {
        const check = () => {
          const index = find(predicate)
          if (index === -1) return false
          taken.add(index)
          waiters.delete(wake)
          clearTimeout(timer)
          resolve(frames[index]!)
          return true
        }
        const wake = () => {
          check()
        }
        const timer = setTimeout(() => {
          waiters.delete(wake)
          reject(
            new Error(
              `no ${typeof match === 'string' ? match : 'matching'} frame within ${timeoutMs} ms; got ${JSON.stringify(frames)}`,
            ),
          )
        }, timeoutMs)
        if (!check()) waiters.add(wake)
      })
    },
    async quietFor(ms, match) {
      const predicate = toPredicate(match)
      const before = frames.length
      await new Promise((resolve) => setTimeout(resolve, ms))
      return !frames.slice(before).some(predicate)
    },
    send(frame) {
      socket.send(typeof frame === 'string' ? frame : JSON.stringify(frame))
    },
    async close() {
      if (socket.readyState === WebSocket.CLOSED) return
      socket.close()
      await closed
    },
  }
}

/** Tries to connect and expects the handshake to be refused with a plain HTTP answer. */
export function refusal(url: string, headers: Record<string, string> = {}): Promise<Refusal> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers })
    socket.once('open', () => {
      socket.close()
      reject(new Error('the handshake was accepted'))
    })
    socket.once('unexpected-response', (_request, response) => {
      let text = ''
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString()
      })
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }))
    })
    socket.on('error', () => undefined)
  })
}
