export { startServer, type PaddockServer, type StartOptions } from './server.js';
export { resolveConfig, type ServerConfig } from './config.js';
export { newApiKey } from './store/keys.js';
