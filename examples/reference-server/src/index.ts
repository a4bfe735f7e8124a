export type { ServerConfig } from './config.js'
export { readConfig } from './config.js'
export type { ReferenceServer, ReferenceServerOptions } from './start-reference-server.js'
export { startReferenceServer } from './start-reference-server.js'
