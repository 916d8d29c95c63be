// The data shapes of the public API, written by hand. The generated wire
// types (OpenAPI and protobuf) never appear in it: convert.ts translates
// between the two, and is the only module that knows both.

/** Whether a sandbox is running or paused. */
export type SandboxState = 'running' | 'paused';

/** Everything needed to reach a sandbox's envd without asking the control API. */
export interface SandboxConnectionInfo {
  /** ID of the sandbox. */
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
  /** User name for the proxy, if it needs one. */
  username?: string;
  /** Password for the proxy, if it needs one. */
  password?: string;
}

/** A rule applied to outbound requests towards one destination. */
export interface SandboxNetworkRule {
  /** Changes made to each matching request. */
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
  /** SOCKS5 proxy for all outbound traffic. */
  egressProxy?: SandboxEgressProxy;
  /** Per-destination rules, keyed by destination. */
  rules?: Record<string, SandboxNetworkRule[]>;
}

/** New outbound rules for a running sandbox. */
export interface SandboxNetworkUpdate {
  /** Destinations the sandbox may reach: CIDR blocks, IPs or domains (`*.` wildcards allowed). Wins over `denyOut`. */
  allowOut?: string[];
  /** Destinations the sandbox may not reach: CIDR blocks or IPs. */
  denyOut?: string[];
  /** SOCKS5 proxy for all outbound traffic. */
  egressProxy?: SandboxEgressProxy;
  /** Per-destination rules, keyed by destination. */
  rules?: Record<string, SandboxNetworkRule[]>;
  /** Whether the sandbox may reach the internet at all. */
  allowInternetAccess?: boolean;
}

/** Network settings of a sandbox as the control API reports them (the proxy password is never returned). */
export interface SandboxNetworkInfo {
  /** Destinations the sandbox may reach. */
  allowOut?: string[];
  /** Destinations the sandbox may not reach. */
  denyOut?: string[];
  /** Whether the sandbox's ports can be reached without the traffic access token. */
  allowPublicTraffic?: boolean;
  /** Host presented on requests that reach the sandbox through the proxy. */
  maskRequestHost?: string;
  /** SOCKS5 proxy for outbound traffic, without its password. */
  egressProxy?: {
    /** `host:port`. */
    address: string;
    /** User name for the proxy, if it needs one. */
    username?: string;
  };
  /** Per-destination rules, keyed by destination. */
  rules?: Record<string, SandboxNetworkRule[]>;
}

/**
 * What happens when a sandbox's timeout runs out: killed (the default) or
 * paused, optionally keeping only the filesystem (`keepMemory: false`).
 */
export type SandboxOnTimeout =
  | 'kill'
  | 'pause'
  | {
      /** Pause the sandbox. */
      action: 'pause';
      /** Keep the memory as well as the filesystem; `false` keeps only the filesystem. */
      keepMemory?: boolean;
    }
  | {
      /** Kill the sandbox. */
      action: 'kill';
    };

/** What a new sandbox does when its timeout runs out. */
export interface SandboxLifecycle {
  /** Kill or pause the sandbox. */
  onTimeout: SandboxOnTimeout;
  /** Resume a paused sandbox when traffic reaches it; only with `onTimeout` pause. */
  autoResume?: boolean;
}

/** What a sandbox does when its timeout runs out, as the control API reports it. */
export interface SandboxInfoLifecycle {
  /** Whether the sandbox is killed or paused. */
  onTimeout: 'kill' | 'pause';
  /** Whether a paused sandbox resumes when traffic reaches it. */
  autoResume: boolean;
}

/** A sandbox as the control API describes it. */
export interface SandboxInfo {
  /** ID of the sandbox. */
  sandboxId: string;
  /** ID of the template it was started from. */
  templateId: string;
  /** Name of the template, when it was started by name. */
  name?: string;
  /** Metadata given when the sandbox was created. */
  metadata: Record<string, string>;
  /** When the sandbox was started. */
  startedAt: Date;
  /** When the sandbox expires. */
  endAt: Date;
  /** Whether the sandbox is running or paused. */
  state: SandboxState;
  /** Number of CPUs the sandbox may use. */
  cpuCount: number;
  /** Memory, in MiB. */
  memoryMB: number;
  /** Version of envd inside the sandbox. */
  envdVersion: string;
  /** Known only to `getInfo`. */
  allowInternetAccess?: boolean;
  /** Known only to `getInfo`. */
  network?: SandboxNetworkInfo;
  /** Known only to `getInfo`. */
  lifecycle?: SandboxInfoLifecycle;
  /** Known only to `getInfo`. */
  sandboxDomain?: string;
  /** Volumes mounted in the sandbox: the volume's name and the path it is mounted at. */
  volumeMounts: {
    /** Name of the volume. */
    name: string;
    /** Absolute path inside the sandbox. */
    path: string;
  }[];
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
  /** When the sample was taken. */
  timestamp: Date;
  /** CPU usage, in percent. */
  cpuUsedPct: number;
  /** Number of CPUs the sandbox may use. */
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
  /** A regular file. */
  FILE: 'file',
  /** A directory. */
  DIR: 'dir',
  /** A symbolic link. */
  SYMLINK: 'symlink',
} as const;
export type FileType = (typeof FileType)[keyof typeof FileType];

/** A file just written. */
export interface WriteInfo {
  /** Base name of the file. */
  name: string;
  /** Absolute path. */
  path: string;
  /** Kind of the entry; absent when envd did not say. */
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
  /** Name of the owning user. */
  owner: string;
  /** Name of the owning group. */
  group: string;
  /** Last modification time. */
  modifiedTime?: Date;
  /** Absolute target path of a symlink. */
  symlinkTarget?: string;
}

/** Kind of a filesystem event. Compare with `FilesystemEventType.WRITE` or with the string `'write'`. */
export const FilesystemEventType = {
  /** An entry was created. */
  CREATE: 'create',
  /** A file was written to. */
  WRITE: 'write',
  /** An entry was removed. */
  REMOVE: 'remove',
  /** An entry was renamed or moved. */
  RENAME: 'rename',
  /** An entry's permissions changed. */
  CHMOD: 'chmod',
} as const;
export type FilesystemEventType = (typeof FilesystemEventType)[keyof typeof FilesystemEventType];

/** A change inside a watched directory. */
export interface FilesystemEvent {
  /** Path relative to the watched directory. */
  name: string;
  /** What happened to the entry. */
  type: FilesystemEventType;
  /** The entry after the change, when the watch asked for `includeEntry` and the entry still exists. */
  entry?: EntryInfo;
}

/** A process running in the sandbox. */
export interface ProcessInfo {
  /** Process ID inside the sandbox. */
  pid: number;
  /** Tag given to the process when it was started, if any. */
  tag?: string;
  /** Command the process was started with. */
  cmd: string;
  /** Arguments the process was started with. */
  args: string[];
  /** Environment variables set when the process was started (not its whole environment). */
  envs: Record<string, string>;
  /** Working directory the process was started in, when one was given. */
  cwd?: string;
}

/** Size of a terminal, in characters. */
export interface PtySize {
  /** Width, in columns. */
  cols: number;
  /** Height, in rows. */
  rows: number;
}
