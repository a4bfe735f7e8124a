export interface SubscribeOptions {
  /**
   * Called when messages published since the subscription went live may not have reached it (a
   * bus whose connection broke and is back), so a subscriber that must not miss any can catch up
   * from storage. A bus that never misses a message never calls it.
   */
  readonly onMissed?: () => void
}

/** Publish/subscribe that reaches every process sharing the same backend. */
export interface EventBus {
  publish(topic: string, payload: unknown): Promise<void>
  /** Resolves once the subscription is live; the returned function unsubscribes. */
  subscribe(
    topic: string,
    handler: (payload: unknown) => void,
    options?: SubscribeOptions,
  ): Promise<() => Promise<void>>
  close(): Promise<void>
}
