// The runtime interface: what the control plane needs from whatever runs
// sandboxes. RuncRuntime implements it on one Linux host; a cluster
// implementation (pods running the same envd) can implement it later.
// Nothing here refers to runc, cgroups or paths on the host.
import type { Duplex } from 'node:stream';

export type SandboxStatus = 'running' | 'paused' | 'stopped';

export interface Limits {
  cpuCount: number;
  memoryMB: number;
  /** The most a sandbox may write, MiB: the size of its disk. */
  diskSizeMB: number;
}

/** What envd is told when a sandbox is handed to a caller (POST /init). */
export interface EnvdInit {
  accessToken?: string;
  envVars?: Record<string, string>;
  defaultUser?: string;
  defaultWorkdir?: string;
}

/**
 * What a sandbox may reach, as E2B's control API states it: allowOut holds
 * CIDR blocks, IP addresses and domain names (`*.` wildcards leading),
 * denyOut CIDR blocks and IP addresses; an address both match is allowed,
 * one neither matches is allowed, and allowInternet false lets nothing out.
 */
export interface NetworkRules {
  /** Default true. */
  allowInternet?: boolean;
  allowOut?: string[];
  denyOut?: string[];
}

export interface CreateOptions {
  templateId: string;
  /** Its egress rules; internet access with no rules when omitted. */
  network?: NetworkRules;
  /** Limits; the template's when omitted. */
  limits?: Partial<Limits>;
  init?: EnvdInit;
  /** Skip the warm pool even when one is ready. */
  cold?: boolean;
}

export interface RuntimeSandbox {
  id: string;
  templateId: string;
  status: SandboxStatus;
  limits: Limits;
  createdAt: Date;
  /** Whether this sandbox came ready from the warm pool. */
  fromPool?: boolean;
}

export interface SandboxStats {
  timestamp: Date;
  cpuCount: number;
  /** Average since the previous sample of this sandbox, 0–100. */
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
  /** Processes the kernel killed in the sandbox for want of memory since it last started. */
  oomKills: number;
}

/** How to reach a sandbox's envd over HTTP: a unix socket or a TCP address. */
export type EnvdEndpoint = { socketPath: string } | { host: string; port: number };

/** How a template's processes run: envd's defaults for every process of its sandboxes. */
export interface TemplateConfig {
  /** `KEY=value`, under what a caller sets. */
  env: string[];
  /** The default user; unset: `user`, else root where the image has no `user`. */
  user?: string;
  /** The default working directory; unset: the user's home. */
  workingDir?: string;
}

export interface TemplateInfo {
  id: string;
  /** The template this one was made from; a root template (the base, one made from an image) has none. */
  parentId: string | null;
  limits: Limits;
  createdAt: Date;
  /** The id of the image at the bottom of its layers (in the image store). */
  imageId: string;
  config: TemplateConfig;
}

export interface TemplateFromImageOptions {
  limits?: Partial<Limits>;
  onProgress?: (message: string) => void;
  /** An existing root template of that id is made again on the image (its sandboxes keep the old one). */
  replace?: boolean;
  /** Registry credentials for this pull, besides those the runtime was configured with. */
  auth?: { username: string; password: string };
}

/** What a build's COPY step places: files of a tar archive, with the owner and mode the step names. */
export interface FilesCopy {
  /** The archive (tar, gzip-compressed or not) on this host. */
  archive: string;
  /** What of it: a path in it (`app/`, `file.txt`), `.` for all. */
  source: string;
  /** Where to: absolute, or relative to `workdir`, else to the home of `user`, else to `/`. */
  dest: string;
  workdir?: string;
  /** The step's user: the owner when `owner` is not given. */
  user?: string;
  /** `user`, `user:group`, `uid` or `uid:gid`, as the image's account files name them. */
  owner?: string;
  /** Octal permission bits of every file and directory placed (`0755`). */
  mode?: string;
  /**
   * A directory of the caller's, out of every sandbox's reach, where the
   * archive is kept unpacked: made by the first copy that names it (in
   * `scratch`, a directory of the caller's on the same filesystem, then
   * renamed), and copied from, in the kernel, by every copy of the archive.
   */
  unpacked?: { dir: string; scratch: string };
}

export interface TemplateWithFilesOptions {
  /** How its processes run; its parent's when omitted. */
  config?: TemplateConfig;
  /** Its limits, its parent's for those omitted; the disk size bounds what the archive may hold. */
  limits?: Partial<Limits>;
  /** Stops the copy, which then fails with the signal's reason. */
  signal?: AbortSignal;
}

/** The command of a build step run by runStep. */
export interface StepCommand {
  /** A command line, run by bash as a login shell where the image has /bin/bash (as the SDKs run commands), else by /bin/sh. */
  shell?: string;
  /** Or a program and its arguments, run as they are (`shell` unset). */
  argv?: readonly string[];
  /** Who runs it; it must exist. Unset: the template's user, else `user`, else root. */
  user?: string;
  /** Its working directory, absolute or in the user's home; unset: the template's, else the home. It must exist. */
  cwd?: string;
  /** Set over the template's environment (and HOME, USER, LOGNAME, which the user gives). */
  env?: Record<string, string>;
}

export interface RunStepOptions {
  /** The step container's limits, the template's for those omitted. */
  limits?: Partial<Limits>;
  /** Its egress rules; internet access with no rules when omitted. */
  network?: NetworkRules;
  /**
   * A network held for a build's steps (holdStepNetwork): the container
   * joins its slot, with its rules (`network` is not used), instead of
   * taking a slot of its own that its removal releases.
   */
  stepNetwork?: string;
  /** How the new template's processes run; the template's when omitted. */
  config?: TemplateConfig;
  /** The command's output, as it comes. */
  onOutput?: (stream: 'stdout' | 'stderr', bytes: Buffer) => void;
  /** Kills the command; runStep then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface StepResult {
  exitCode: number;
  /** `exit status 0`, `exit status 3`, or why the command could not start. */
  status: string;
  /** The new template, made of the step container's files, when the command exited 0. */
  template?: TemplateInfo;
  /** The step container, stopped, for destroy(). */
  sandboxId: string;
  /** How long its parts took, ms: making the container, running the command, taking its files (when it exited 0). */
  ms: { container: number; command: number; layer?: number };
}

export interface Runtime {
  /** Makes sure the built-in templates exist: the first time, the base template's image is built or pulled. */
  prepare(onProgress?: (message: string) => void): Promise<void>;
  /** Creates and starts a sandbox; resolves when envd is ready and initialised. */
  create(opts: CreateOptions): Promise<RuntimeSandbox>;
  /** Starts a stopped sandbox again on its kept filesystem. */
  start(id: string, init?: EnvdInit): Promise<void>;
  /** Freezes every process of a running sandbox, keeping its memory. */
  pause(id: string): Promise<void>;
  /** Thaws a paused sandbox. */
  resume(id: string): Promise<void>;
  /** Ends a sandbox's processes, keeping its filesystem. */
  stop(id: string): Promise<void>;
  /** Removes a sandbox and everything it had. Succeeds for unknown ids. */
  destroy(id: string): Promise<void>;
  /** The sandbox, or undefined when it does not exist. */
  get(id: string): Promise<RuntimeSandbox | undefined>;
  /** Every sandbox that exists, for adoption after a restart. */
  list(): Promise<RuntimeSandbox[]>;
  stats(id: string): Promise<SandboxStats>;
  envdEndpoint(id: string): EnvdEndpoint;
  /**
   * Replaces a sandbox's egress rules, live when it runs: connections the
   * new rules deny are cut. A stopped sandbox starts with them.
   */
  updateNetwork(id: string, rules: NetworkRules): Promise<void>;
  /** A byte stream to TCP `port` inside the sandbox's network namespace. */
  openTunnel(id: string, port: number): Promise<Duplex>;
  /**
   * Makes a template from an image in an OCI registry (`registry/name:tag`
   * or `...@sha256:...`), pulled unless its layers are here already.
   */
  templateFromImage(templateId: string, reference: string, opts?: TemplateFromImageOptions): Promise<TemplateInfo>;
  /**
   * Makes a template from an image archive on this host: what `docker save`
   * writes, or an OCI image layout as a tar.
   */
  templateFromArchive(templateId: string, archivePath: string, opts?: Omit<TemplateFromImageOptions, 'auth'> & { reference?: string }): Promise<TemplateInfo>;
  /** Makes the base template's image again; sandboxes running on the old one keep it. */
  rebuildBase(onProgress?: (message: string) => void): Promise<TemplateInfo>;
  /**
   * Copies a sandbox's filesystem into a new template (memory is not
   * copied); `config` replaces what it takes of its template's. With `end`
   * (a sandbox of no more use, as a build's container after its step), its
   * processes are ended for the copy instead of frozen and thawed; it is
   * then left for destroy().
   */
  snapshot(id: string, templateId: string, opts?: { config?: TemplateConfig; end?: boolean }): Promise<TemplateInfo>;
  /**
   * A new template: the files of `parentId` with those of an archive placed
   * in them as a build's COPY places them, and `config`. No sandbox runs for
   * it; a failure (a bad archive, a missing user) is `invalid`, naming it,
   * and leaves nothing.
   */
  templateWithFiles(templateId: string, parentId: string, files: FilesCopy, opts?: TemplateWithFilesOptions): Promise<TemplateInfo>;
  /**
   * Runs a build step's command as the only process of a new container on
   * `templateId`'s files, made as a sandbox is (user namespace, seccomp,
   * cgroup limits, network slot with `network`'s egress rules) but without
   * envd; the command runs as envd would run it (user, home, environment,
   * working directory). Its processes end with it. When it exits 0, the
   * files it changed become template `stepTemplateId`, with `config`. The
   * container is left stopped for destroy(); a failure to make or start it
   * throws and leaves nothing. A user or working directory that does not
   * exist is a `status` naming it, as a command that failed.
   */
  runStep(templateId: string, stepTemplateId: string, command: StepCommand, opts?: RunStepOptions): Promise<StepResult>;
  /**
   * A network slot with `rules` (internet access with no rules when
   * omitted) held for the step containers of one build, which join it one
   * after another (runStep's `stepNetwork`, never two at once): taken and
   * released once per build rather than once per step. destroy() of the id
   * releases it; a restart of the runtime releases it too, as it removes
   * step containers.
   */
  holdStepNetwork(rules?: NetworkRules): Promise<string>;
  /** A new template with the files of `parentId` and another config. */
  deriveTemplate(templateId: string, parentId: string, config: TemplateConfig): Promise<TemplateInfo>;
  getTemplate(id: string): Promise<TemplateInfo | undefined>;
  listTemplates(): Promise<TemplateInfo[]>;
  /** Deletes a template; refused while sandboxes or other templates use it. */
  deleteTemplate(id: string): Promise<void>;
  /**
   * Calls `listener` with the id of every sandbox whose processes ended by
   * themselves (its init exited: `kill 1` inside, a crash): the runtime
   * noticed within seconds and stopped it, keeping its files, so that
   * start() runs it again. Not for sandboxes that stop() or destroy() ended.
   * `oomKilled`: the kernel had killed processes in it for want of memory
   * (its init among them, most likely). Returns what removes the listener.
   */
  onExit(listener: (id: string, oomKilled: boolean) => void): () => void;
  /** Stops background work (the warm pool, watching for exits); leaves sandboxes running. */
  close(): Promise<void>;
}

/**
 * A runtime's traces on the machines it runs on, for installing,
 * uninstalling and tests' leak checks.
 */
export interface HostAdmin {
  /** What of this runtime is on the host (mounts, cgroups, containers, directories, devices): empty after removeEverything(). */
  leftovers(): Promise<string[]>;
  /** Destroys every sandbox, pooled ones and half-made ones included, and releases what the runtime holds on the host. */
  removeEverything(): Promise<void>;
}

/** One part of a runtime's readiness, as a health check reports it. */
export interface HealthCheck {
  ok: boolean;
  detail: string;
}

/** A runtime that can say whether it is able to make and run sandboxes now. */
export interface RuntimeHealth {
  /** Its parts by name (`runtime`, `network` ...); cheap enough for a probe every few seconds. */
  health(): Promise<Record<string, HealthCheck>>;
}

export function hasHealth(runtime: Runtime): runtime is Runtime & RuntimeHealth {
  return typeof (runtime as Partial<RuntimeHealth>).health === 'function';
}

/** A template whose sandboxes the warm pool keeps booted. */
export interface PooledTemplate {
  templateId: string;
  /**
   * Runs on each sandbox booted for the pool before anyone can take it,
   * with the sandbox's id: what its creator would otherwise wait for (the
   * template's start command and its readiness). A failure discards the
   * sandbox, and the template is tried again after a wait that doubles with
   * each failure in a row (other templates fill meanwhile). A sandbox taken
   * from the pool has been through it.
   */
  prepare?: (sandboxId: string) => Promise<void>;
}

/** A runtime that keeps booted sandboxes ready per template, claimed by create(). */
export interface WarmPool {
  /** Resolves once every pooled template's pool is full, or a refill ended without filling it. */
  poolReady(): Promise<void>;
  /** The ids waiting in each template's pool. */
  pooled(): Record<string, string[]>;
  /**
   * The templates that get a pool from now on, replacing the earlier list:
   * the pooled sandboxes of a template that left it are removed, and the
   * pools of the others filled in the background.
   */
  setPooledTemplates(templates: PooledTemplate[]): Promise<void>;
}

export function isWarmPool(runtime: Runtime): runtime is Runtime & WarmPool {
  const r = runtime as Partial<WarmPool>;
  return typeof r.poolReady === 'function' && typeof r.pooled === 'function' && typeof r.setPooledTemplates === 'function';
}

export function isHostAdmin(runtime: Runtime): runtime is Runtime & HostAdmin {
  const r = runtime as Partial<HostAdmin>;
  return typeof r.leftovers === 'function' && typeof r.removeEverything === 'function';
}

export type RuntimeErrorKind = 'not_found' | 'conflict' | 'invalid' | 'unavailable' | 'internal';

/** A failure the caller can act on; `kind` maps onto HTTP statuses upstream. */
export class RuntimeError extends Error {
  constructor(
    readonly kind: RuntimeErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RuntimeError';
  }
}
