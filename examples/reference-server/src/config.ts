import { ConfigError } from '@switchboard/core'
import express from 'express'
import { z } from 'zod'

export interface ServerConfig {
  readonly port: number
  readonly host: string
  readonly databaseUrl: string | undefined
  /** A folder, or `memory` for storage that keeps nothing. */
  readonly dataDir: string
  readonly jwtSecret: string | undefined
  readonly accessTokenTtlSeconds: number
  readonly refreshTokenTtlSeconds: number
  readonly refreshReuseIntervalSeconds: number
  readonly openAiApiKey: string | undefined
  readonly openAiBaseUrl: string | undefined
  readonly publicUrl: string | undefined
  readonly logLevel: string
  readonly tlsCertFile: string | undefined
  readonly tlsKeyFile: string | undefined
  readonly trustProxy: boolean | number | string | undefined
  readonly production: boolean
  readonly superadminEmails: readonly string[]
}

const optional = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value.trim()))
const wholeNumber = (min: number, max = Number.MAX_SAFE_INTEGER, tooLarge?: string) =>
  optional.pipe(
    z
      .string()
      .regex(/^\d+$/, 'must be a whole number')
      .transform(Number)
      .pipe(z.number().min(min).max(max, tooLarge))
      .optional(),
  )
/**
 * Token lifetimes end within 100 years: a refresh token ending past the last date JavaScript holds
 * (about 270,000 years from now) started the server and failed every login with a 500.
 */
const TOKEN_TTL_MAX_S = 3_155_760_000
const seconds = (fallback: number) =>
  wholeNumber(1, TOKEN_TTL_MAX_S, `must be at most ${TOKEN_TTL_MAX_S} (100 years)`).transform(
    (value) => value ?? fallback,
  )

const environmentSchema = z.object({
  PORT: wholeNumber(0, 65_535),
  HOST: optional,
  DATABASE_URL: optional.pipe(
    z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
      .optional(),
  ),
  DATA_DIR: optional,
  // Any length is accepted (a short one is warned about at start): a server that refuses to start
  // over a secret the operator chose helps nobody.
  JWT_SECRET: optional,
  ACCESS_TOKEN_TTL_S: seconds(3600),
  REFRESH_TOKEN_TTL_S: seconds(2_592_000),
  REFRESH_REUSE_INTERVAL_S: wholeNumber(0).transform((value) => value ?? 10),
  OPENAI_API_KEY: optional,
  OPENAI_BASE_URL: optional.pipe(
    z
      .url()
      .refine((value) => {
        // fetch refuses a URL with credentials, so no call could use them (the key goes in
        // OPENAI_API_KEY); kept, they would be written to the log at start. A query or fragment
        // would swallow the paths appended to it.
        const { username, password } = new URL(value)
        return username === '' && password === '' && !value.includes('?') && !value.includes('#')
      }, 'must have no user name, password, query or fragment (the API key goes in OPENAI_API_KEY)')
      .optional(),
  ),
  PUBLIC_URL: optional.pipe(
    z
      .url()
      .refine(
        (value) => !value.includes('?') && !value.includes('#'),
        'must have no query or fragment: the webhook paths are appended to it',
      )
      .optional(),
  ),
  LOG_LEVEL: optional.pipe(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional()),
  TLS_CERT_FILE: optional,
  TLS_KEY_FILE: optional,
  TRUST_PROXY: optional,
  NODE_ENV: optional,
  SUPERADMIN_EMAILS: optional,
})

/**
 * Express's `trust proxy` accepts booleans, hop counts and address lists; keep what it means.
 * Express reads an address list as it is set: tried here, a value it cannot read is refused with
 * the variable's name before anything opens, not by Express once the storage is open.
 */
function trustProxyValue(raw: string | undefined): boolean | number | string | undefined {
  if (raw === undefined) return undefined
  if (raw === 'true') return true
  if (raw === 'false') return false
  if (/^\d+$/.test(raw)) return Number(raw)
  try {
    express().set('trust proxy', raw)
  } catch (error) {
    throw new ConfigError(
      `invalid environment: TRUST_PROXY: ${error instanceof Error ? error.message : String(error)} (true, a hop count, loopback/linklocal/uniquelocal or addresses, comma-separated)`,
    )
  }
  return raw
}

/** Reads CONTRACT §1's environment; a bad value fails fast with what to fix. */
export function readConfig(environment: NodeJS.ProcessEnv): ServerConfig {
  const parsed = environmentSchema.safeParse(environment)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)
    throw new ConfigError(`invalid environment: ${problems.join('; ')}`)
  }
  const env = parsed.data
  if ((env.TLS_CERT_FILE === undefined) !== (env.TLS_KEY_FILE === undefined)) {
    throw new ConfigError('set both TLS_CERT_FILE and TLS_KEY_FILE to serve HTTPS, or neither')
  }
  const production = env.NODE_ENV === 'production'
  if (env.JWT_SECRET === undefined && (env.DATABASE_URL !== undefined || production)) {
    throw new ConfigError(
      'JWT_SECRET is required when DATABASE_URL is set or NODE_ENV=production: every process must sign with the same secret (32 bytes or more)',
    )
  }
  return {
    port: env.PORT ?? 3000,
    host: env.HOST ?? '127.0.0.1',
    databaseUrl: env.DATABASE_URL,
    dataDir: env.DATA_DIR ?? './.switchboard',
    jwtSecret: env.JWT_SECRET,
    accessTokenTtlSeconds: env.ACCESS_TOKEN_TTL_S,
    refreshTokenTtlSeconds: env.REFRESH_TOKEN_TTL_S,
    refreshReuseIntervalSeconds: env.REFRESH_REUSE_INTERVAL_S,
    openAiApiKey: env.OPENAI_API_KEY,
    openAiBaseUrl: env.OPENAI_BASE_URL,
    publicUrl: env.PUBLIC_URL?.replace(/\/+$/, ''),
    logLevel: env.LOG_LEVEL ?? 'info',
    tlsCertFile: env.TLS_CERT_FILE,
    tlsKeyFile: env.TLS_KEY_FILE,
    trustProxy: trustProxyValue(env.TRUST_PROXY),
    production,
    superadminEmails: (env.SUPERADMIN_EMAILS ?? '')
      .split(',')
      .map((email) => email.trim())
      .filter((email) => email !== ''),
  }
}
