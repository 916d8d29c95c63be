// What both builds of the package export besides the client class: index.ts
// (Node) and browser.ts add their own.
export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  type CallOptions,
  type ConnectResult,
  type ControlClientOptions,
  type ListSandboxesQuery,
  type ListSnapshotsQuery,
  type SandboxLogsQuery,
  type SandboxMetricsQuery,
  type TemplateBuildLogsQuery,
  type TemplateBuildsQuery,
  type TemplateBuildStatusQuery,
  type TemplateFilesBody,
  type TemplatePage,
} from './control-client.js';
export { ControlApiError, type ControlApiErrorDetails, type ControlErrorKind } from './errors.js';
export { encodeMetadataFilter } from './metadata-filter.js';
export { Paginator, type Page, type PageFetcher } from './paginator.js';
export { defaultRetryPolicy, type FetchFunction, type RetryPolicy } from './retry.js';
export type * from './types.js';
