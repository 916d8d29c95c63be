export * from './runtime.js';
export { RuncRuntime, type RuncRuntimeOptions } from './runc-runtime.js';
export { BASE_TEMPLATE_ID, DEFAULT_LIMITS } from './templates.js';
export { SANDBOX_USER } from './base-template.js';
export { BASE_IMAGE_CONFIG, BASE_PACKAGES, buildBaseRootfs, hostDebianSources, type BaseBuildProgress, type BaseRootfs, type BuildBaseRootfsOptions } from './base-image.js';
export { KeyedMutex } from './util.js';
export { mountPoints } from './mounts.js';
export { envdVersion } from '@paddock/envd';
export { ENVD_PORT } from '@paddock/protocol';
