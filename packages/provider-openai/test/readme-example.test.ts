import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'
import { replyAnswer, startFakeOpenAiServer } from './support/fake-openai-server.js'

const PACKAGE = fileURLToPath(new URL('..', import.meta.url))
const README = new URL('../README.md', import.meta.url)

// "Try it" exactly as a reader runs it (`OPENAI_API_KEY=sk-… node try-provider.mjs`), with
// OPENAI_BASE_URL pointing at a local OpenAI-compatible server that answers what the README shows.
it('runs the README "Try it" example as written: prints the text, no tool calls and the usage', async () => {
  const readme = await readFile(README, 'utf8')
  const start = readme.indexOf('## Try it')
  const code = /```js\n([\s\S]*?)```/.exec(readme.slice(start))?.[1]
  if (start < 0 || code === undefined) throw new Error('the README has no "Try it" example')
  const expected = /\/\/ → (.*)\n/.exec(code)?.[1]
  expect(expected).toBeDefined()

  const fake = await startFakeOpenAiServer()
  fake.enqueue(
    replyAnswer('Yes, we repair e-bikes of every brand.', {
      usage: { promptTokens: 71, completionTokens: 11 },
    }),
  )
  // Inside the package, so that its import resolves as it would in an app's node_modules.
  const folder = await mkdtemp(join(PACKAGE, '.readme-'))
  try {
    const file = join(folder, 'try-provider.mjs')
    await writeFile(file, code)
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', file],
      {
        cwd: PACKAGE,
        env: { ...process.env, OPENAI_API_KEY: 'sk-readme', OPENAI_BASE_URL: fake.url },
        timeout: 60_000,
      },
    )
    expect(stdout.trim()).toBe(expected?.replaceAll('"', ''))
    expect(fake.requests).toHaveLength(1)
    const body = fake.requests[0]?.body as {
      model: string
      tools: { type: string; function: { name: string } }[]
    }
    expect(body.model).toBe('gpt-4o-mini')
    expect(body.tools.map((tool) => [tool.type, tool.function.name])).toEqual([['function', 'save_fact']])
  } finally {
    await rm(folder, { recursive: true, force: true })
    await fake.close()
  }
}, 60_000)
