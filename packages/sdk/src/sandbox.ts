// `Sandbox`: one sandbox, its lifecycle through the control API, and its
// files, commands and terminals through its envd.
import { EnvdClient } from '@paddock/envd-client';
import { isTcpPort, sandboxHost } from '@paddock/protocol';
import { Commands } from './commands.js';
import {
  DEFAULT_SANDBOX_TIMEOUT_MS,
  checkDuration,
  envdUrl,
  resolveConfig,
  withBoundOptions,
  type ConnectionOpts,
  type RequestOpts,
  type ResolvedConfig,
} from './config.js';
import type { SandboxContext } from './context.js';
import { ENVD_FEATURES, MIN_ENVD_VERSION, atLeast } from './envd-version.js';
import { fromEnvdHttpError } from './error-mapping.js';
import { InvalidArgumentError, TemplateError } from './errors.js';
import { Filesystem } from './filesystem.js';
import { Git } from './git.js';
import { envdProxyOptions } from './proxy.js';
import { Pty } from './pty.js';
import {
  connectSandbox,
  createSandbox,
  createSnapshot,
  deleteSnapshot,
  forkSandbox,
  getSandboxInfo,
  getSandboxMetrics,
  killSandbox,
  listSandboxes,
  listSnapshots,
  pauseSandbox,
  setSandboxTimeout,
  updateSandboxNetwork,
  type ListQuery,
  type MetricsRange,
  type SandboxPaginator,
  type SnapshotPaginator,
  type SnapshotQuery,
} from './sandbox-api.js';
import type {
  SandboxConnectionInfo,
  SandboxInfo,
  SandboxLifecycle,
  SandboxMetrics,
  SandboxNetworkOpts,
  SandboxNetworkUpdate,
  SnapshotInfo,
} from './types.js';

/** Connection settings plus a signal for the one call they are given to. */
export interface SandboxApiOpts extends ConnectionOpts {
  /** Cancels the call. */
  signal?: AbortSignal;
}

/** Options of `Sandbox.create`. */
export interface SandboxOpts extends SandboxApiOpts {
  /** Template ID or name. Default `base`. */
  template?: string;
  /** Labels to find the sandbox by (`Sandbox.list`). */
  metadata?: Record<string, string>;
  /** Environment variables of every process in the sandbox. */
  envs?: Record<string, string>;
  /** Lifetime in ms, from now; `setTimeout` changes it later. Default 300 000. */
  timeoutMs?: number;
  /** Require the envd access token on every request to the sandbox. Default true. */
  secure?: boolean;
  /** Whether the sandbox may reach the internet. */
  allowInternetAccess?: boolean;
  /** Outbound and inbound network settings. */
  network?: SandboxNetworkOpts;
  /** What happens when the timeout runs out; killed by default. */
  lifecycle?: SandboxLifecycle;
}

/** Options of `Sandbox.connect`. */
export interface SandboxConnectOpts extends SandboxApiOpts {
  /**
   * The sandbox lives at least this long from now, in ms (an expiry already
   * later is kept). Default 300 000.
   */
  timeoutMs?: number;
}

/** Options of `Sandbox.list`. */
export interface SandboxListOpts extends ConnectionOpts, ListQuery {}

/** Options of `Sandbox.getMetrics`. */
export interface SandboxMetricsOpts extends SandboxApiOpts {
  /** Samples from this time on. */
  start?: Date;
  /** Samples up to this time. */
  end?: Date;
}

/** Options of `Sandbox.pause`. */
export interface SandboxPauseOpts extends SandboxApiOpts {
  /** Keep memory (running processes) as well as the filesystem. The server's default (true) when omitted. */
  keepMemory?: boolean;
}

/** Options of `sandbox.getMetrics`. */
export interface SandboxMetricsRangeOpts extends RequestOpts {
  /** Samples from this time on. */
  start?: Date;
  /** Samples up to this time. */
  end?: Date;
}

/** Options of `Sandbox.fork`. */
export interface SandboxForkOpts extends SandboxApiOpts {
  /** How many sandboxes to start from the copy, 1 to 100. Default 1. */
  count?: number;
  /** Lifetime of each new sandbox in ms, from now. Default 300 000. */
  timeoutMs?: number;
}

/** Options of `Sandbox.createSnapshot`. */
export interface CreateSnapshotOpts extends SandboxApiOpts {
  /** Name to start sandboxes from the snapshot by; a new build of that snapshot when the name is taken. */
  name?: string;
}

/** Options of `Sandbox.listSnapshots`. */
export interface SnapshotListOpts extends ConnectionOpts, SnapshotQuery {}

/** Options of `uploadUrl` and `downloadUrl`. */
export interface SandboxUrlOpts {
  /** User to read or write as; envd's default user when omitted. */
  user?: string;
  /** Seconds the URL stays valid; forever when omitted. Needs a secure sandbox. */
  useSignatureExpiration?: number;
}

/**
 * A sandbox. Get one with `Sandbox.create`, `Sandbox.connect`, or
 * `Sandbox.fromConnectionInfo` when its connection details are already known.
 */
export class Sandbox {
  /** ID of the sandbox. */
  readonly sandboxId: string;
  /** Domain of the sandbox's hosts: `getHost(port)` is `{port}-{sandboxId}.{sandboxDomain}`. */
  readonly sandboxDomain: string;
  /** Version of envd inside the sandbox. */
  readonly envdVersion: string;
  /** Needed to reach the sandbox's ports when public traffic is not allowed. */
  readonly trafficAccessToken: string | undefined;
  /** Files and directories in the sandbox. */
  readonly files: Filesystem;
  /** Processes in the sandbox. */
  readonly commands: Commands;
  /** Terminals (processes with a pseudo-terminal) in the sandbox. */
  readonly pty: Pty;
  /** git in the sandbox, run through `commands`. */
  readonly git: Git;
  readonly #envdAccessToken: string | undefined;
  readonly #config: ResolvedConfig;
  readonly #envd: EnvdClient;

  /**
   * Made by `Sandbox.create`, `Sandbox.connect` and `Sandbox.fromConnectionInfo`; not for calling directly.
   * @internal
   */
  protected constructor(info: SandboxConnectionInfo, config: ResolvedConfig) {
    this.sandboxId = info.sandboxId;
    this.sandboxDomain = info.sandboxDomain ?? config.domain;
    this.envdVersion = info.envdVersion;
    this.trafficAccessToken = info.trafficAccessToken;
    this.#envdAccessToken = info.envdAccessToken;
    this.#config = config;
    this.#envd = new EnvdClient({
      envdUrl: envdUrl(config, this.sandboxId, this.sandboxDomain),
      accessToken: info.envdAccessToken,
      // Sent on every request, as E2B's SDK does, so that a shared sandbox URL can route it.
      sandboxId: this.sandboxId,
      requestTimeoutMs: config.requestTimeoutMs,
      headers: config.headers,
      // envd speaks both Connect formats. JSON carries output and file bytes
      // as base64 text, which costs encoding in envd and decoding here: a
      // command's stdout streamed ~15× slower than in the binary format.
      useBinaryFormat: true,
      ...(config.proxy === undefined ? {} : envdProxyOptions(config.proxy)),
    });
    const context: SandboxContext = {
      envd: this.#envd,
      envdVersion: this.envdVersion,
      requestTimeoutMs: config.requestTimeoutMs,
    };
    this.files = new Filesystem(context);
    this.commands = new Commands(context);
    this.pty = new Pty(context);
    this.git = new Git(this.commands);
  }

  /** Creates a sandbox from a template (default `base`). */
  static create(opts?: SandboxOpts): Promise<Sandbox>;
  static create(template: string, opts?: SandboxOpts): Promise<Sandbox>;
  static async create(templateOrOpts?: string | SandboxOpts, maybeOpts?: SandboxOpts): Promise<Sandbox> {
    const opts = (typeof templateOrOpts === 'string' ? maybeOpts : templateOrOpts) ?? {};
    const template = typeof templateOrOpts === 'string' ? templateOrOpts : (opts.template ?? 'base');
    checkDuration('timeoutMs', opts.timeoutMs);
    const config = resolveConfig(withBoundOptions(this, opts));
    if (config.debug) return new this(debugSandbox(), config);
    const info = await createSandbox(
      config,
      {
        template,
        timeoutMs: opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS,
        metadata: opts.metadata,
        envs: opts.envs,
        secure: opts.secure ?? true,
        allowInternetAccess: opts.allowInternetAccess,
        network: opts.network,
        lifecycle: opts.lifecycle,
      },
      opts,
    );
    if (!atLeast(info.envdVersion, MIN_ENVD_VERSION)) {
      // Nobody could use it: do not leave it running until its timeout.
      await killSandbox(config, info.sandboxId, {}).catch(() => false);
      throw tooOld(info.envdVersion, template);
    }
    return new this(info, config);
  }

  /**
   * Connects to an existing sandbox, resuming it when it is paused, and makes
   * sure it lives at least `timeoutMs` more.
   */
  static async connect(sandboxId: string, opts: SandboxConnectOpts = {}): Promise<Sandbox> {
    checkDuration('timeoutMs', opts.timeoutMs);
    const config = resolveConfig(withBoundOptions(this, opts));
    if (config.debug) return new this(debugSandbox(), config);
    const info = await connectSandbox(config, sandboxId, opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS, opts);
    if (!atLeast(info.envdVersion, MIN_ENVD_VERSION)) throw tooOld(info.envdVersion, sandboxId);
    return new this(info, config);
  }

  /**
   * A sandbox object from connection details already at hand (saved from
   * `connectionInfo`, or handed over by another process), without a call to
   * the control API. With `sandboxUrl` set to an envd's own URL, files,
   * commands and terminals work against that envd alone.
   */
  static fromConnectionInfo(info: SandboxConnectionInfo, opts: ConnectionOpts = {}): Sandbox {
    if (!info.sandboxId) throw new InvalidArgumentError('sandboxId must not be empty');
    if (!atLeast(info.envdVersion, MIN_ENVD_VERSION)) throw tooOld(info.envdVersion, info.sandboxId);
    return new this(info, resolveConfig(withBoundOptions(this, opts)));
  }

  /** Sandboxes of the team, newest first, filtered by `query`. */
  static list(opts: SandboxListOpts = {}): SandboxPaginator {
    return listSandboxes(resolveConfig(withBoundOptions(this, opts)), opts);
  }

  /** Kills a sandbox. False when it does not exist. */
  static async kill(sandboxId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    const config = resolveConfig(withBoundOptions(this, opts));
    return config.debug ? true : killSandbox(config, sandboxId, opts);
  }

  /** Describes a sandbox, including its network and lifecycle settings. */
  static getInfo(sandboxId: string, opts: SandboxApiOpts = {}): Promise<SandboxInfo> {
    return getSandboxInfo(resolveConfig(withBoundOptions(this, opts)), sandboxId, opts);
  }

  /** @deprecated E2B's former name of `getInfo`. */
  static getFullInfo(sandboxId: string, opts: SandboxApiOpts = {}): Promise<SandboxInfo> {
    return this.getInfo(sandboxId, opts);
  }

  /** Resource usage samples of a sandbox, oldest first. */
  static getMetrics(sandboxId: string, opts: SandboxMetricsOpts = {}): Promise<SandboxMetrics[]> {
    return getSandboxMetrics(resolveConfig(withBoundOptions(this, opts)), sandboxId, metricsRange(opts), opts);
  }

  /** Sets the sandbox to expire `timeoutMs` from now, sooner or later than before. */
  static async setTimeout(sandboxId: string, timeoutMs: number, opts: SandboxApiOpts = {}): Promise<void> {
    checkDuration('timeoutMs', timeoutMs);
    const config = resolveConfig(withBoundOptions(this, opts));
    if (!config.debug) await setSandboxTimeout(config, sandboxId, timeoutMs, opts);
  }

  /** Pauses a sandbox; `Sandbox.connect` resumes it. False when it was not running. */
  static pause(sandboxId: string, opts: SandboxPauseOpts = {}): Promise<boolean> {
    return pauseSandbox(resolveConfig(withBoundOptions(this, opts)), sandboxId, opts.keepMemory, opts);
  }

  /** @deprecated E2B's former name of `pause`. */
  static betaPause(sandboxId: string, opts: SandboxPauseOpts = {}): Promise<boolean> {
    return this.pause(sandboxId, opts);
  }

  /** Replaces the sandbox's outbound rules with `network`; what it leaves out is cleared. */
  static updateNetwork(sandboxId: string, network: SandboxNetworkUpdate, opts: SandboxApiOpts = {}): Promise<void> {
    return updateSandboxNetwork(resolveConfig(withBoundOptions(this, opts)), sandboxId, network, opts);
  }

  /**
   * Saves the sandbox's filesystem as a snapshot; `Sandbox.create(snapshotId)`
   * starts sandboxes from it. The sandbox keeps running. Memory and running
   * processes are not part of it.
   */
  static createSnapshot(sandboxId: string, opts: CreateSnapshotOpts = {}): Promise<SnapshotInfo> {
    return createSnapshot(resolveConfig(withBoundOptions(this, opts)), sandboxId, opts.name, opts);
  }

  /** The team's snapshots, optionally only those of one sandbox or name. */
  static listSnapshots(opts: SnapshotListOpts = {}): SnapshotPaginator {
    return listSnapshots(resolveConfig(withBoundOptions(this, opts)), opts);
  }

  /** Deletes a snapshot. False when there is no such snapshot. */
  static deleteSnapshot(snapshotId: string, opts: SandboxApiOpts = {}): Promise<boolean> {
    return deleteSnapshot(resolveConfig(withBoundOptions(this, opts)), snapshotId, opts);
  }

  /**
   * Starts `count` new sandboxes, each with a copy of this sandbox's
   * filesystem as it is now; they boot fresh (memory and processes are not
   * copied). Each entry is the new sandbox, or the error that stopped that
   * one fork (a `SandboxError` subclass as for any call).
   */
  static async fork(sandboxId: string, opts: SandboxForkOpts = {}): Promise<Array<Sandbox | Error>> {
    checkDuration('timeoutMs', opts.timeoutMs);
    if (opts.count !== undefined && (!Number.isSafeInteger(opts.count) || opts.count < 1 || opts.count > 100)) {
      throw new InvalidArgumentError(`count must be a whole number from 1 to 100; got ${String(opts.count)}`);
    }
    const config = resolveConfig(withBoundOptions(this, opts));
    const results = await forkSandbox(config, sandboxId, { timeoutMs: opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS, count: opts.count }, opts);
    return results.map((result) => {
      if (result instanceof Error) return result;
      return atLeast(result.envdVersion, MIN_ENVD_VERSION) ? new this(result, config) : tooOld(result.envdVersion, sandboxId);
    });
  }

  /** What `fromConnectionInfo` needs to rebuild this object elsewhere. Holds the access token: keep it secret. */
  get connectionInfo(): SandboxConnectionInfo {
    return {
      sandboxId: this.sandboxId,
      envdVersion: this.envdVersion,
      envdAccessToken: this.#envdAccessToken,
      trafficAccessToken: this.trafficAccessToken,
      sandboxDomain: this.sandboxDomain,
    };
  }

  /** Resumes the sandbox if it is paused and makes sure it lives at least `timeoutMs` more (default 300 000). */
  async connect(opts: RequestOpts & { timeoutMs?: number } = {}): Promise<this> {
    checkDuration('timeoutMs', opts.timeoutMs);
    if (this.#config.debug) return this;
    await connectSandbox(this.#config, this.sandboxId, opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS, opts);
    return this;
  }

  /** Kills the sandbox. False when it was already gone. */
  async kill(opts: RequestOpts = {}): Promise<boolean> {
    return this.#config.debug ? true : killSandbox(this.#config, this.sandboxId, opts);
  }

  /** Sets the sandbox to expire `timeoutMs` from now, sooner or later than before. */
  async setTimeout(timeoutMs: number, opts: RequestOpts = {}): Promise<void> {
    checkDuration('timeoutMs', timeoutMs);
    if (!this.#config.debug) await setSandboxTimeout(this.#config, this.sandboxId, timeoutMs, opts);
  }

  /** Saves this sandbox's filesystem as a snapshot (see `Sandbox.createSnapshot`). */
  createSnapshot(opts: RequestOpts & { name?: string } = {}): Promise<SnapshotInfo> {
    return createSnapshot(this.#config, this.sandboxId, opts.name, opts);
  }

  /** Snapshots taken from this sandbox. */
  listSnapshots(opts: Omit<SnapshotQuery, 'sandboxId'> = {}): SnapshotPaginator {
    return listSnapshots(this.#config, { ...opts, sandboxId: this.sandboxId });
  }

  /** New sandboxes with a copy of this one's filesystem (see `Sandbox.fork`). */
  async fork(opts: RequestOpts & { count?: number; timeoutMs?: number } = {}): Promise<Array<Sandbox | Error>> {
    return (this.constructor as typeof Sandbox).fork(this.sandboxId, { ...this.#connectionOpts(), ...opts });
  }

  /** The connection settings this object was made with, as options of a static call. */
  #connectionOpts(): ConnectionOpts {
    const c = this.#config;
    return {
      apiUrl: c.apiUrl,
      apiKey: c.apiKey,
      domain: c.domain,
      sandboxUrl: c.sandboxUrl,
      requestTimeoutMs: c.requestTimeoutMs,
      retries: c.retries,
      logger: c.logger,
      headers: c.headers,
      apiHeaders: c.apiHeaders,
      proxy: c.proxy,
    };
  }

  /** Describes the sandbox, including its network and lifecycle settings. */
  getInfo(opts: RequestOpts = {}): Promise<SandboxInfo> {
    return getSandboxInfo(this.#config, this.sandboxId, opts);
  }

  /** Resource usage samples, oldest first. */
  getMetrics(opts: SandboxMetricsRangeOpts = {}): Promise<SandboxMetrics[]> {
    return getSandboxMetrics(this.#config, this.sandboxId, metricsRange(opts), opts);
  }

  /** Pauses the sandbox; `connect` resumes it. False when it was not running. */
  pause(opts: RequestOpts & { keepMemory?: boolean } = {}): Promise<boolean> {
    return pauseSandbox(this.#config, this.sandboxId, opts.keepMemory, opts);
  }

  /** @deprecated E2B's former name of `pause`. */
  betaPause(opts: RequestOpts & { keepMemory?: boolean } = {}): Promise<boolean> {
    return this.pause(opts);
  }

  /** Replaces the sandbox's outbound rules with `network`; what it leaves out is cleared. */
  updateNetwork(network: SandboxNetworkUpdate, opts: RequestOpts = {}): Promise<void> {
    return updateSandboxNetwork(this.#config, this.sandboxId, network, opts);
  }

  /** Whether the sandbox answers: false once it is killed, paused or expired. */
  async isRunning(opts: RequestOpts = {}): Promise<boolean> {
    try {
      return await this.#envd.health({ requestTimeoutMs: opts.requestTimeoutMs, signal: opts.signal });
    } catch (err) {
      throw fromEnvdHttpError(err, 'other');
    }
  }

  /** Host under which a port of the sandbox is reached: `{port}-{sandboxId}.{sandboxDomain}`. */
  getHost(port: number): string {
    if (!isTcpPort(port)) throw new InvalidArgumentError(`port ${port} is not a TCP port`);
    return sandboxHost(port, this.sandboxId, this.sandboxDomain);
  }

  /**
   * URL to upload a file to with no headers (an HTML form, `curl -F`), signed
   * when the sandbox is secure. Without `path`, each uploaded part's filename
   * is its path.
   */
  async uploadUrl(path?: string, opts: SandboxUrlOpts = {}): Promise<string> {
    try {
      return await this.#envd.uploadUrl(path, { user: opts.user, expiresInSeconds: opts.useSignatureExpiration });
    } catch (err) {
      throw fromEnvdHttpError(err, 'file');
    }
  }

  /** URL to download a file with no headers (a link, `curl`), signed when the sandbox is secure. */
  async downloadUrl(path: string, opts: SandboxUrlOpts = {}): Promise<string> {
    try {
      return await this.#envd.downloadUrl(path, { user: opts.user, expiresInSeconds: opts.useSignatureExpiration });
    } catch (err) {
      throw fromEnvdHttpError(err, 'file');
    }
  }
}

function metricsRange(opts: { start?: Date; end?: Date }): MetricsRange {
  return { start: opts.start, end: opts.end };
}

/**
 * The sandbox of `debug` mode: the envd at the configured URL, assumed to be
 * as new as the SDK knows, since no control API reports its version.
 */
function debugSandbox(): SandboxConnectionInfo {
  return { sandboxId: 'debug_sandbox_id', envdVersion: ENVD_FEATURES.watchNetworkMounts };
}

function tooOld(envdVersion: string, what: string): TemplateError {
  return new TemplateError(
    `envd ${envdVersion} of '${what}' is older than ${MIN_ENVD_VERSION}, the oldest this SDK supports; rebuild the template with a newer envd`,
  );
}
