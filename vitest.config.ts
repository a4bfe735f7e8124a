import { defineConfig } from 'vitest/config'

// Workspace packages resolve to their TypeScript sources through the `source` export condition,
// so tests never see a stale or missing `dist`.
export default defineConfig({
  resolve: { conditions: ['source', 'module', 'node', 'development|production'] },
  ssr: { resolve: { conditions: ['source', 'module', 'node', 'development|production'] } },
  test: {
    include: ['packages/*/{src,test}/**/*.test.ts', 'examples/*/{src,test}/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 60_000,
  },
})
