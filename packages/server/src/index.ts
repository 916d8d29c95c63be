export { startServer, type PaddockServer, type StartOptions } from './server.js';
export { CONFIG_KEYS, configTable, defaultHome, explainServerConfig, fileKey, resolveServerConfig, type ConfigKey, type ConfigSource, type ServerConfig } from './config.js';
export { serverNodeFlags } from './node-flags.js';
export { newApiKey, type ApiKeyRecord, type ApiKeyRepository } from './store/repositories.js';
export { inspectInstallation, uninstall, type Installation } from './uninstall.js';
export { createLogger, LOG_LEVELS, type LogLevel, type Logger } from './log.js';
export { Authenticator, type Caller, type CredentialResolver, type Identified, type IdentifyOptions } from './auth.js';
