export { ImageStore, type Image, type ImageStoreOptions, type LayerProgress, type PullOptions } from './image-store.js';
export type { ImageConfig, Platform } from './manifest.js';
export { parseReference, type ImageRef } from './reference.js';
export type { RegistryCredentials, RegistryOptions } from './registry-client.js';
