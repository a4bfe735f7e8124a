import { existsSync } from 'node:fs'
import { mkdtemp } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { reply } from '@switchboard/core/testing'
import { type BrowserContext, chromium, type Page } from 'playwright-core'
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
    // The page's own requests included (a missing favicon is a 404 in the console).
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text())
    })
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

  describe('against a scripted socket', () => {
    // A WebSocket stand-in the test drives from outside: each socket the widget opens is kept in
    // window.__sockets; `accept()` opens it, `refuse()` ends it the way a refused handshake does
    // (a close without an open), `drop()` ends an open one, `deliver(frame)` hands the widget a frame.
    const FAKE_SOCKET = `
      window.__sockets = []
      window.WebSocket = class {
        constructor(url) {
          this.url = url
          this.sent = []
          this.listeners = { open: [], message: [], close: [] }
          window.__sockets.push(this)
        }
        addEventListener(type, listener) { this.listeners[type].push(listener) }
        send(data) { this.sent.push(JSON.parse(data)) }
        close() { this.closed = true }
        accept() { for (const listener of this.listeners.open) listener({}) }
        refuse() { for (const listener of this.listeners.close) listener({ code: 1006 }) }
        drop() { for (const listener of this.listeners.close) listener({ code: 1006 }) }
        deliver(frame) { for (const listener of this.listeners.message) listener({ data: JSON.stringify(frame) }) }
      }
    `
    const SESSION = '3f1c1b7e-6a0c-4a53-9d1e-0d7a6c1b2e01'

    /** The stand-in as the page sees it. */
    interface ScriptedSocket {
      readonly url: string
      readonly sent: Record<string, unknown>[]
      readonly closed?: boolean
      accept(): void
      refuse(): void
      drop(): void
      deliver(frame: unknown): void
    }

    /** The demo page in a new browser context, or in `tabOf`'s (another tab of the same visitor). */
    async function openDemo(token?: string, tabOf?: Page) {
      const context = tabOf?.context() ?? (await browser.browser()?.newContext())
      const page = context === undefined ? await browser.newPage() : await context.newPage()
      await page.addInitScript(FAKE_SOCKET)
      const integrationId = 41
      if (token !== undefined) {
        await page.addInitScript(
          ([key, value]) =>
            (
              globalThis as unknown as { localStorage: { setItem(key: string, value: string): void } }
            ).localStorage.setItem(key, value),
          [
            `switchboard-webchat:${service.url}:${integrationId}`,
            JSON.stringify({ token, sessionId: SESSION, pending: [] }),
          ] as const,
        )
      }
      await page.goto(`${service.url}/demo/webchat?integration=${integrationId}`)
      return page
    }

    // After a reconnect, a reply published meanwhile can arrive before the history of what came
    // before it; shown in arrival order, the conversation read out of order.
    it('shows messages in the order they were written, whatever order they arrive in', {
      timeout: 30_000,
    }, async () => {
      const page = await openDemo()
      await page.locator('#switchboard-webchat button').first().click()
      await expect
        .poll(() => page.evaluate(() => (globalThis as unknown as { __sockets: unknown[] }).__sockets.length))
        .toBe(1)
      const message = (id: string, role: string, text: string, at: string) => ({
        type: 'message',
        messageId: `00000000-0000-4000-8000-00000000000${id}`,
        role,
        text,
        at,
      })
      await page.evaluate(
        ([session, frames]) => {
          const socket = (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets[0]!
          socket.accept()
          socket.deliver({ type: 'session', sessionId: session, visitorToken: 't', state: 'ongoing' })
          for (const frame of frames) socket.deliver(frame)
        },
        [
          SESSION,
          [
            message('3', 'agent', 'third', '2026-01-01T00:00:03.000Z'),
            message('1', 'customer', 'first', '2026-01-01T00:00:01.000Z'),
            message('2', 'agent', 'second', '2026-01-01T00:00:02.000Z'),
            message('3', 'agent', 'third', '2026-01-01T00:00:03.000Z'),
          ],
        ] as const,
      )
      await expect
        .poll(() => page.locator('#switchboard-webchat .message').allTextContents())
        .toEqual(['first', 'second', 'third'])
      await page.context().close()
    })

    // A browser does not say why a handshake was refused. Dropping the token at the first refusal
    // made a visitor whose integration was off for a moment a new visitor, the conversation lost.
    /** The URL of each socket the widget made so far, and whether it closed it itself. */
    const socketsOf = (page: Page) =>
      page.evaluate(() =>
        (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets.map((socket) => ({
          url: socket.url,
          closed: socket.closed === true,
          sent: socket.sent.length,
        })),
      )
    const lastSocket = (page: Page, action: 'refuse' | 'accept', visitorToken?: string) =>
      page.evaluate(
        ([name, token, session]) => {
          const sockets = (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets
          const socket = sockets[sockets.length - 1]!
          if (name === 'refuse') return socket.refuse()
          socket.accept()
          if (token !== undefined)
            socket.deliver({ type: 'session', sessionId: session, visitorToken: token, state: 'ongoing' })
        },
        [action, visitorToken, SESSION] as const,
      )
    const savedToken = (page: Page) =>
      page.evaluate(
        (key) =>
          JSON.parse(
            (
              globalThis as unknown as { localStorage: { getItem(key: string): string | null } }
            ).localStorage.getItem(key) ?? '{}',
          ).token as string | undefined,
        `switchboard-webchat:${service.url}:41`,
      )
    /** Three handshakes refused with the token while the server answers; the fourth goes without it. */
    async function refuseTokenThrice(page: Page) {
      for (let refusals = 1; refusals <= 3; refusals += 1) {
        await expect.poll(() => socketsOf(page), { timeout: 10_000 }).toHaveLength(refusals)
        await lastSocket(page, 'refuse')
      }
      await expect.poll(() => socketsOf(page), { timeout: 15_000 }).toHaveLength(4)
      const tried = await socketsOf(page)
      expect(tried.slice(0, 3).every((socket) => socket.url.endsWith('?token=saved-token'))).toBe(true)
      expect(tried[3]!.url).not.toContain('token=')
    }

    // A browser does not say why a handshake was refused: the token (a rotated secret) or an
    // integration off for a moment. Accepted without the token, the widget tries it once more
    // before the visitor starts anew: a connection that happened to come first after the
    // integration was switched back on made the visitor new, the conversation lost.
    it('keeps its token when the server that refused it three times takes it again', {
      timeout: 30_000,
    }, async () => {
      const page = await openDemo('saved-token')
      await refuseTokenThrice(page)

      await lastSocket(page, 'accept', 'would-be-new-token')
      await expect.poll(() => socketsOf(page)).toHaveLength(5)
      const [, , , probe, again] = await socketsOf(page)
      expect(probe).toMatchObject({ closed: true, sent: 0 })
      expect(again!.url).toMatch(/\?token=saved-token$/)
      await lastSocket(page, 'accept', 'saved-token')
      await expect.poll(() => socketsOf(page).then((sockets) => sockets[4]!.sent)).toBeGreaterThan(0)
      expect(await savedToken(page)).toBe('saved-token')
      await page.context().close()
    })

    it('starts anew only when the token is refused once more after a connection without it was taken', {
      timeout: 30_000,
    }, async () => {
      const page = await openDemo('saved-token')
      await refuseTokenThrice(page)
      await lastSocket(page, 'accept', 'would-be-new-token')
      await expect.poll(() => socketsOf(page)).toHaveLength(5)

      await lastSocket(page, 'refuse')
      await expect.poll(() => socketsOf(page), { timeout: 10_000 }).toHaveLength(6)
      const newStart = (await socketsOf(page))[5]!
      expect(newStart.url).not.toContain('token=')
      await lastSocket(page, 'accept', 'new-token')
      await expect.poll(() => savedToken(page)).toBe('new-token')
      expect((await socketsOf(page))[5]!.closed).toBe(false)
      await page.context().close()
    })

    /** The conversation as the fake server stored it, in the order it was written (its sequence). */
    type MessageFrame = { type: 'message'; messageId: string; role: string; text: string; at: string }
    const written = (id: number, role: string, text: string): MessageFrame => ({
      type: 'message',
      messageId: `00000000-0000-4000-8000-${String(id).padStart(12, '0')}`,
      role,
      text,
      at: `2026-01-01T00:00:0${id}.000Z`,
    })

    /** Drives socket `index` of the page (the widget's first connection is 0). */
    const onSocket = (page: Page, index: number) => {
      const sent = () =>
        page.evaluate(
          (at) => (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets[at]?.sent ?? [],
          index,
        )
      const call = (method: 'accept' | 'drop', frames: unknown[] = []) =>
        page.evaluate(
          ([at, name, delivered]) => {
            const socket = (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets[at]!
            if (name === 'accept') socket.accept()
            for (const frame of delivered) socket.deliver(frame)
            if (name === 'drop') socket.drop()
          },
          [index, method, frames] as const,
        )
      return {
        /** Opens once the widget made this socket; the session frame follows. */
        async open() {
          await expect
            .poll(
              () => page.evaluate(() => (globalThis as unknown as { __sockets: unknown[] }).__sockets.length),
              {
                timeout: 10_000,
              },
            )
            .toBeGreaterThan(index)
          await call('accept', [{ type: 'session', sessionId: SESSION, visitorToken: 't', state: 'ongoing' }])
        },
        deliver: (...frames: unknown[]) =>
          page.evaluate(
            ([at, delivered]) => {
              const socket = (globalThis as unknown as { __sockets: ScriptedSocket[] }).__sockets[at]!
              for (const frame of delivered) socket.deliver(frame)
            },
            [index, frames] as const,
          ),
        drop: () => call('drop'),
        /** The frames the widget sent of a type, once there is one. */
        async sentOf(type: string) {
          await expect.poll(async () => (await sent()).some((frame) => frame.type === type)).toBe(true)
          return (await sent()).filter((frame) => frame.type === type)
        },
        /** Answers the widget's history frame as the server does: what was written after `since`. */
        async answerHistory(conversation: readonly MessageFrame[]) {
          const [history] = await this.sentOf('history')
          const since = history?.since
          if (since === undefined) {
            await this.deliver(...conversation)
            return
          }
          const from = conversation.findIndex((frame) => frame.messageId === since) + 1
          // The server answers VALIDATION_ERROR instead; the widget never sends such a `since`.
          expect(from, `history since ${String(since)}`).toBeGreaterThan(0)
          await this.deliver(...conversation.slice(from))
        },
      }
    }
    const shownTexts = (page: Page) => page.locator('#switchboard-webchat .message').allTextContents()

    const hello = written(1, 'customer', 'Hello')
    const hi = written(2, 'agent', 'Hi, how can I help?')
    // Committed before the customer's next message, delivered after its ack.
    const reply = written(3, 'agent', 'Your parcel left this morning.')
    const next = written(4, 'customer', 'Where is my parcel?')

    // The ack of the customer's own message moved the point history was asked from past a reply
    // written before it and not delivered yet: a drop in between, and the reply never showed.
    it('shows a reply written before an acked message that the connection dropped before delivering', {
      timeout: 30_000,
    }, async () => {
      // The demo page opens the widget, which connects at once.
      const page = await openDemo()
      const first = onSocket(page, 0)
      await first.open()
      await first.answerHistory([hello, hi])
      await expect.poll(() => shownTexts(page)).toEqual([hello.text, hi.text])

      const input = page.locator('#switchboard-webchat textarea')
      await input.fill(next.text)
      await input.press('Enter')
      const [sentMessage] = await first.sentOf('message')
      await first.deliver({
        type: 'ack',
        clientMessageId: sentMessage?.clientMessageId,
        messageId: next.messageId,
      })
      await first.drop()

      const second = onSocket(page, 1)
      await second.open()
      await second.answerHistory([hello, hi, reply, next])
      await expect.poll(() => shownTexts(page)).toContain(reply.text)
      expect((await shownTexts(page)).toSorted()).toEqual(
        [hello.text, hi.text, reply.text, next.text].toSorted(),
      )
      await page.context().close()
    })

    // The same in the visitor's other tab: the copy of the message sent from the first one
    // overtook the reply written before it.
    it('shows a reply written before a message from another tab that arrived first', {
      timeout: 30_000,
    }, async () => {
      // The demo page opens the widget, which connects at once.
      const page = await openDemo()
      const first = onSocket(page, 0)
      await first.open()
      await first.answerHistory([hello, hi])
      await first.deliver(next)
      await expect.poll(() => shownTexts(page)).toEqual([hello.text, hi.text, next.text])
      await first.drop()

      const second = onSocket(page, 1)
      await second.open()
      await second.answerHistory([hello, hi, reply, next])
      await expect.poll(() => shownTexts(page)).toEqual([hello.text, hi.text, reply.text, next.text])
      await page.context().close()
    })

    // The badge is for replies that came while the chat was closed. A page of the site opened
    // after a conversation replays its history, and every earlier reply counted as unread: the
    // visitor who had read them all saw a badge of their number on each page.
    it('counts on the badge only replies the visitor has not seen', { timeout: 30_000 }, async () => {
      const page = await openDemo()
      const first = onSocket(page, 0)
      await first.open()
      await first.answerHistory([hello, hi])
      await expect.poll(() => shownTexts(page)).toEqual([hello.text, hi.text])

      // Another page of the site, where the widget starts closed: it resumes with the saved token,
      // and a reply came meanwhile.
      await page.route('**/demo/webchat*', async (route) => {
        const response = await route.fetch()
        const body = (await response.text()).replace(' data-open="true"', '')
        await route.fulfill({ response, body })
      })
      await page.reload()
      const again = onSocket(page, 0)
      await again.open()
      await again.answerHistory([hello, hi, reply])
      await expect.poll(() => shownTexts(page)).toEqual([hello.text, hi.text, reply.text])
      const badge = page.locator('#switchboard-webchat .badge')
      expect(await badge.textContent()).toBe('1')

      await again.deliver(written(5, 'operator', 'Anything else?'))
      await expect.poll(() => badge.textContent()).toBe('2')
      await page.locator('#switchboard-webchat .bubble').click()
      expect(await badge.isHidden()).toBe(true)
      await page.context().close()
    })

    // Tabs share the saved state, and each wrote its own unsent messages over the others': a
    // message typed while offline was gone from storage once another tab connected, and a reload
    // of its tab neither showed nor sent it.
    // The server answers INTERNAL_ERROR when it could not store a message (its database is down):
    // nothing was stored, and the visitor who typed it again stored it twice once it came back.
    it('sends a message again a while after the server could not store it, on the same socket', {
      timeout: 30_000,
    }, async () => {
      const page = await openDemo()
      await page.clock.install()
      const socket = onSocket(page, 0)
      await socket.open()
      await socket.answerHistory([hello, hi])
      const input = page.locator('#switchboard-webchat textarea')
      await input.fill(next.text)
      await input.press('Enter')
      const [sent] = await socket.sentOf('message')

      await socket.deliver({
        type: 'error',
        code: 'INTERNAL_ERROR',
        message: 'the message could not be stored',
      })
      await page.clock.runFor(10_000)

      const messages = await socket.sentOf('message')
      expect(messages).toHaveLength(2)
      expect(messages[1]).toEqual(sent)
      await page.context().close()
    })

    it("keeps a tab's unsent message through another tab's save and a reload", {
      timeout: 30_000,
    }, async () => {
      const page = await openDemo()
      const first = onSocket(page, 0)
      await first.open()
      await first.answerHistory([hello, hi])
      await first.drop()
      const otherTab = await openDemo(undefined, page)

      const input = page.locator('#switchboard-webchat textarea')
      await input.fill(next.text)
      await input.press('Enter')
      // The other tab connects meanwhile, and saves.
      await onSocket(otherTab, 0).open()
      await otherTab.close()

      await page.reload()
      await expect.poll(() => shownTexts(page)).toEqual([next.text])
      const afterReload = onSocket(page, 0)
      await afterReload.open()
      const [resent] = await afterReload.sentOf('message')
      expect(resent?.text).toBe(next.text)
      await page.context().close()
    })
  })
})
