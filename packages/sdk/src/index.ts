export { Sandbox } from './sandbox.js';
export type {
  SandboxApiOpts,
  SandboxConnectOpts,
  SandboxListOpts,
  SandboxMetricsOpts,
  SandboxMetricsRangeOpts,
  SandboxOpts,
  SandboxPauseOpts,
  SandboxUrlOpts,
} from './sandbox.js';
export type { ListQuery, SandboxPaginator, SandboxQuery } from './sandbox-api.js';
export {
  DEFAULT_API_URL,
  DEFAULT_DOMAIN,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SANDBOX_TIMEOUT_MS,
  DEFAULT_SANDBOX_URL,
  type ConnectionOpts,
  type RequestOpts,
} from './config.js';
export type {
  Filesystem,
  FilesystemListOpts,
  FilesystemReadOpts,
  FilesystemRequestOpts,
  FilesystemWriteOpts,
  WatchOpts,
  WriteData,
  WriteEntry,
} from './filesystem.js';
export type { WatchEventCallback, WatchExitCallback, WatchHandle } from './watch-handle.js';
export type { CommandConnectOpts, CommandRequestOpts, CommandStartOpts, Commands } from './commands.js';
export type { CommandHandle, OutputCallback, PtyOutputCallback } from './command-handle.js';
export type { Pty, PtyConnectOpts, PtyCreateOpts } from './pty.js';
// Everything in types.ts and errors.ts is public: they hold the API's own shapes and its errors.
export * from './types.js';
export * from './errors.js';
