import { afterEach, describe, expect, it } from 'vitest'
import { ConfigError } from '../domain/errors.js'
import { createMemoryKnowledgeIndex } from '../knowledge/memory-knowledge-index.js'
import { createMemoryStorage } from '../memory/memory-storage.js'
import { createOfflineProvider } from '../offline/offline-provider.js'
import type { Connector } from '../ports/connector.js'
import { createRecordingConnector } from '../testing/recording-connector.js'
import { createSwitchboard, type Switchboard, type SwitchboardOptions } from './create-switchboard.js'

const started: Switchboard[] = []
afterEach(async () => {
  await Promise.all(started.splice(0).map((switchboard) => switchboard.stop()))
})

function ports(): SwitchboardOptions {
  return {
    storage: createMemoryStorage(),
    model: createOfflineProvider(),
    knowledge: createMemoryKnowledgeIndex(),
  }
}

/** The options a caller from plain JavaScript may pass, whatever the types say. */
function start(options: unknown): Switchboard {
  const switchboard = createSwitchboard(options as SwitchboardOptions)
  started.push(switchboard)
  return switchboard
}

function configError(run: () => unknown): ConfigError {
  try {
    run()
  } catch (error) {
    if (ConfigError.isInstance(error)) return error
    throw error
  }
  throw new Error('expected a ConfigError, nothing was thrown')
}

describe('createSwitchboard, given options it cannot run with', () => {
  it('names each missing port, what it got and what it needs', () => {
    expect(configError(() => start(undefined)).message).toMatch(/createSwitchboard needs an options object/)
    expect(configError(() => start({})).message).toMatch(/storage must be a Storage .*got undefined/)
    expect(configError(() => start({ ...ports(), model: undefined })).message).toMatch(
      /model must be an LlmProvider .*got undefined/,
    )
    expect(configError(() => start({ ...ports(), model: { name: 'x' } })).message).toMatch(
      /model must be an LlmProvider .*got an object without complete\(\)/,
    )
    expect(configError(() => start({ ...ports(), knowledge: null })).message).toMatch(
      /knowledge must be a KnowledgeIndex .*got null/,
    )
    expect(configError(() => start({ ...ports(), storage: { jobs: {} } })).message).toMatch(
      /storage must be a Storage .*got an object without transaction\(\)/,
    )
  })

  it('refuses a storage missing a repository', () => {
    const { jobs: _jobs, ...storage } = createMemoryStorage()
    expect(configError(() => start({ ...ports(), storage })).message).toMatch(
      /storage must be a Storage .*got an object without jobs/,
    )
  })

  it('refuses a concurrency that is not a whole number of 0 or more', () => {
    for (const concurrency of [-1, 1.5, Number.NaN, '8']) {
      expect(configError(() => start({ ...ports(), concurrency })).message).toMatch(
        /concurrency must be a whole number of 0 or more .*, got/,
      )
    }
    expect(configError(() => start({ ...ports(), concurrency: -1 })).message).toMatch(/got -1$/)
    expect(configError(() => start({ ...ports(), concurrency: '8' })).message).toMatch(/got "8"$/)
  })

  it('refuses a lease or poll interval that is not a positive whole number of milliseconds', () => {
    expect(configError(() => start({ ...ports(), leaseMs: 0 })).message).toMatch(
      /leaseMs must be a positive whole number of milliseconds, got 0/,
    )
    expect(configError(() => start({ ...ports(), pollMs: -5 })).message).toMatch(
      /pollMs must be a positive whole number of milliseconds, got -5/,
    )
  })

  it('refuses a connector without a type, and two of one type', () => {
    const send: Connector['send'] = async () => ({ ok: true })
    expect(configError(() => start({ ...ports(), connectors: [{ send }] })).message).toMatch(
      /connector type must be a non-empty string .*, got undefined/,
    )
    expect(configError(() => start({ ...ports(), connectors: [{ type: '', send }] })).message).toMatch(
      /connector type must be a non-empty string .*, got ""/,
    )
    expect(configError(() => start({ ...ports(), connectors: [{ type: 'sms' }] })).message).toMatch(
      /connector "sms" must have a send\(\) method/,
    )
    expect(configError(() => start({ ...ports(), connectors: 'webchat' })).message).toMatch(
      /connectors must be an array of connectors, got "webchat"/,
    )
    const twice = () =>
      start({ ...ports(), connectors: [createRecordingConnector(), createRecordingConnector()] })
    expect(configError(twice).message).toMatch(/two connectors of type "recording"/)
  })

  it('checks a connector registered later the same way', () => {
    const connector = createRecordingConnector()
    const switchboard = start({ ...ports(), connectors: [connector] })
    expect(configError(() => switchboard.registerConnector({ type: ' ' } as Connector)).message).toMatch(
      /connector type must be a non-empty string .*, got " "/,
    )
    expect(configError(() => switchboard.registerConnector(createRecordingConnector())).message).toMatch(
      /two connectors of type "recording"/,
    )
    // Registering the one already there again changes nothing.
    switchboard.registerConnector(connector)
    expect(switchboard.connector('recording')).toBe(connector)
  })
})
