/** Publish/subscribe that reaches every process sharing the same backend. */
export interface EventBus {
  publish(topic: string, payload: unknown): Promise<void>
  /** Resolves once the subscription is live; the returned function unsubscribes. */
  subscribe(topic: string, handler: (payload: unknown) => void): Promise<() => Promise<void>>
  close(): Promise<void>
}
