import { defineConfig } from 'tsup'

export default defineConfig({
  entry: { index: 'src/index.ts' },
  format: ['esm', 'cjs'],
  // `npm start` needs only the JavaScript; type declarations are for publishing.
  dts: process.env.SWITCHBOARD_BUILD_FOR_START !== '1',
  clean: true,
  sourcemap: true,
  target: 'node20',
  // `import.meta.url` finds the built PGlite template; the CommonJS build needs it shimmed.
  shims: true,
})
