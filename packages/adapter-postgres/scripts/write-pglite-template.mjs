// Part of the build: a new, empty PGlite database dumped into dist, which `createPgliteDb` loads
// into a database not created yet instead of initialising one (seconds saved on a first start).
import { writePgliteTemplate } from '../dist/index.js'

await writePgliteTemplate(new URL('../dist/pglite-template.tar.gz', import.meta.url))
