// What both builds of the package export besides the client class and the
// Node transport: index.ts (Node) and browser.ts add their own.
export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type CallOptions,
  type DownloadFormat,
  type WebDownloadFormat,
  type DownloadOptions,
  type EntryInfo,
  type EnvdClientOptions,
  type EnvdLink,
  type FetchFunction,
  type FileUrlRequest,
  type InitRequest,
  type StreamsEndRequest,
  type Metrics,
  type TransportOptions,
  type UploadEntry,
  type UploadOptions,
} from './envd-client.js';
export {
  EnvdArgumentError,
  EnvdError,
  EnvdHttpError,
  type EnvdErrorKind,
  type EnvdHttpErrorDetails,
} from './errors.js';
export {
  DEFAULT_KEEPALIVE_PING_INTERVAL_SEC,
  ENVD_PORT,
  basicAuthorization,
  connectionHeaders,
  envdInterceptor,
  envdUserKey,
  withUser,
  type EnvdHeaderConfig,
} from './headers.js';
export { MAX_METADATA_BYTES, MAX_METADATA_KEY_BYTES, metadataHeaders } from './metadata.js';
export { fileSignature, fileUrl, type FileOperation, type FileSignatureInput, type FileUrlOptions } from './signature.js';
export { isInMemory, type UploadData } from './upload-body.js';
