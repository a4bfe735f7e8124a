import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'

/**
 * The README's "Testing your agents" examples, run as the tests they are: each block is written to
 * a file beside this one and imported, so the `it`s and conformance suites it declares are
 * collected here. Its imports resolve as an app's would: the package by its name.
 */
const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8')
const start = readme.indexOf('## Testing your agents')
const end = readme.indexOf('\n## ', start + 1)
const blocks = [...readme.slice(start, end).matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] ?? '')
const files = blocks.map(
  (_code, index) => new URL(`./.readme-testing-${process.pid}-${index}.ts`, import.meta.url),
)

afterAll(() => {
  for (const file of files) rmSync(file, { force: true })
})

it('has the examples the README shows, importing only what an app can', () => {
  expect(start).toBeGreaterThan(0)
  expect(blocks.length).toBeGreaterThanOrEqual(3)
  for (const code of blocks) {
    for (const [, from] of code.matchAll(/from '([^']+)'/g)) {
      expect(['@switchboard/core', '@switchboard/core/testing', 'vitest', 'zod']).toContain(from)
    }
  }
})

for (const [index, code] of blocks.entries()) {
  const file = files[index]!
  writeFileSync(file, code)
  describe(`README testing example ${index + 1}`, async () => {
    await import(file.href)
  })
}
