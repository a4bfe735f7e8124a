/** Who makes a request, as its bearer credential says; tenancy comes from here only. */
export type Principal =
  | {
      readonly kind: 'session'
      readonly userId: string
      readonly companyId: number
      /** Null when the access token names no login (see `AccessTokenClaims`). */
      readonly loginId: string | null
    }
  | {
      readonly kind: 'api-token'
      /** The user who created the token. */
      readonly userId: string
      readonly companyId: number
      readonly apiTokenId: string
    }
