import { existsSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { reply } from '@switchboard/core/testing'
import { type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Service, startService } from './support/start-service.js'

// Debian's chromium, installed by .ci/run when missing; never a downloaded browser.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
// As root on a closed network (DEPENDENCIES.md).
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

// A developer machine without Debian's chromium skips this file; CI never does (`.ci/run`
// installs chromium, and with CI=true a missing browser fails here instead of hiding).
const browserMissing = !existsSync(CHROMIUM) && process.env.CI !== 'true'

let service: Service
let browser: BrowserContext
let directory: string

beforeAll(async () => {
  if (browserMissing) return
  service = await startService()
  directory = await mkdtemp(join(tmpdir(), 'switchboard-webchat-browser-'))
  // A persistent context is how Playwright takes a fresh --user-data-dir of our choosing.
  browser = await chromium.launchPersistentContext(join(directory, 'profile'), {
    executablePath: CHROMIUM,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1000, height: 720 },
  })
})
afterAll(async () => {
  await browser?.close()
  await service?.close()
})

describe.skipIf(browserMissing)('the webchat widget in a real browser', () => {
  it('chats on the demo page and shows the history again after a reload', { timeout: 30_000 }, async () => {
    const agentId = await service.createAgent({ name: 'Concierge' })
    // The demo page's own origin is the only one allowed, so the browser's Origin header is checked.
    const integrationId = await service.createWebchat({
      entryAgentId: agentId,
      allowedOrigins: [service.url],
    })
    service.model.script(agentId, reply('We are open from 9 to 5, Monday to Saturday.'))

    const page = browser.pages()[0] ?? (await browser.newPage())
    const problems: string[] = []
    page.on('pageerror', (error) => problems.push(error.message))
    await page.goto(`${service.url}/demo/webchat?integration=${integrationId}`)

    const widget = page.locator('#switchboard-webchat')
    const input = widget.locator('textarea')
    await input.fill('When are you open?')
    await input.press('Enter')
    const answer = widget.locator('.message[data-role="agent"]')
    await expect
      .poll(() => answer.textContent(), { timeout: 10_000 })
      .toBe('We are open from 9 to 5, Monday to Saturday.')
    await expect
      .poll(() => widget.locator('.message[data-role="customer"]').getAttribute('data-pending'))
      .toBe('false')
    expect(await widget.locator('.typing').isHidden()).toBe(true)
    const answered = join(directory, 'webchat-answered.png')
    await page.screenshot({ path: answered })

    await page.reload()
    const messages = widget.locator('.message')
    await expect
      .poll(() => messages.allTextContents(), { timeout: 10_000 })
      .toEqual(['When are you open?', 'We are open from 9 to 5, Monday to Saturday.'])
    const reloaded = join(directory, 'webchat-after-reload.png')
    await page.screenshot({ path: reloaded })

    // The reload resumed the same conversation: one session, two messages.
    const sessions = await service.api<{ sessions: { id: string }[] }>(
      'GET',
      `/api/sessions?integrationId=${integrationId}`,
    )
    expect(sessions.body.sessions).toHaveLength(1)
    expect(problems).toEqual([])
    service.model.assertDone()
    console.info(`webchat screenshots: ${answered} ${reloaded}`)
  })
})
