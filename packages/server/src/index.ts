export { startServer, type PaddockServer, type StartOptions } from './server.js';
export { resolveConfig, type ServerConfig } from './config.js';
export { serverNodeFlags } from './node-flags.js';
export { newApiKey } from './store/keys.js';
export { ApiKeys, type ApiKeyInfo } from './store/keys.js';
export { openDb } from './store/db.js';
export { inspectInstallation, uninstall, type Installation } from './uninstall.js';
