export * from './runtime.js';
export { RuncRuntime, type RuncRuntimeOptions } from './runc-runtime.js';
export { BASE_TEMPLATE_ID, DEFAULT_LIMITS } from './templates.js';
export { SANDBOX_USER } from './base-template.js';
export { KeyedMutex } from './util.js';
export { mountPoints } from './mounts.js';
export * from './images/index.js';
export { envdVersion } from '@paddock/envd';
export { ENVD_PORT } from '@paddock/protocol';
