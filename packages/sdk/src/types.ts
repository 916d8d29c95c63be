// The data shapes of the public API, written by hand. The generated wire
// types (OpenAPI and protobuf) never appear in it: convert.ts translates
// between the two, and is the only module that knows both.

/** Whether a sandbox is running or paused. */
export type SandboxState = 'running' | 'paused';

/** Everything needed to reach a sandbox's envd without asking the control API. */
export interface SandboxConnectionInfo {
  sandboxId: string;
  /** Version of envd inside the sandbox; decides which features can be used. */
  envdVersion: string;
  /** Sent to envd as `X-Access-Token` and used to sign file URLs. */
  envdAccessToken?: string | undefined;
  /** Needed to reach the sandbox's ports when public traffic is not allowed. */
  trafficAccessToken?: string | undefined;
  /** Domain under which the sandbox's ports are reached as `{port}-{sandboxId}.{domain}`. */
  sandboxDomain?: string | undefined;
}

/** SOCKS5 proxy that the sandbox's outbound traffic goes through. */
export interface SandboxEgressProxy {
  /** `host:port`. */
  address: string;
  username?: string;
  password?: string;
}

/** A rule applied to outbound requests towards one destination. */
export interface SandboxNetworkRule {
  transform?: {
    /** Headers set on matching requests. */
    headers?: Record<string, string>;
  };
}

/** Network settings of a new sandbox. */
export interface SandboxNetworkOpts {
  /** Destinations the sandbox may reach: CIDR blocks, IPs or domains (`*.` wildcards allowed). Wins over `denyOut`. */
  allowOut?: string[];
  /** Destinations the sandbox may not reach: CIDR blocks or IPs. */
  denyOut?: string[];
  /** Whether the sandbox's ports can be reached without the traffic access token. */
  allowPublicTraffic?: boolean;
  /** Host to present on requests that reach the sandbox through the proxy. */
  maskRequestHost?: string;
  egressProxy?: SandboxEgressProxy;
  /** Per-destination rules, keyed by destination. */
  rules?: Record<string, SandboxNetworkRule[]>;
}

/** New outbound rules for a running sandbox. */
export interface SandboxNetworkUpdate {
  allowOut?: string[];
  denyOut?: string[];
  egressProxy?: SandboxEgressProxy;
  rules?: Record<string, SandboxNetworkRule[]>;
  /** Whether the sandbox may reach the internet at all. */
  allowInternetAccess?: boolean;
}

/** Network settings of a sandbox as the control API reports them (the proxy password is never returned). */
export interface SandboxNetworkInfo {
  allowOut?: string[];
  denyOut?: string[];
  allowPublicTraffic?: boolean;
  maskRequestHost?: string;
  egressProxy?: { address: string; username?: string };
  rules?: Record<string, SandboxNetworkRule[]>;
}

/**
 * What happens when a sandbox's timeout runs out: killed (the default) or
 * paused, optionally keeping only the filesystem (`keepMemory: false`).
 */
export type SandboxOnTimeout = 'kill' | 'pause' | { action: 'pause'; keepMemory?: boolean } | { action: 'kill' };

export interface SandboxLifecycle {
  onTimeout: SandboxOnTimeout;
  /** Resume a paused sandbox when traffic reaches it; only with `onTimeout` pause. */
  autoResume?: boolean;
}

export interface SandboxInfoLifecycle {
  onTimeout: 'kill' | 'pause';
  autoResume: boolean;
}

/** A sandbox as the control API describes it. */
export interface SandboxInfo {
  sandboxId: string;
  templateId: string;
  /** Name of the template, when it was started by name. */
  name?: string;
  metadata: Record<string, string>;
  startedAt: Date;
  /** When the sandbox expires. */
  endAt: Date;
  state: SandboxState;
  cpuCount: number;
  memoryMB: number;
  envdVersion: string;
  /** Known only to `getInfo`. */
  allowInternetAccess?: boolean;
  /** Known only to `getInfo`. */
  network?: SandboxNetworkInfo;
  /** Known only to `getInfo`. */
  lifecycle?: SandboxInfoLifecycle;
  /** Known only to `getInfo`. */
  sandboxDomain?: string;
  volumeMounts: { name: string; path: string }[];
}

/** A saved copy of a sandbox's filesystem that new sandboxes can start from. */
export interface SnapshotInfo {
  /** Pass it to `Sandbox.create` as the template to start a sandbox from the snapshot. */
  snapshotId: string;
  /** Names the snapshot can also be started by. */
  names: string[];
}

/** One resource-usage sample of a sandbox. */
export interface SandboxMetrics {
  timestamp: Date;
  /** CPU usage, in percent. */
  cpuUsedPct: number;
  cpuCount: number;
  /** Bytes. */
  memUsed: number;
  /** Bytes. */
  memTotal: number;
  /** Bytes. */
  memCache: number;
  /** Bytes. */
  diskUsed: number;
  /** Bytes. */
  diskTotal: number;
}

/** Kind of a filesystem entry. Compare with `FileType.DIR` or with the string `'dir'`. */
export const FileType = {
  FILE: 'file',
  DIR: 'dir',
  SYMLINK: 'symlink',
} as const;
export type FileType = (typeof FileType)[keyof typeof FileType];

/** A file just written. */
export interface WriteInfo {
  name: string;
  /** Absolute path. */
  path: string;
  type?: FileType;
  /** Metadata stored with the file; absent when there is none. */
  metadata?: Record<string, string>;
}

/** A filesystem entry inside the sandbox. */
export interface EntryInfo extends WriteInfo {
  /** Bytes (for a symlink, of the link itself). */
  size: number;
  /** Type and permission bits, as `st_mode`. */
  mode: number;
  /** As `ls -l` prints them, e.g. `-rw-r--r--`. */
  permissions: string;
  owner: string;
  group: string;
  modifiedTime?: Date;
  /** Absolute target path of a symlink. */
  symlinkTarget?: string;
}

/** Kind of a filesystem event. Compare with `FilesystemEventType.WRITE` or with the string `'write'`. */
export const FilesystemEventType = {
  CREATE: 'create',
  WRITE: 'write',
  REMOVE: 'remove',
  RENAME: 'rename',
  CHMOD: 'chmod',
} as const;
export type FilesystemEventType = (typeof FilesystemEventType)[keyof typeof FilesystemEventType];

/** A change inside a watched directory. */
export interface FilesystemEvent {
  /** Path relative to the watched directory. */
  name: string;
  type: FilesystemEventType;
  /** The entry after the change, when the watch asked for `includeEntry` and the entry still exists. */
  entry?: EntryInfo;
}

/** A process running in the sandbox. */
export interface ProcessInfo {
  pid: number;
  tag?: string;
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

/** Size of a terminal, in characters. */
export interface PtySize {
  cols: number;
  rows: number;
}
