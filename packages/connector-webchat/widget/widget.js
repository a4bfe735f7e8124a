/*
 * Switchboard webchat widget. One dependency-free script; a site embeds it with
 *
 *   <script src="https://chat.example.com/widget.js" data-integration="123"></script>
 *
 * Optional attributes: data-title (the panel's heading), data-open="true" (start opened).
 * It speaks the frame protocol of the webchat connector (CONTRACT §7) over a WebSocket to the
 * server the script came from, keeps the visitor's token in localStorage to resume the same
 * conversation after a reload, and reconnects with backoff when the connection drops.
 */
;(() => {
  const script = document.currentScript
  if (!(script instanceof HTMLScriptElement)) return
  const integrationId = script.dataset.integration || ''
  if (!/^[1-9][0-9]{0,17}$/.test(integrationId)) {
    console.error('Switchboard webchat: data-integration must be the id of a webchat integration')
    return
  }
  const title = script.dataset.title || 'Chat with us'
  // The server's root is where the script was served from.
  const base = new URL('.', script.src)
  const socketUrl = `${base.href.replace(/^http/, 'ws')}api/webchat/${integrationId}`
  const storageKey = `switchboard-webchat:${base.origin}:${integrationId}`
  const MAX_CHARACTERS = 4000
  const RETRY_MIN_MS = 1000
  const RETRY_MAX_MS = 30_000
  const RESEND_PAUSE_MS = 10_000
  const TOKEN_REFUSALS_BEFORE_NEW_VISITOR = 3

  /** { token, sessionId, readAt, pending: [{clientMessageId, text}] } — what must survive a reload. */
  const saved = load()
  let socket = null
  let connected = false
  /** No session frame yet on this connection: the first one resends what was never acked. */
  let freshConnection = false
  let sessionId = saved.sessionId || null
  /**
   * Where history is asked from on a reconnect: the newest message frame of the agent, an operator
   * or the system, by when it was written (`at`). Neither an ack nor a customer's message frame
   * moves it: a reply written before the customer's message can still be on its way when the ack
   * (or, in another tab, the copy of the message) arrives, and history asked for since that
   * message would never send the reply. History then sends again the customer's messages shown,
   * which are skipped.
   */
  let lastMessageId = null
  /** When the message `lastMessageId` names was written. */
  let lastMessageAt = null
  /**
   * When the newest reply the visitor saw with the chat open was written, in any tab. The badge
   * counts only later ones: a page of the site replays the whole history as it opens.
   */
  let readAt = saved.readAt || null
  let retryMs = RETRY_MIN_MS
  let retryTimer = null
  let skipTokenOnce = false
  /** Handshakes refused in a row with the token while the server answered. */
  let refusedWithToken = 0
  /**
   * Giving the token up, step by step: `probe`, a connection without it to learn whether the
   * server accepts any; `confirm`, the token once more now that it does; `abandon`, refused again,
   * so the next connection without it is the visitor's new start.
   */
  let tokenCheck = null
  let resendTimer = null
  let started = false
  let unread = 0
  const shown = new Map()
  const pending = new Map((saved.pending || []).map((item) => [item.clientMessageId, item]))
  /** The clientMessageIds of messages this tab saw acked. */
  const settled = new Set()

  function load() {
    try {
      return JSON.parse(localStorage.getItem(storageKey) || '{}') || {}
    } catch {
      return {}
    }
  }

  function save() {
    try {
      // The visitor's other tabs keep their unsent messages here too: theirs stay (less those this
      // tab saw acked), or a reload of such a tab would neither show nor send them.
      const stored = load()
      const kept = new Map()
      for (const item of Array.isArray(stored.pending) ? stored.pending : []) {
        if (item && !settled.has(item.clientMessageId)) kept.set(item.clientMessageId, item)
      }
      for (const item of pending.values()) {
        kept.set(item.clientMessageId, { clientMessageId: item.clientMessageId, text: item.text })
      }
      // What the visitor read in another tab is read here too.
      if (typeof stored.readAt === 'string' && !(readAt >= stored.readAt)) readAt = stored.readAt
      localStorage.setItem(
        storageKey,
        JSON.stringify({ token: saved.token, sessionId, readAt, pending: [...kept.values()] }),
      )
    } catch {
      // Storage may be disabled (private mode): the chat works, it just will not resume.
    }
  }

  // ---- view -------------------------------------------------------------------------------

  const host = document.createElement('div')
  host.id = 'switchboard-webchat'
  const root = host.attachShadow({ mode: 'open' })
  root.innerHTML = `
<style>
  :host { all: initial; }
  * { box-sizing: border-box; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
  .bubble { position: fixed; right: 20px; bottom: 20px; width: 56px; height: 56px; border-radius: 50%;
    border: 0; background: #2563eb; color: #fff; cursor: pointer; box-shadow: 0 6px 20px rgba(15,23,42,.25);
    display: flex; align-items: center; justify-content: center; z-index: 2147483000; }
  .bubble:hover { background: #1d4ed8; }
  .bubble svg { width: 28px; height: 28px; }
  .badge { position: absolute; top: -2px; right: -2px; min-width: 20px; height: 20px; border-radius: 10px;
    background: #dc2626; color: #fff; font-size: 12px; line-height: 20px; text-align: center; padding: 0 5px; }
  .badge[hidden] { display: none; }
  .panel { position: fixed; right: 20px; bottom: 88px; width: 360px; height: 520px;
    max-width: calc(100vw - 40px); max-height: calc(100vh - 108px); background: #fff; border-radius: 14px;
    box-shadow: 0 12px 40px rgba(15,23,42,.28); display: flex; flex-direction: column; overflow: hidden;
    z-index: 2147483000; color: #0f172a; font-size: 14px; line-height: 1.45; }
  .panel[hidden] { display: none; }
  header { background: #2563eb; color: #fff; padding: 14px 16px; display: flex; align-items: center; gap: 8px; }
  header h2 { font-size: 16px; margin: 0; flex: 1; font-weight: 600; }
  header button { background: transparent; border: 0; color: #fff; font-size: 22px; cursor: pointer; line-height: 1; }
  .status { font-size: 12px; padding: 6px 16px; background: #fef3c7; color: #92400e; }
  .status[hidden] { display: none; }
  .list { flex: 1; overflow-y: auto; padding: 14px; display: flex; flex-direction: column; gap: 8px; background: #f8fafc; }
  .message { max-width: 80%; padding: 8px 12px; border-radius: 14px; white-space: pre-wrap; word-wrap: break-word; }
  .message[data-role="customer"] { align-self: flex-end; background: #2563eb; color: #fff; border-bottom-right-radius: 4px; }
  .message[data-role="agent"], .message[data-role="operator"] { align-self: flex-start; background: #e2e8f0;
    border-bottom-left-radius: 4px; }
  .message[data-role="system"], .note { align-self: center; background: transparent; color: #64748b;
    font-size: 12px; text-align: center; max-width: 90%; }
  .message[data-pending="true"] { opacity: .6; }
  .label { display: block; font-size: 11px; color: #475569; margin-bottom: 2px; }
  .typing { align-self: flex-start; background: #e2e8f0; border-radius: 14px; padding: 10px 12px; display: flex; gap: 4px; }
  .typing[hidden] { display: none; }
  .typing span { width: 6px; height: 6px; border-radius: 50%; background: #64748b; animation: blink 1.2s infinite; }
  .typing span:nth-child(2) { animation-delay: .2s; }
  .typing span:nth-child(3) { animation-delay: .4s; }
  @keyframes blink { 0%, 80%, 100% { opacity: .3; } 40% { opacity: 1; } }
  form { display: flex; gap: 8px; padding: 10px; border-top: 1px solid #e2e8f0; background: #fff; }
  textarea { flex: 1; resize: none; border: 1px solid #cbd5e1; border-radius: 10px; padding: 8px 10px;
    font-size: 14px; height: 40px; max-height: 120px; outline: none; color: #0f172a; }
  textarea:focus { border-color: #2563eb; }
  form button { border: 0; border-radius: 10px; background: #2563eb; color: #fff; padding: 0 14px;
    font-size: 14px; cursor: pointer; }
  form button:disabled { background: #94a3b8; cursor: default; }
</style>
<button class="bubble" type="button" aria-label="Open the chat">
  <svg viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round"
    stroke-linejoin="round" aria-hidden="true"><path d="M21 15a2 2 0 0 1-2 2H7l-4 4V5a2 2 0 0 1 2-2h14a2 2 0 0 1 2 2z"/></svg>
  <span class="badge" hidden></span>
</button>
<section class="panel" role="dialog" aria-label="Chat" hidden>
  <header><h2></h2><button type="button" class="close" aria-label="Close the chat">&times;</button></header>
  <div class="status" role="status" hidden></div>
  <div class="list" aria-live="polite">
    <div class="typing" data-typing hidden aria-label="The agent is typing"><span></span><span></span><span></span></div>
  </div>
  <form>
    <textarea rows="1" placeholder="Write a message…" aria-label="Message" maxlength="${MAX_CHARACTERS}"></textarea>
    <button type="submit">Send</button>
  </form>
</section>`
  const bubble = root.querySelector('.bubble')
  const badge = root.querySelector('.badge')
  const panel = root.querySelector('.panel')
  const list = root.querySelector('.list')
  const typing = root.querySelector('.typing')
  const status = root.querySelector('.status')
  const form = root.querySelector('form')
  const input = root.querySelector('textarea')
  root.querySelector('h2').textContent = title

  function scrollDown() {
    list.scrollTop = list.scrollHeight
  }

  function showStatus(text) {
    status.textContent = text || ''
    status.hidden = !text
  }

  function note(text) {
    const element = document.createElement('div')
    element.className = 'note'
    element.textContent = text
    list.insertBefore(element, typing)
    scrollDown()
  }

  function render(role, text, options) {
    const element = document.createElement('div')
    element.className = 'message'
    element.dataset.role = role
    if (role === 'operator') {
      const label = document.createElement('span')
      label.className = 'label'
      label.textContent = 'Operator'
      element.append(label)
    }
    element.append(document.createTextNode(text))
    if (options.pending) element.dataset.pending = 'true'
    if (options.messageId) element.dataset.messageId = options.messageId
    if (options.at) element.dataset.at = options.at
    list.insertBefore(element, placeFor(options.at))
    scrollDown()
    return element
  }

  /**
   * Where a message written at `at` goes: before the first one shown that was written later. After
   * a reconnect, a reply sent meanwhile can arrive before the history of what came before it.
   */
  function placeFor(at) {
    if (at) {
      for (const element of list.querySelectorAll('.message[data-at]')) {
        if (element.dataset.at > at) return element
      }
    }
    return typing
  }

  function showMessage(frame) {
    // History is asked for since the newest message seen, not the one that arrived last.
    if (frame.role !== 'customer' && !(lastMessageAt > frame.at)) {
      lastMessageId = frame.messageId
      lastMessageAt = frame.at
    }
    if (shown.has(frame.messageId)) return
    shown.set(frame.messageId, render(frame.role, frame.text, { messageId: frame.messageId, at: frame.at }))
    if (frame.role === 'customer') return
    if (!panel.hidden) markRead(frame.at)
    else if (!(readAt >= frame.at)) {
      unread += 1
      badge.textContent = String(unread)
      badge.hidden = false
    }
  }

  function markRead(at) {
    if (!at || readAt >= at) return
    readAt = at
    save()
  }

  function setTyping(on) {
    typing.hidden = !on
    // Keep the dots last, under the newest message.
    list.append(typing)
    scrollDown()
  }

  function open() {
    panel.hidden = false
    bubble.setAttribute('aria-label', 'Close the chat')
    unread = 0
    badge.hidden = true
    markRead(lastMessageAt)
    start()
    input.focus()
    scrollDown()
  }

  function close() {
    panel.hidden = true
    bubble.setAttribute('aria-label', 'Open the chat')
  }

  bubble.addEventListener('click', () => (panel.hidden ? open() : close()))
  root.querySelector('.close').addEventListener('click', close)
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault()
      form.requestSubmit()
    }
  })
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    const text = input.value.trim()
    if (text === '') return
    if ([...text].length > MAX_CHARACTERS) {
      showStatus(`Messages are at most ${MAX_CHARACTERS} characters.`)
      return
    }
    input.value = ''
    const item = { clientMessageId: newId(), text }
    pending.set(item.clientMessageId, item)
    save()
    item.element = render('customer', text, { pending: true })
    transmit(item)
  })

  function newId() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') return window.crypto.randomUUID()
    return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`
  }

  // ---- connection -------------------------------------------------------------------------

  function send(frame) {
    if (!connected) return false
    socket.send(JSON.stringify(frame))
    return true
  }

  function transmit(item) {
    // Unsent messages wait in `pending` (and localStorage) and go out on the next connection,
    // with the same clientMessageId, so the server stores each once.
    send({ type: 'message', text: item.text, clientMessageId: item.clientMessageId })
  }

  function onFrame(frame) {
    switch (frame.type) {
      case 'session': {
        const resumed = frame.sessionId === sessionId
        if (!resumed && sessionId !== null && shown.size > 0) note('A new conversation has started.')
        if (!resumed) {
          lastMessageId = null
          lastMessageAt = null
        }
        saved.token = frame.visitorToken
        sessionId = frame.sessionId
        save()
        send(lastMessageId === null ? { type: 'history' } : { type: 'history', since: lastMessageId })
        if (freshConnection) {
          freshConnection = false
          for (const item of pending.values()) transmit(item)
        }
        showStatus(frame.state === 'closed' ? 'This conversation has ended. Write to start a new one.' : '')
        return
      }
      case 'ack': {
        const item = pending.get(frame.clientMessageId)
        if (item === undefined) return
        pending.delete(frame.clientMessageId)
        settled.add(frame.clientMessageId)
        save()
        if (shown.has(frame.messageId)) {
          // Stored before a reload and already back through history: keep that one.
          if (item.element) item.element.remove()
        } else if (item.element) {
          item.element.dataset.pending = 'false'
          item.element.dataset.messageId = frame.messageId
          shown.set(frame.messageId, item.element)
        } else {
          shown.set(frame.messageId, render('customer', item.text, { messageId: frame.messageId }))
        }
        return
      }
      case 'message':
        showMessage(frame)
        return
      case 'typing':
        setTyping(frame.on)
        return
      case 'state':
        if (frame.state === 'paused') note('A member of our team will answer you here.')
        if (frame.state === 'ongoing') note('The conversation continues.')
        if (frame.state === 'closed') {
          setTyping(false)
          note('This conversation has ended. Write to start a new one.')
        }
        return
      case 'error':
        // Refused for now, nothing stored: what waits for its ack goes again after a pause (the
        // server acks a message it has already stored again, so none is stored twice).
        if (frame.code === 'RATE_LIMITED' || frame.code === 'INTERNAL_ERROR') {
          showStatus(
            frame.code === 'RATE_LIMITED'
              ? 'You are sending messages quickly; the next ones go out in a few seconds.'
              : 'Your message could not be sent yet; trying again in a few seconds.',
          )
          clearTimeout(resendTimer)
          resendTimer = setTimeout(() => {
            showStatus('')
            for (const item of pending.values()) transmit(item)
          }, RESEND_PAUSE_MS)
        } else {
          showStatus(frame.message)
        }
        return
    }
  }

  function connect() {
    retryTimer = null
    const useToken = Boolean(saved.token) && !skipTokenOnce
    skipTokenOnce = false
    const probe = !useToken && tokenCheck === 'probe'
    let opened = false
    let discarded = false
    const current = new WebSocket(
      useToken ? `${socketUrl}?token=${encodeURIComponent(saved.token)}` : socketUrl,
    )
    socket = current
    current.addEventListener('open', () => {
      if (probe) {
        // Accepted without the token: the integration is on, so it was off a moment ago, or the
        // token is refused. Only the token once more tells which; this connection is not used, so
        // the visitor stays who they were unless the token is refused again.
        discarded = true
        current.close()
        tokenCheck = 'confirm'
        retryMs = RETRY_MIN_MS
        connect()
        return
      }
      if (useToken || tokenCheck === 'abandon') tokenCheck = null
      opened = true
      refusedWithToken = 0
      connected = true
      freshConnection = true
      retryMs = RETRY_MIN_MS
      showStatus('')
    })
    current.addEventListener('message', (event) => {
      if (discarded) return
      try {
        onFrame(JSON.parse(event.data))
      } catch (error) {
        console.error('Switchboard webchat: unreadable frame', error)
      }
    })
    current.addEventListener('close', () => {
      if (discarded) return
      connected = false
      setTyping(false)
      if (!opened && probe) tokenCheck = null
      if (!opened && useToken) {
        // A browser does not say why a handshake was refused. Only while the server answers can
        // the token be the cause (the integration's secret was rotated); the integration may also
        // be off for a moment, so the token is given up only when refused again and again, or
        // once more right after the server took a connection without it (`confirm`). The old
        // token stays saved until a new session replaces it.
        ifServerAnswers(() => {
          if (tokenCheck === 'confirm') {
            tokenCheck = 'abandon'
            skipTokenOnce = true
            return
          }
          refusedWithToken += 1
          if (refusedWithToken >= TOKEN_REFUSALS_BEFORE_NEW_VISITOR) {
            refusedWithToken = 0
            skipTokenOnce = true
            tokenCheck = 'probe'
          }
        })
        return
      }
      retry()
    })
  }

  /** Runs `refused` if the server answers a plain request (it refused the handshake), then retries. */
  function ifServerAnswers(refused) {
    fetch(new URL('api/health', base), { mode: 'no-cors', cache: 'no-store' }).then(
      () => {
        refused()
        retry()
      },
      () => retry(),
    )
  }

  function retry() {
    if (retryTimer !== null) return
    showStatus('Reconnecting…')
    const delay = retryMs / 2 + Math.random() * (retryMs / 2)
    retryMs = Math.min(retryMs * 2, RETRY_MAX_MS)
    retryTimer = setTimeout(connect, delay)
  }

  function start() {
    if (started) return
    started = true
    connect()
  }

  window.addEventListener('online', () => {
    if (started && !connected && retryTimer !== null) {
      clearTimeout(retryTimer)
      connect()
    }
  })

  function mount() {
    document.body.append(host)
    // Show what was typed but not yet confirmed before the reload; it is sent again on connect.
    for (const item of pending.values()) item.element = render('customer', item.text, { pending: true })
    if (script.dataset.open === 'true') open()
    // A returning visitor reconnects at once, so replies that came meanwhile show on the badge.
    else if (saved.token) start()
  }
  if (document.body) mount()
  else document.addEventListener('DOMContentLoaded', mount)
})()
