import { readFileSync } from 'node:fs'

export interface WebchatAssets {
  /** The embeddable widget, one dependency-free script; serve it as `application/javascript`. */
  readonly widgetJs: string
  /** A page that embeds the widget for one integration; `widgetUrl` is where the script is served. */
  demoHtml(options: { integrationId: string; widgetUrl?: string }): string
}

// Kept outside src so the same file serves from the sources and from dist (`../widget` of both).
const WIDGET_FILE = new URL('../widget/widget.js', import.meta.url)
let widgetJs: string | undefined

/** The browser side of the channel, for an HTTP server to serve. The widget is read once. */
export function webchatAssets(): WebchatAssets {
  widgetJs ??= readFileSync(WIDGET_FILE, 'utf8')
  return { widgetJs, demoHtml }
}

function demoHtml(options: { integrationId: string; widgetUrl?: string }): string {
  const integrationId = escapeHtml(options.integrationId)
  const widgetUrl = escapeHtml(options.widgetUrl ?? '/widget.js')
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Switchboard webchat demo</title>
<link rel="icon" href="data:,">
<style>
  body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2933; background: #f5f7fa; }
  main { max-width: 34rem; margin: 4rem 3rem; }
  h1 { font-size: 1.75rem; margin-bottom: .5rem; }
  code { background: #e4e7eb; padding: .1rem .35rem; border-radius: 4px; font-size: .9em; }
  pre { background: #1f2933; color: #f5f7fa; padding: 1rem; border-radius: 8px; white-space: pre-wrap; word-break: break-all; font-size: .85rem; }
</style>
</head>
<body>
<main>
  <h1>Switchboard webchat demo</h1>
  <p>This page embeds the chat widget of integration <code>${integrationId}</code>. Open the bubble in the corner and write to the agents.</p>
  <p>Any site embeds it the same way:</p>
  <pre id="snippet">&lt;script src="${widgetUrl}" data-integration="${integrationId}"&gt;&lt;/script&gt;</pre>
</main>
<script src="${widgetUrl}" data-integration="${integrationId}" data-open="true"></script>
<script>
  // The snippet to copy names the script by its full URL, as another site needs it.
  var widget = document.querySelector('script[data-integration]')
  document.getElementById('snippet').textContent =
    '<script src="' + widget.src + '" data-integration="' + widget.dataset.integration + '"></' + 'script>'
</script>
</body>
</html>
`
}

function escapeHtml(value: string): string {
  return value.replace(
    /[&<>"']/g,
    (character) =>
      ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[character] ?? character,
  )
}
