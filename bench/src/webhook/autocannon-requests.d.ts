/**
 * The per-request hook of autocannon 9 that the webhook bench adds to the options declared in
 * `../http/autocannon.d.ts`: with worker threads, `setupRequest` is the path of a file to load.
 */
declare module 'autocannon' {
  export interface RequestSpec {
    readonly method?: string
    readonly path?: string
    /** Absolute path of a CommonJS file whose export mutates and returns each request. */
    readonly setupRequest?: string
  }

  export interface Options {
    readonly requests?: readonly RequestSpec[]
  }
}
