/** One webhook delivery as the HTTP edge received it, before anything was parsed. */
export interface WebhookRequest {
  /** The `{integrationId}` of the webhook URL, as it appeared in the path. */
  readonly integrationId: string
  /** The body exactly as received: signatures are computed over these bytes. */
  readonly rawBody: Uint8Array
  /** Header names in any case; a repeated header may come as an array. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

/**
 * What to answer: an HTTP status and a JSON body (`{error:{code,message}}` for an error). The
 * receiver decides the status because it is the channel's HTTP protocol (a platform retries on
 * 5xx, stops on 2xx), so any HTTP framework can serve it unchanged.
 */
export interface WebhookAnswer {
  readonly status: number
  readonly body: unknown
}

/**
 * The inbound side of a webhook channel, framework-free: an HTTP adapter checks transport rules
 * (HTTPS, body size), then hands over the raw request. A thrown error means "could not store it":
 * the edge answers 500 so the platform retries.
 */
export interface WebhookReceiver {
  /** A `POST` to the integration's webhook URL. */
  handle(request: WebhookRequest): Promise<WebhookAnswer>
  /** A `GET` on the same URL, which platforms send to check that it is live. */
  handleVerification(request: { readonly integrationId: string }): Promise<WebhookAnswer>
  /**
   * Told of a `POST` the edge refused before handing it over (not over HTTPS in production), so
   * the receiver can log it against the integration; the edge answers the refusal whatever this does.
   */
  refused?(refusal: WebhookRefusal): Promise<void>
}

export interface WebhookRefusal {
  readonly integrationId: string
  /** The status the edge answers. */
  readonly status: number
  /** Why, in a few words, as a webhook log's reason. */
  readonly reason: string
}
