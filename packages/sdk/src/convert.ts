// The one boundary between the generated wire types (OpenAPI of the control
// API, protobuf of envd) and the SDK's own public types (types.ts). Nothing
// else in the SDK reads or builds a wire shape by field name.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import type {
  ListedSandbox,
  NewSandbox,
  Sandbox as SandboxRecord,
  SandboxDetail,
  SandboxMetric,
  SandboxNetworkUpdateConfig,
  SnapshotInfo as WireSnapshotInfo,
  BuildLogEntry,
  TemplateBuildInfo,
} from '@paddock/control-client';
import type { EntryInfo as UploadedEntry } from '@paddock/envd-client';
import {
  EventType,
  FileType as WireFileType,
  Signal,
  type ConnectResponse,
  type EntryInfo as WireEntryInfo,
  type ProcessInfo as WireProcessInfo,
  type ProcessInputSchema,
  type ProcessSelectorSchema,
  type StartRequestSchema,
  type StartResponse,
  type UpdateRequestSchema,
  type WatchDirResponse,
  type control,
} from '@paddock/models';
import { LEVELS, LogEntry, type LogEntryLevel, type TemplateBuildStatus, type TemplateBuildStatusResponse } from './build-log.js';
import {
  FileType,
  FilesystemEventType,
  type EntryInfo,
  type FilesystemEvent,
  type ProcessInfo,
  type PtySize,
  type SandboxConnectionInfo,
  type SandboxInfo,
  type SandboxLifecycle,
  type SandboxMetrics,
  type SandboxNetworkInfo,
  type SandboxNetworkOpts,
  type SandboxNetworkUpdate,
  type SnapshotInfo,
  type WriteInfo,
} from './types.js';

type Schemas = control.components['schemas'];

// --- control API: requests ---------------------------------------------------

/** What `Sandbox.create` needs to know to build its request body. */
export interface NewSandboxInput {
  template: string;
  timeoutMs: number;
  metadata?: Record<string, string> | undefined;
  envs?: Record<string, string> | undefined;
  secure: boolean;
  allowInternetAccess?: boolean | undefined;
  network?: SandboxNetworkOpts | undefined;
  lifecycle?: SandboxLifecycle | undefined;
}

/** Whole seconds, rounded up so that a timeout is never shorter than asked. */
export function toSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

export function toNewSandbox(input: NewSandboxInput): NewSandbox {
  const body: NewSandbox = {
    templateID: input.template,
    timeout: toSeconds(input.timeoutMs),
    secure: input.secure,
  };
  if (input.metadata) body.metadata = input.metadata;
  if (input.envs) body.envVars = input.envs;
  if (input.allowInternetAccess !== undefined) body.allow_internet_access = input.allowInternetAccess;
  if (input.network) body.network = toNetworkConfig(input.network);
  if (input.lifecycle) {
    const onTimeout = input.lifecycle.onTimeout;
    const action = typeof onTimeout === 'string' ? onTimeout : onTimeout.action;
    body.autoPause = action === 'pause';
    if (typeof onTimeout === 'object' && onTimeout.action === 'pause' && onTimeout.keepMemory !== undefined) {
      body.autoPauseMemory = onTimeout.keepMemory;
    }
    if (input.lifecycle.autoResume !== undefined) body.autoResume = { enabled: input.lifecycle.autoResume };
  }
  return body;
}

function toNetworkConfig(network: SandboxNetworkOpts): Schemas['SandboxNetworkConfig'] {
  const config: Schemas['SandboxNetworkConfig'] = {};
  if (network.allowOut) config.allowOut = network.allowOut;
  if (network.denyOut) config.denyOut = network.denyOut;
  if (network.allowPublicTraffic !== undefined) config.allowPublicTraffic = network.allowPublicTraffic;
  if (network.maskRequestHost !== undefined) config.maskRequestHost = network.maskRequestHost;
  if (network.egressProxy) config.egressProxy = { ...network.egressProxy };
  if (network.rules) config.rules = network.rules;
  return config;
}

export function toNetworkUpdate(update: SandboxNetworkUpdate): SandboxNetworkUpdateConfig {
  const body: SandboxNetworkUpdateConfig = {};
  if (update.allowOut) body.allowOut = update.allowOut;
  if (update.denyOut) body.denyOut = update.denyOut;
  if (update.egressProxy) body.egressProxy = { ...update.egressProxy };
  if (update.rules) body.rules = update.rules;
  if (update.allowInternetAccess !== undefined) body.allow_internet_access = update.allowInternetAccess;
  return body;
}

// --- control API: answers ----------------------------------------------------

/** The connection record of create/connect, as the details a Sandbox object is built from. */
export function toConnectionInfo(record: SandboxRecord): SandboxConnectionInfo {
  return {
    sandboxId: record.sandboxID,
    envdVersion: record.envdVersion,
    envdAccessToken: record.envdAccessToken || undefined,
    trafficAccessToken: record.trafficAccessToken || undefined,
    sandboxDomain: record.domain || undefined,
  };
}

export function toSnapshotInfo(snapshot: WireSnapshotInfo): SnapshotInfo {
  return { snapshotId: snapshot.snapshotID, names: [...snapshot.names] };
}

function toLogEntry(entry: BuildLogEntry): LogEntry {
  const level = (LEVELS as readonly string[]).includes(entry.level) ? (entry.level as LogEntryLevel) : 'info';
  return new LogEntry(new Date(entry.timestamp), level, entry.message);
}

export function toBuildStatus(info: TemplateBuildInfo): TemplateBuildStatusResponse {
  const status: TemplateBuildStatusResponse = {
    buildID: info.buildID,
    templateID: info.templateID,
    status: info.status as TemplateBuildStatus,
    logEntries: info.logEntries.map(toLogEntry),
    logs: [...info.logs],
  };
  if (info.reason) {
    status.reason = { message: info.reason.message, logEntries: (info.reason.logEntries ?? []).map(toLogEntry) };
    if (info.reason.step !== undefined) status.reason.step = info.reason.step;
  }
  return status;
}

export function toSandboxInfo(sandbox: SandboxDetail | ListedSandbox): SandboxInfo {
  const info: SandboxInfo = {
    sandboxId: sandbox.sandboxID,
    templateId: sandbox.templateID,
    metadata: { ...sandbox.metadata },
    startedAt: new Date(sandbox.startedAt),
    endAt: new Date(sandbox.endAt),
    state: sandbox.state,
    cpuCount: sandbox.cpuCount,
    memoryMB: sandbox.memoryMB,
    envdVersion: sandbox.envdVersion,
    volumeMounts: (sandbox.volumeMounts ?? []).map(({ name, path }) => ({ name, path })),
  };
  if (sandbox.alias) info.name = sandbox.alias;
  if ('allowInternetAccess' in sandbox && typeof sandbox.allowInternetAccess === 'boolean') {
    info.allowInternetAccess = sandbox.allowInternetAccess;
  }
  if ('network' in sandbox && sandbox.network) info.network = toNetworkInfo(sandbox.network);
  if ('lifecycle' in sandbox && sandbox.lifecycle) {
    info.lifecycle = { onTimeout: sandbox.lifecycle.onTimeout, autoResume: sandbox.lifecycle.autoResume };
  }
  if ('domain' in sandbox && sandbox.domain) info.sandboxDomain = sandbox.domain;
  return info;
}

function toNetworkInfo(network: Schemas['SandboxNetworkConfig']): SandboxNetworkInfo {
  const info: SandboxNetworkInfo = {};
  if (network.allowOut) info.allowOut = network.allowOut;
  if (network.denyOut) info.denyOut = network.denyOut;
  if (network.allowPublicTraffic !== undefined) info.allowPublicTraffic = network.allowPublicTraffic;
  if (network.maskRequestHost !== undefined) info.maskRequestHost = network.maskRequestHost;
  if (network.egressProxy) {
    const { address, username } = network.egressProxy;
    info.egressProxy = username === undefined ? { address } : { address, username };
  }
  if (network.rules) info.rules = network.rules;
  return info;
}

export function toSandboxMetrics(metric: SandboxMetric): SandboxMetrics {
  return {
    // timestampUnix is exact; the ISO string is kept for older servers that lack it.
    timestamp: typeof metric.timestampUnix === 'number' ? new Date(metric.timestampUnix * 1000) : new Date(metric.timestamp),
    cpuUsedPct: metric.cpuUsedPct,
    cpuCount: metric.cpuCount,
    memUsed: metric.memUsed,
    memTotal: metric.memTotal,
    memCache: metric.memCache,
    diskUsed: metric.diskUsed,
    diskTotal: metric.diskTotal,
  };
}

// --- envd: filesystem --------------------------------------------------------

function toFileType(type: WireFileType): FileType | undefined {
  switch (type) {
    case WireFileType.FILE:
      return FileType.FILE;
    case WireFileType.DIRECTORY:
      return FileType.DIR;
    case WireFileType.SYMLINK:
      return FileType.SYMLINK;
    default:
      return undefined;
  }
}

function toDate(timestamp: Timestamp): Date {
  return new Date(Number(timestamp.seconds) * 1000 + Math.floor(timestamp.nanos / 1_000_000));
}

function nonEmpty(metadata: Record<string, string> | undefined): Record<string, string> | undefined {
  return metadata && Object.keys(metadata).length > 0 ? { ...metadata } : undefined;
}

export function toEntryInfo(entry: WireEntryInfo): EntryInfo {
  const info: EntryInfo = {
    name: entry.name,
    path: entry.path,
    size: Number(entry.size),
    mode: entry.mode,
    permissions: entry.permissions,
    owner: entry.owner,
    group: entry.group,
  };
  const type = toFileType(entry.type);
  if (type) info.type = type;
  if (entry.modifiedTime) info.modifiedTime = toDate(entry.modifiedTime);
  if (entry.symlinkTarget !== undefined) info.symlinkTarget = entry.symlinkTarget;
  const metadata = nonEmpty(entry.metadata);
  if (metadata) info.metadata = metadata;
  return info;
}

/** Entries of a listing; an entry of unknown kind is left out, as E2B's SDK does. */
export function toEntryInfos(entries: WireEntryInfo[]): EntryInfo[] {
  return entries.filter((e) => e.type !== WireFileType.UNSPECIFIED).map(toEntryInfo);
}

/** What envd's `POST /files` reports of a written file. */
export function toWriteInfo(entry: UploadedEntry): WriteInfo {
  const info: WriteInfo = { name: entry.name, path: entry.path };
  if (entry.type === 'file') info.type = FileType.FILE;
  const metadata = nonEmpty(entry.metadata);
  if (metadata) info.metadata = metadata;
  return info;
}

function toEventType(type: EventType): FilesystemEventType | undefined {
  switch (type) {
    case EventType.CREATE:
      return FilesystemEventType.CREATE;
    case EventType.WRITE:
      return FilesystemEventType.WRITE;
    case EventType.REMOVE:
      return FilesystemEventType.REMOVE;
    case EventType.RENAME:
      return FilesystemEventType.RENAME;
    case EventType.CHMOD:
      return FilesystemEventType.CHMOD;
    default:
      return undefined;
  }
}

/** One message of a WatchDir stream. */
export type WatchMessage = { kind: 'start' } | { kind: 'event'; event: FilesystemEvent } | { kind: 'other' };

export function toWatchMessage(message: WatchDirResponse): WatchMessage {
  const e = message.event;
  if (e.case === 'start') return { kind: 'start' };
  if (e.case !== 'filesystem') return { kind: 'other' };
  const type = toEventType(e.value.type);
  // An event kind this SDK does not know is skipped rather than mislabeled.
  if (!type) return { kind: 'other' };
  const event: FilesystemEvent = { name: e.value.name, type };
  if (e.value.entry) event.entry = toEntryInfo(e.value.entry);
  return { kind: 'event', event };
}

// --- envd: processes ---------------------------------------------------------

export interface ProcessStartInput {
  cmd: string;
  args: string[];
  envs?: Record<string, string> | undefined;
  cwd?: string | undefined;
  /** Left out of the request when undefined: envd then gives a PTY its stdin. */
  stdin?: boolean | undefined;
  pty?: PtySize | undefined;
}

export function toStartRequest(input: ProcessStartInput): MessageInitShape<typeof StartRequestSchema> {
  const request: MessageInitShape<typeof StartRequestSchema> = {
    process: { cmd: input.cmd, args: input.args, envs: input.envs ?? {}, cwd: input.cwd },
  };
  if (input.stdin !== undefined) request.stdin = input.stdin;
  if (input.pty) request.pty = { size: { cols: input.pty.cols, rows: input.pty.rows } };
  return request;
}

export function toResizeRequest(pid: number, size: PtySize): MessageInitShape<typeof UpdateRequestSchema> {
  return { process: pidSelector(pid), pty: { size: { cols: size.cols, rows: size.rows } } };
}

export function pidSelector(pid: number): MessageInitShape<typeof ProcessSelectorSchema> {
  return { selector: { case: 'pid', value: pid } };
}

export const SIGKILL = Signal.SIGKILL;

export function toProcessInput(kind: 'stdin' | 'pty', data: Uint8Array): MessageInitShape<typeof ProcessInputSchema> {
  return { input: { case: kind, value: data } };
}

export function toProcessInfo(info: WireProcessInfo): ProcessInfo {
  const result: ProcessInfo = {
    pid: info.pid,
    cmd: info.config?.cmd ?? '',
    args: [...(info.config?.args ?? [])],
    envs: { ...info.config?.envs },
  };
  if (info.tag) result.tag = info.tag;
  if (info.config?.cwd) result.cwd = info.config.cwd;
  return result;
}

/** One message of a Start or Connect stream. */
export type ProcessMessage =
  | { kind: 'start'; pid: number }
  | { kind: 'stdout' | 'stderr' | 'pty'; data: Uint8Array }
  | { kind: 'end'; exitCode: number; error: string | undefined }
  | { kind: 'other' };

export function toProcessMessage(message: StartResponse | ConnectResponse): ProcessMessage {
  const e = message.event?.event;
  switch (e?.case) {
    case 'start':
      return { kind: 'start', pid: e.value.pid };
    case 'data': {
      const output = e.value.output;
      return output.case === undefined ? { kind: 'other' } : { kind: output.case, data: output.value };
    }
    case 'end':
      return { kind: 'end', exitCode: e.value.exitCode, error: e.value.error || undefined };
    default:
      return { kind: 'other' };
  }
}
