import {
  ConfigError,
  createAccounts,
  createBilling,
  createMemoryKnowledgeIndex,
  createMemoryStorage,
  createOfflineProvider,
  createSwitchboard,
} from '@switchboard/core'
import { createFakePasswordHasher, createFakeTokenSigner } from '@switchboard/core/testing'
import { afterAll, describe, expect, it } from 'vitest'
import { createRouter, type RouterOptions } from './create-router.js'

const storage = createMemoryStorage()
const switchboard = createSwitchboard({
  storage,
  model: createOfflineProvider(),
  knowledge: createMemoryKnowledgeIndex(),
})
const valid: RouterOptions = {
  switchboard,
  accounts: createAccounts({
    storage,
    hasher: createFakePasswordHasher(),
    signer: createFakeTokenSigner({ secret: 'test-secret-of-the-express-adapter' }),
  }),
  billing: createBilling({ storage }),
  publicUrl: 'https://chat.example.com',
}
afterAll(() => switchboard.stop())

/** What a caller from plain JavaScript may pass, whatever the types say. */
const create = (options: unknown) => () => createRouter(options as RouterOptions)

describe('createRouter, given options it cannot serve with', () => {
  it('names each missing option, what it got and what it needs', () => {
    expect(create(undefined)).toThrow(ConfigError)
    expect(create(undefined)).toThrow(/createRouter needs an options object .*, got undefined/)
    expect(create({})).toThrow(/createRouter: switchboard must be a Switchboard .*, got undefined/)
    expect(create({ ...valid, switchboard: {} })).toThrow(
      /switchboard must be a Switchboard .*, got an object/,
    )
    expect(create({ ...valid, accounts: undefined })).toThrow(
      /createRouter: accounts must be Accounts .*, got undefined/,
    )
    expect(create({ ...valid, billing: null })).toThrow(/createRouter: billing must be Billing .*, got null/)
  })

  it('refuses a publicUrl that is not an absolute http(s) URL a path can follow', () => {
    for (const [publicUrl, given] of [
      [undefined, 'undefined'],
      ['not a url', '"not a url"'],
      ['chat.example.com', '"chat.example.com"'],
      ['ftp://chat.example.com', '"ftp://chat.example.com"'],
      ['https://chat.example.com/?channel=1', '"https://chat.example.com/?channel=1"'],
      ['https://chat.example.com/?', '"https://chat.example.com/?"'],
      ['https://chat.example.com#', '"https://chat.example.com#"'],
    ] as const) {
      expect(create({ ...valid, publicUrl })).toThrow(ConfigError)
      expect(create({ ...valid, publicUrl })).toThrow(
        `createRouter: publicUrl must be an absolute http(s) URL without a query or fragment, the base of the webhook URLs handed out for integrations (e.g. "https://chat.example.com"), got ${given}`,
      )
    }
  })

  it('takes an http(s) URL, with a path or a trailing slash', () => {
    for (const publicUrl of [
      'https://chat.example.com/',
      'http://127.0.0.1:3000',
      'https://example.com/chat',
    ]) {
      expect(create({ ...valid, publicUrl })).not.toThrow()
    }
  })
})
