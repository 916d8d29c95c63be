import { Sandbox } from './sandbox.js';

export { Sandbox };
export { E2B, type E2BClientOpts } from './client.js';
// As E2B's SDK: `import Sandbox from '@paddock/sdk'`.
export default Sandbox;
export type {
  CreateSnapshotOpts,
  SandboxApiOpts,
  SandboxConnectOpts,
  SandboxForkOpts,
  SandboxListOpts,
  SandboxMetricsOpts,
  SandboxMetricsRangeOpts,
  SandboxOpts,
  SandboxPauseOpts,
  SandboxUrlOpts,
  SnapshotListOpts,
} from './sandbox.js';
export type { ListQuery, SandboxPaginator, SandboxQuery, SnapshotPaginator, SnapshotQuery } from './sandbox-api.js';
export {
  DEFAULT_API_URL,
  DEFAULT_DOMAIN,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_RETRIES,
  DEFAULT_SANDBOX_TIMEOUT_MS,
  DEFAULT_SANDBOX_URL,
  type ConnectionOpts,
  type Logger,
  type RequestOpts,
} from './config.js';
export { Git } from './git.js';
export type {
  GitAddOpts,
  GitBranches,
  GitCloneOpts,
  GitCommitOpts,
  GitConfigOpts,
  GitConfigScope,
  GitDangerouslyAuthenticateOpts,
  GitDeleteBranchOpts,
  GitFileStatus,
  GitInitOpts,
  GitPullOpts,
  GitPushOpts,
  GitRemoteAddOpts,
  GitRequestOpts,
  GitResetMode,
  GitResetOpts,
  GitRestoreOpts,
  GitStatus,
  GitStatusLabel,
} from './git.js';
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
export {
  ReadyCmd,
  Template,
  TemplateBase,
  waitForFile,
  waitForPort,
  waitForProcess,
  waitForTimeout,
  waitForURL,
} from './template.js';
export type {
  BasicBuildOptions,
  BuildOptions,
  CallableTemplate,
  CopyItem,
  GetBuildStatusOptions,
  TemplateBuilder,
  TemplateClass,
  TemplateFinal,
  TemplateFromImage,
  TemplateOptions,
} from './template.js';
export { LogEntry, LogEntryEnd, LogEntryStart, defaultBuildLogger } from './build-log.js';
export type { BuildStatusReason, LogEntryLevel, TemplateBuildStatus, TemplateBuildStatusResponse } from './build-log.js';
export type { BuildInfo, TemplateTag, TemplateTagInfo } from './template-build.js';
// Node only: a browser build's stand-in refuses (see the package's `browser` field).
export { parseDockerfile, type DockerfileParseOptions, type DockerfilePlan, type DockerfileStep } from './dockerfile.js';
