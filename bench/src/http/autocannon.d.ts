/**
 * The part of autocannon 9's programmatic API this bench uses; the package ships no types.
 * https://github.com/mcollina/autocannon#api
 */
declare module 'autocannon' {
  export interface Options {
    readonly url: string
    readonly connections?: number
    /** Seconds. */
    readonly duration?: number
    readonly method?: string
    readonly headers?: Readonly<Record<string, string>>
    readonly body?: string
    /** Worker threads that send the requests, so the process's main thread is left to the servers. */
    readonly workers?: number
  }

  /** Percentiles of a histogram, named `p50`, `p97_5`, `p99` and so on. */
  export interface Histogram {
    readonly average: number
    readonly mean: number
    readonly min: number
    readonly max: number
    readonly p50: number
    readonly p90: number
    readonly p99: number
    readonly total: number
  }

  export interface Result {
    /** Seconds, as measured. */
    readonly duration: number
    /** Milliseconds. */
    readonly latency: Histogram
    /** Per-second samples of completed requests; `total` is every completed request. */
    readonly requests: Histogram
    readonly errors: number
    readonly timeouts: number
    readonly non2xx: number
    readonly statusCodeStats: Readonly<Record<string, { readonly count: number }>>
  }

  /** Without a callback the run is a thenable that resolves with its result. */
  export default function autocannon(options: Options): PromiseLike<Result>
}
