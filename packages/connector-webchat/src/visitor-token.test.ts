import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { newVisitorId, signVisitorToken, verifyVisitorToken } from './visitor-token.js'

const secret = 'integration-secret-0123456789'

describe('visitor tokens', () => {
  it('verify for the integration and secret they were signed with, and name the visitor', () => {
    const visitorId = newVisitorId()
    const token = signVisitorToken({ integrationId: '42', visitorId, secret })
    expect(verifyVisitorToken({ token, integrationId: '42', secret })).toBe(visitorId)
    expect(verifyVisitorToken({ token, integrationId: '43', secret })).toBeNull()
    expect(verifyVisitorToken({ token, integrationId: '42', secret: `${secret}x` })).toBeNull()
  })

  it('reject another visitor id under the same signature', () => {
    const token = signVisitorToken({ integrationId: '42', visitorId: newVisitorId(), secret })
    const [version, integrationId, , signature] = token.split('.')
    const forged = [version, integrationId, newVisitorId(), signature].join('.')
    expect(verifyVisitorToken({ token: forged, integrationId: '42', secret })).toBeNull()
  })

  it('answer null, never throw, for any string', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (token) => {
        expect(verifyVisitorToken({ token, integrationId: '42', secret })).toBeNull()
      }),
    )
  })
})
