// Sandboxes as OCI containers run by runc on this host. Each sandbox has a
// directory under <dataDir>/sandboxes/<id>:
//
//   spec.json   what it is (template, limits, creation time, pool state)
//   config.json its OCI configuration; the directory is the bundle
//   disk.img    the sandbox's disk: ext4 of its diskSizeMB in a sparse file
//   disk/       where disk.img is mounted; holds the overlay's upper/ and work/
//   rootfs/     its overlay: template layers + host root below, upper on top
//   sock/       envd's sockets (envd.sock, tunnel.sock): made and bound by
//               this process, listened on by envd through descriptors that
//               runc passes in. No sandbox sees this directory, so the paths
//               the host connects to are never ones a sandbox could replace.
//   envd.log    envd's output
//   boot_id     this start's boot id, mounted over /proc/sys/kernel/random/boot_id
//   resolv.conf mounted over /etc/resolv.conf: the sandboxes' resolver
//
// Each sandbox has a network slot (sandbox-networking.ts) from its creation
// to its removal, kept while it is stopped; its state is under <dataDir>/network.
//
// runc keeps container state under <dataDir>/runc. Everything survives a
// restart of this process: containers run on, and list() finds them again.
import { createHash, randomUUID } from 'node:crypto';
import { access } from 'node:fs/promises';
import { chmodSync, chownSync, closeSync, constants, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import { envdCommand, envdSandboxDir, envdToolsScript } from '@paddock/envd';
import { CopyFailed, CopyWorkers } from './copy-worker.js';
import { checkPassable, installCopy, removeScratchCopies, sandboxPassable } from './host-files.js';
import { checkIdShift, DEFAULT_ID_SHIFT, shiftOwners } from './ids.js';
import { baseImage, importImage, pullImage } from './image-templates.js';
import { ImageStore } from './images/index.js';
import { cgroupDirs, detectCgroups, inCgroup, killCgroupProcesses, readUsage, removeCgroupDir, removeCgroupsDrained, setCpuWeight, swapAccounting, thawed, type CgroupLayout } from './cgroups.js';
import { envdAnswers, initEnvd, openTunnel, PooledEnvdLink, waitForEnvd, warmUpEnvd } from './envd-link.js';
import { CommandError, run } from './exec.js';
import { mountOverlay, mountPoints, removeTree, unmount } from './mounts.js';
import { listenUnix } from './host-socket.js';
import { envdOptions, HOST_INOTIFY_LIMITS, legacyCgroupsLauncher, SANDBOX_USER, startHookBinary, hardOpenFilesLimit, ociConfig, type ContainerCommand } from './oci-config.js';
import { onPath } from './spawn.js';
import { InitProcess, OCI_RUNTIMES, Runc, type OciRuntimeName, type RuncContainer } from './runc.js';
import { msSince, Phases, warningsOnly, type RuntimeLog } from './log.js';
import {
  RuntimeError,
  type CreateOptions,
  type EnvdEndpoint,
  type EnvdInit,
  type FilesCopy,
  type HostAdmin,
  type Limits,
  type NetworkRules,
  type Runtime,
  type RunStepOptions,
  type RuntimeSandbox,
  type SandboxStats,
  type StepCommand,
  type StepResult,
  type SandboxStatus,
  type TemplateConfig,
  type TemplateFromImageOptions,
  type TemplateInfo,
  type PooledTemplate,
  type TemplateWithFilesOptions,
  type WarmPool,
  type HealthCheck,
  type RuntimeHealth,
} from './runtime.js';
import { BASE_TEMPLATE_ID, DEFAULT_LIMITS, TemplateLayers, type TemplateImage } from './templates.js';
import { KeyedMutex, SANDBOX_ID, newSandboxId } from './util.js';
import { SandboxNetworking, splitRules, type RuntimeNetworkOptions } from './sandbox-networking.js';
import { MIN_DISK_MB, createDisk, diskPaths, diskUsage, loopDevicesUnder, mountDisk, type DiskPaths } from './disk.js';
import { SpareDisks } from './spare-disks.js';

export interface RuncRuntimeOptions {
  /** Where templates, sandboxes and runc's state live. */
  dataDir: string;
  /**
   * Where the runtime says what it did (sandboxes booted, claimed, stopped,
   * removed, with their times) and what went wrong in the background: a
   * pino logger or one of its shape. Default: warnings and errors as process
   * warnings, nothing else.
   */
  log?: RuntimeLog;
  /**
   * The image store: pulled and imported layers, unpacked. Default
   * `<dataDir>/layers`. Several runtimes may share one (layers never change
   * once unpacked); image garbage collection then needs all of them.
   */
  layersDir?: string;
  /**
   * Whether layers that no template and no sandbox of this runtime stands
   * on are removed (at start, and when a template goes or is made again).
   * Default: when the image store is the runtime's own (`layersDir` unset),
   * not when it is shared, since other runtimes' templates are unknown here.
   */
  collectLayers?: boolean;
  /** Where the base root filesystem built with mmdebstrap is kept (default `<dataDir>/cache`). */
  cacheDir?: string;
  /** The base template from this image reference instead of the Debian root filesystem built here. */
  baseImage?: string;
  /** Registries (`host:port`) reached over plain HTTP besides those on loopback. */
  insecureRegistries?: string[];
  /** Host id of a sandbox's uid and gid 0 (DEFAULT_ID_SHIFT); 65536 ids from there are the sandboxes'. */
  idShift?: number;
  /** Ready sandboxes kept per pooled template; 0 disables the pool. */
  warmPoolSize?: number;
  /**
   * Sandbox disks kept formatted and mounted for cold creates, of the size
   * the last create asked for (spare-disks.ts); 0 keeps none. Default 2.
   */
  spareDisks?: number;
  /** Templates that get a pool until setPooledTemplates() says otherwise (default: base). */
  warmPoolTemplates?: string[];
  /** Most processes a sandbox may have at once. */
  pidsLimit?: number;
  /**
   * The OCI runtime that runs the containers: `crun` or `runc`. Both take
   * the same configuration; crun starts a container in about a third of
   * runc's CPU time. Each keeps its state in a directory of its own
   * (`<dataDir>/runc`, `<dataDir>/crun`); a data directory whose containers
   * the other one runs is refused until they are stopped. Unset: the one
   * whose containers the data directory holds, else defaultOciRuntime().
   */
  ociRuntime?: OciRuntimeName;
  /** The OCI runtime's program (default: `ociRuntime` on PATH). */
  runcBinary?: string;
  /** envd's self-contained directory (default: @paddock/envd's build), copied to where sandboxes mount it from. */
  envdSandboxDir?: string;
  /** How long envd may take to answer after the container started. */
  readyTimeoutMs?: number;
  /**
   * Each sandbox's network: a namespace of its own routed to the internet
   * under its egress rules (the default), or false for loopback only.
   */
  network?: RuntimeNetworkOptions | false;
}

interface SandboxSpec {
  id: string;
  templateId: string;
  limits: Limits;
  createdAt: string;
  /** A warm pool sandbox nobody has claimed yet. */
  pooled: boolean;
  /**
   * A pooled sandbox that finished booting and its template's preparation:
   * only such a one is pooled again after a restart (one that was cut off
   * mid-way may lack what the preparation started).
   */
  poolReady?: boolean;
  /** Set before removal starts, so that a crash mid-way finishes it on the next start. */
  destroying?: boolean;
  /**
   * Host id of the sandbox's root: its files on the disk are owned from
   * there. Absent on a sandbox made before sandboxes had user namespaces;
   * its files are moved into the range at its next start.
   */
  idShift?: number;
  /**
   * The layers under its upper, top-most first, as they were at its
   * creation: a template made again since (`rebuildBase`) does not change
   * what a kept upper lies on.
   */
  lowers?: string[];
  /** Its egress rules as its creator (or the last update) gave them. */
  network?: NetworkRules;
  /** A build step's container (runStep): no sandbox of anyone's, and of no use after a restart. */
  step?: boolean;
  /** A step container that joins the slot a build holds under this id (holdStepNetwork) instead of taking one. */
  netOf?: string;
  /**
   * No container: a network slot held for a build's step containers
   * (holdStepNetwork), with `step` set so that a restart releases it as it
   * removes them.
   */
  holdsNetwork?: boolean;
}

/**
 * A pooled sandbox has the default rules (the internet, no lists): most
 * creates ask for those, and their claim then costs no nftables
 * transaction (setRules of the rules a slot has is a no-op). Nothing of a
 * caller's runs in it before the claim.
 */
const POOLED_RULES: NetworkRules = {};

const MAX_SOCKET_PATH = 107;
/**
 * A claim from the pool is followed at once by its owner's first commands.
 * Booting the sandbox that replaces it (mount, runc, envd's start) competes
 * with them and, on a small host, slows them. So the refill starts a moment
 * after the claim.
 */
const POOL_REFILL_DELAY_MS = 250;
/** The wait before a pooled template whose boot failed is tried again; it doubles with each failure in a row, up to the most. */
const POOL_RETRY_MS = 5000;
const POOL_RETRY_MAX_MS = 5 * 60_000;
const DEFAULT_SPARE_DISKS = 2;
/** How often a network slot refill that waits for the creates under way looks again. */
const NETWORK_REFILL_DELAY_MS = 50;
/**
 * CPU weights (cgroup v2 units; 100 is everyone's default), which count
 * only while the CPUs are contended. All sandboxes sit under one cgroup,
 * `/paddock`, weighted below the server and the rest of the host: sandboxes
 * that saturate every core leave the control plane most of a core when it
 * needs one. Within it, a sandbox boots at the default weight and runs at
 * an eighth of it, so that a create does not wait on the sandboxes that
 * keep the CPUs busy: with one sandbox spinning on both cores of this
 * 2-core host, a cold create took about twice as long at equal weights and
 * about 1.4 times with these (the bench's "during a CPU-saturating
 * sandbox" row).
 */
const SANDBOXES_CPU_WEIGHT = 25;
const RUNNING_CPU_WEIGHT = 12;
/** How often the inits of running sandboxes are looked at: one read of /proc each. */
const INIT_WATCH_MS = 1000;

/** The PATH of a process envd starts, under the image's own (envd's DEFAULT_PATH). */
const COMMAND_DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** `NAME=value` entries as a map, a later one of a name winning (as envd takes its --env). */
const envMap = (env: readonly string[]): Record<string, string> => Object.fromEntries(env.filter((e) => e.indexOf('=') > 0).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

/** The cgroup (in every hierarchy) under which the sandboxes of data directory `dataDir` run: `/paddock/<hash of the directory>`. */
export function cgroupParentOf(dataDir: string): string {
  return `/paddock/${createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 12)}`;
}

export class RuncRuntime implements Runtime, HostAdmin, WarmPool, RuntimeHealth {
  private readonly dataDir: string;
  private readonly sandboxesDir: string;
  private readonly collectsLayers: boolean;
  private readonly runc: Runc;
  /** The OCI runtime that runs this runtime's containers. */
  readonly ociRuntime: OciRuntimeName;
  /** The OCI runtime's state directory (`runc --root`). */
  private readonly ociState: string;
  private readonly templates: TemplateLayers;
  private readonly cgroups: CgroupLayout;
  private readonly swap: boolean;
  /** Each instance's sandboxes live under their own cgroup parent (`/paddock/<hash of the data dir>`). */
  readonly cgroupParent: string;
  private readonly mutex = new KeyedMutex();
  private readonly lastCpu = new Map<string, { ns: number; at: number }>();
  /** The init of each sandbox whose container runs (or is paused), watched for exits. */
  private readonly inits = new Map<string, InitProcess>();
  private readonly exitListeners = new Set<(id: string, oomKilled: boolean) => void>();
  private initWatch: NodeJS.Timeout | undefined;
  private readonly pool = new Map<string, string[]>();
  private poolTemplates: PooledTemplate[];
  private poolFilling: Promise<void> | undefined;
  private refillTimer: NodeJS.Timeout | undefined;
  /** Pooled templates whose last boots for the pool failed: how long the last wait was, and until when this one lasts. */
  private poolFailures = new Map<string, { delayMs: number; until: number }>();
  private retryTimer: NodeJS.Timeout | undefined;
  /** Open connections to pooled sandboxes' envd, by sandbox id (PooledEnvdLink). */
  private poolLinks = new Map<string, PooledEnvdLink>();
  /** Counts setPooledTemplates() calls. */
  private poolGeneration = 0;
  /** Sandboxes booting for a caller of create() right now; the pool's refill waits for them. */
  private callerBoots = 0;
  /** Set by removeEverything(): creates are refused from then on. */
  private removing = false;
  private readonly callerBootsEnded: (() => void)[] = [];
  private closed = false;
  private prepared = false;
  /** Host id of every sandbox's root (the start of the sandboxes' id range). */
  private readonly idShift: number;
  private readonly images: ImageStore;
  /** The copies that sandboxes use (prepare() installs them): envd's directory and the start hook. */
  private paddockDir: string | undefined;
  /** Where COPY steps run (templateWithFiles), made at the first. */
  private copyWorkers: CopyWorkers | undefined;
  private startHook: string | undefined;
  /** Sandbox networks; undefined when sandboxes have loopback only. */
  private readonly networking: SandboxNetworking | undefined;
  /** Held step networks (holdStepNetwork) a step container is in now. */
  private readonly stepNetworksInUse = new Set<string>();
  private networkReady = false;
  private readonly log: RuntimeLog;
  private readonly spares: SpareDisks;

  constructor(private readonly opts: RuncRuntimeOptions) {
    this.log = opts.log ?? warningsOnly;
    this.dataDir = resolve(opts.dataDir);
    this.sandboxesDir = join(this.dataDir, 'sandboxes');
    this.ociRuntime = opts.ociRuntime ?? ociRuntimeInUse(this.dataDir) ?? defaultOciRuntime();
    if (!OCI_RUNTIMES.includes(this.ociRuntime)) throw new RuntimeError('invalid', `OCI runtime '${String(this.ociRuntime)}' is not one of ${OCI_RUNTIMES.join(', ')}`);
    this.ociState = join(this.dataDir, this.ociRuntime);
    this.runc = ociRuntimeCommand(this.ociState, this.ociRuntime, opts.runcBinary);
    this.idShift = checkIdShift(opts.idShift ?? DEFAULT_ID_SHIFT);
    this.poolTemplates = (opts.warmPoolTemplates ?? [BASE_TEMPLATE_ID]).map((templateId) => ({ templateId }));
    const ownLayers = join(this.dataDir, 'layers');
    this.images = new ImageStore({ dir: opts.layersDir ?? ownLayers, idShift: this.idShift, insecureRegistries: opts.insecureRegistries });
    this.collectsLayers = opts.collectLayers ?? resolve(opts.layersDir ?? ownLayers) === ownLayers;
    this.templates = new TemplateLayers(join(this.dataDir, 'templates'), this.images);
    this.spares = new SpareDisks({
      dir: join(this.dataDir, 'spare-disks'),
      count: opts.spareDisks ?? DEFAULT_SPARE_DISKS,
      rootId: this.idShift,
      // Made while no create boots, and a moment after one: the new sandbox's first commands come then.
      idle: () => this.callerBoots === 0,
      refillDelayMs: POOL_REFILL_DELAY_MS,
      log: this.log,
    });
    this.cgroups = detectCgroups();
    this.swap = swapAccounting(this.cgroups);
    const dataHash = createHash('sha256').update(this.dataDir).digest('hex');
    this.cgroupParent = cgroupParentOf(this.dataDir);
    // Named after the data directory, so that runtimes of other data directories on this host never take each other's.
    // A name given before (and recorded) stays, so that an uninstall without the configuration finds it.
    if (opts.network !== false) {
      const stateDir = join(this.dataDir, 'network');
      // Its slot pool refills while no create boots (a refill beside a boot's runc took ~50 ms from it on
      // 2 cores), soon after: a slot made on the path of a create costs less than that, but still ~20 ms.
      this.networking = new SandboxNetworking(stateDir, recordedNetworkName(stateDir) ?? `p${dataHash.slice(0, 8)}`, opts.network ?? {}, this.log, {
        idle: () => this.callerBoots === 0,
        delayMs: NETWORK_REFILL_DELAY_MS,
      });
    }
    const probe = join(this.sandboxesDir, 'x'.repeat(20), 'sock', 'tunnel.sock');
    if (probe.length > MAX_SOCKET_PATH) {
      throw new RuntimeError('invalid', `data directory '${this.dataDir}' is too long: sandbox sockets would exceed ${MAX_SOCKET_PATH} bytes`);
    }
  }

  // ---------------------------------------------------------------- paths

  private dir(id: string): string {
    if (!SANDBOX_ID.test(id)) throw new RuntimeError('not_found', `sandbox '${id}' does not exist`);
    return join(this.sandboxesDir, id);
  }

  private cgroupPath(id: string): string {
    return `${this.cgroupParent}/${id}`;
  }

  private readSpec(id: string): SandboxSpec | undefined {
    try {
      return JSON.parse(readFileSync(join(this.dir(id), 'spec.json'), 'utf8')) as SandboxSpec;
    } catch {
      return undefined;
    }
  }

  private writeSpec(spec: SandboxSpec): void {
    const file = join(this.dir(spec.id), 'spec.json');
    writeFileSync(`${file}.tmp`, JSON.stringify(spec, null, 2));
    renameSync(`${file}.tmp`, file);
  }

  private requireSpec(id: string): SandboxSpec {
    const spec = this.readSpec(id);
    if (!spec || spec.destroying) throw new RuntimeError('not_found', `sandbox '${id}' does not exist`);
    return spec;
  }

  private socket(id: string, name: 'envd.sock' | 'tunnel.sock'): string {
    return join(this.dir(id), 'sock', name);
  }

  private disk(id: string): DiskPaths {
    return diskPaths(this.dir(id));
  }

  /**
   * Mounts the sandbox's disk. A sandbox made before sandboxes had disks
   * keeps its upper directory beside them (`upper/`, `work/`): its files are
   * moved onto a new disk of its size first, and the old directories go only
   * once they are all there.
   */
  private async ensureDisk(spec: SandboxSpec): Promise<void> {
    const dir = this.dir(spec.id);
    const disk = this.disk(spec.id);
    const oldUpper = join(dir, 'upper');
    if (!existsSync(disk.image)) {
      if (!existsSync(oldUpper)) throw new RuntimeError('internal', `sandbox '${spec.id}' has no disk`);
      await createDisk(disk, spec.limits.diskSizeMB);
      await mountDisk(disk);
      await run('cp', ['-a', `${oldUpper}/.`, disk.upper], { timeoutMs: 600_000 });
      await removeTree(oldUpper);
      await removeTree(join(dir, 'work'));
      return;
    }
    await mountDisk(disk);
  }

  // ---------------------------------------------------------------- setup

  /**
   * Makes the base template (the first time on a host: builds or pulls its
   * image) and, the first time, takes over what a previous run left. runc is
   * checked before anything is done.
   */
  async prepare(onProgress?: (message: string) => void): Promise<void> {
    const first = !this.prepared;
    if (first) await this.checkRunc();
    mkdirSync(this.sandboxesDir, { recursive: true });
    if (first) this.refuseOtherOciRuntime();
    mkdirSync(this.ociState, { recursive: true });
    // runc sets a sandbox up as the sandbox's root: it must pass down to each sandbox's directory.
    checkPassable(dirname(this.dataDir), this.idShift, this.idShift, 'the data directory');
    sandboxPassable(this.dataDir, this.idShift);
    sandboxPassable(this.sandboxesDir, this.idShift);
    await this.images.open();
    const files = join(this.dataDir, 'files');
    removeScratchCopies(files);
    this.paddockDir = installCopy(this.opts.envdSandboxDir ?? envdSandboxDir, files);
    this.startHook = installCopy(startHookBinary(), files);
    raiseHostLimits();
    if (this.networking && !this.networkReady) {
      // Before recover(): it releases the slots of sandboxes it removes.
      await this.networking.prepare((id) => (SANDBOX_ID.test(id) ? this.readSpec(id)?.network : undefined));
      this.networkReady = true;
    }
    if (first) {
      await this.recover();
      await this.spares.removeStale();
      await this.dropHostView();
      await this.dropStagedTemplates();
    }
    await this.ensureBase(onProgress);
    if (first) {
      await this.collectLayers();
      await this.shiftOldLayers();
      setCpuWeight(this.cgroups, dirname(this.cgroupParent), SANDBOXES_CPU_WEIGHT);
      this.watchInits();
      this.prepared = true;
      this.fillPool();
      this.spares.start(this.templates.get(BASE_TEMPLATE_ID)?.limits.diskSizeMB ?? DEFAULT_LIMITS.diskSizeMB);
    }
  }

  /** The base template's image: made the first time, and by rebuildBase(). */
  private async ensureBase(onProgress?: (message: string) => void): Promise<void> {
    if (this.templates.baseReady()) return;
    this.templates.setRoot(BASE_TEMPLATE_ID, await this.makeBaseImage(false, onProgress));
  }

  /**
   * Makes the base template's image again (`paddock template rebuild base`):
   * the Debian root filesystem built anew, or the configured image pulled
   * again. Sandboxes running on the old one keep it.
   */
  async rebuildBase(onProgress?: (message: string) => void): Promise<TemplateInfo> {
    this.ensurePrepared();
    const made = this.templates.setRoot(BASE_TEMPLATE_ID, await this.makeBaseImage(true, onProgress));
    await this.collectLayers();
    return made;
  }

  /**
   * Removes the image store's layers that nothing here stands on: not a
   * template's image, nor a layer a snapshot or a sandbox pinned beneath its
   * own. Only when the store is this runtime's (`collectLayers`); a failure
   * is a warning, as nothing depends on the space coming back at once.
   */
  private async collectLayers(): Promise<void> {
    if (!this.collectsLayers) return;
    try {
      const inUse = new Set<string>();
      // A layer's directory is <store>/sha256/<hex>/fs.
      const layers = join(this.images.dir, 'sha256');
      const pinned = (dirs: string[] | undefined) => {
        for (const dir of dirs ?? []) {
          if (dirname(dirname(dir)) === layers && basename(dir) === 'fs') inUse.add(`sha256:${basename(dirname(dir))}`);
        }
      };
      for (const { id } of this.templates.list()) {
        try {
          for (const d of this.templates.image(id).diffIds) inUse.add(d);
          pinned(this.templates.layers(id));
        } catch {
          // A template whose chain is broken stands on nothing that can be started.
        }
      }
      for (const id of readdirSync(this.sandboxesDir)) pinned(this.readSpec(id)?.lowers);
      await this.images.gc(inUse);
    } catch (err) {
      this.log.warn({ err }, 'unused image layers could not be removed');
    }
  }

  private makeBaseImage(force: boolean, onProgress?: (message: string) => void): Promise<TemplateImage> {
    return baseImage(this.images, { cacheDir: this.opts.cacheDir ?? join(this.dataDir, 'cache'), reference: this.opts.baseImage, force, onProgress });
  }

  /** Makes a template from an image in a registry. */
  templateFromImage(templateId: string, reference: string, opts: TemplateFromImageOptions = {}): Promise<TemplateInfo> {
    return this.rootTemplate(templateId, opts, () => pullImage(this.images, reference, { onProgress: opts.onProgress, auth: opts.auth }));
  }

  templateFromArchive(templateId: string, archivePath: string, opts: Omit<TemplateFromImageOptions, 'auth'> & { reference?: string } = {}): Promise<TemplateInfo> {
    return this.rootTemplate(templateId, opts, () => importImage(this.images, archivePath, { onProgress: opts.onProgress, reference: opts.reference }));
  }

  /** A root template on the image `bring` puts in the store. */
  private async rootTemplate(templateId: string, opts: Pick<TemplateFromImageOptions, 'replace' | 'limits'>, bring: () => Promise<TemplateImage>): Promise<TemplateInfo> {
    this.ensurePrepared();
    // Before the image comes, which may take minutes: the id must be usable, and free unless it is to be made again.
    if (!opts.replace || !this.templates.get(templateId)) this.templates.checkNewId(templateId);
    const image = await bring();
    const limits = opts.replace && !opts.limits ? undefined : checkLimits({ ...DEFAULT_LIMITS, ...definedOnly(opts.limits) });
    const made = this.templates.setRoot(templateId, image, limits);
    // The image it had before may be no one's now.
    if (opts.replace) await this.collectLayers();
    return made;
  }

  /**
   * Sandboxes once stood on a read-only view of the host's own root
   * filesystem, mounted at `<dataDir>/hostview`. recover() has stopped
   * the sandboxes that still used it; the view goes.
   */
  private async dropHostView(): Promise<void> {
    await unmount(join(this.dataDir, 'hostview'));
    await unmount(join(this.dataDir, 'hostview-empty'));
    for (const d of ['hostview', 'hostview-empty']) rmSync(join(this.dataDir, d), { recursive: true, force: true });
  }

  /** Templates a previous run was making when it stopped: never committed, so no one's; an image mounted in one is unmounted first. */
  private async dropStagedTemplates(): Promise<void> {
    for (const dir of this.templates.stagingDirs()) {
      for (const mp of mountPoints()) if (mp.startsWith(dir + '/')) await unmount(mp);
      await removeTree(dir);
    }
  }

  /** Snapshot layers made before user namespaces have their owners moved into the sandboxes' range. */
  private async shiftOldLayers(): Promise<void> {
    const done = new Set<string>();
    for (const { id, dir } of this.templates.unshiftedLayers()) {
      if (existsSync(dir)) await shiftOwners(dir, this.idShift);
      done.add(id);
    }
    for (const id of done) this.templates.markShifted(id, this.idShift);
  }

  private async checkRunc(): Promise<void> {
    const name = this.ociRuntime;
    try {
      await this.runc.version();
    } catch (err) {
      const why = err instanceof CommandError ? err.stderr.trim() : String(err);
      throw new RuntimeError('unavailable', `${name} does not run: ${why}. Sandboxes are ${name} containers: install ${name} (on Debian or Ubuntu: apt-get install -y ${name}), or set the runtime's runcBinary to where it is`, { cause: err });
    }
  }

  /**
   * Containers of this data directory that the other OCI runtime runs would
   * be invisible to this one (each reads only its own state): refused, with
   * what to do, rather than left running unseen.
   */
  private refuseOtherOciRuntime(): void {
    for (const other of OCI_RUNTIMES) {
      if (other === this.ociRuntime) continue;
      const dir = join(this.dataDir, other);
      const left = existsSync(dir) ? readdirSync(dir) : [];
      if (left.length) {
        throw new RuntimeError('unavailable', `the data directory '${this.dataDir}' has ${left.length} container(s) of ${other} (${join(dir, left[0]!)}), and the runtime is set to ${this.ociRuntime}: stop or kill those sandboxes with the runtime on ${other} first, or remove everything (paddock uninstall)`);
      }
    }
  }

  /** Finds what a previous run left: finishes removals, drops strays, re-pools pool sandboxes. */
  private async recover(): Promise<void> {
    const containers = new Map((await this.runc.list()).map((c) => [c.id, c]));
    const ids = existsSync(this.sandboxesDir) ? readdirSync(this.sandboxesDir) : [];
    for (const [id, c] of containers) {
      if (!ids.includes(id) || resolve(c.bundle) !== join(this.sandboxesDir, id)) await this.runc.deleteForce(id);
    }
    for (const id of ids) {
      const spec = this.readSpec(id);
      if (!spec || spec.destroying || spec.step) {
        await this.removeSandbox(id);
        continue;
      }
      const container = containers.get(id);
      const status = this.statusOf(container);
      if (container && status !== 'stopped') this.inits.set(id, new InitProcess(container.pid));
      // Its namespace is gone (someone removed it): it runs cut off, so it is stopped and gets a new one at its next start.
      const netLost = this.networking !== undefined && !this.networking.get(id);
      if (spec.pooled) {
        if (status === 'running' && spec.poolReady && spec.idShift === this.idShift && !netLost) this.poolFor(spec.templateId).push(id);
        else await this.removeSandbox(id);
        continue;
      }
      // One made before user namespaces runs on the host's own root filesystem: it is stopped, keeping its files.
      if (status !== 'stopped' && spec.idShift === undefined) {
        await this.stopContainer(id);
        continue;
      }
      // A sandbox started by an older runtime has envd's sockets in a
      // directory it can write (run/), which this one never connects to:
      // it is stopped, keeping its files, and starts again with sockets in sock/.
      const oldSockets = status !== 'stopped' && !existsSync(join(this.dir(id), 'sock'));
      if (status === 'stopped' || oldSockets || netLost) await this.stopContainer(id);
    }
    await this.removeStrayCgroups();
  }

  /**
   * Removes the cgroups of sandboxes that no longer exist, killing what
   * still runs in them: what a removal that could not drain them, or a
   * crash, left (a container whose OCI runtime was killed while it made it
   * runs on unknown to that runtime, see endStrayProcesses). One that cannot
   * be removed stays, and shows in leftovers().
   */
  private async removeStrayCgroups(): Promise<void> {
    const strays = new Set<string>();
    for (const base of this.cgroups.dirs) {
      const parent = join(base, this.cgroupParent);
      if (!existsSync(parent)) continue;
      for (const entry of readdirSync(parent, { withFileTypes: true })) {
        // A cgroup directory also holds the controller's files; only subdirectories are sandboxes.
        if (!SANDBOX_ID.test(entry.name) || !lstatSync(join(parent, entry.name)).isDirectory()) continue;
        const spec = this.readSpec(entry.name);
        if (!spec || spec.destroying) strays.add(entry.name);
      }
    }
    for (const id of strays) {
      await this.endStrayProcesses(id);
      await removeCgroupsDrained(this.cgroups, this.cgroupPath(id));
    }
  }

  /**
   * Kills the processes left in sandbox `id`'s cgroups once its container
   * was deleted (or was never known): an OCI runtime killed while it
   * created the container (a Ctrl-C reaches it with the server's process
   * group) may have started the container's init before it wrote the
   * state that `delete` looks for, and that init, envd, would run on.
   */
  private async endStrayProcesses(id: string): Promise<void> {
    const killed = await killCgroupProcesses(this.cgroups, this.cgroupPath(id));
    if (killed) this.log.warn({ sandboxID: id, killed }, `killed ${killed} process(es) of sandbox ${id} that its OCI runtime did not know of`);
  }

  private statusOf(c: RuncContainer | undefined): SandboxStatus {
    switch (c?.status) {
      case 'running':
      case 'created':
      case 'creating':
        return 'running';
      case 'paused':
      case 'pausing':
        return 'paused';
      default:
        return 'stopped';
    }
  }

  // ---------------------------------------------------------------- lifecycle

  private limitsFor(templateId: string, requested?: Partial<Limits>): Limits {
    const template = this.templates.get(templateId);
    if (!template) throw new RuntimeError('not_found', `template '${templateId}' does not exist`);
    return checkLimits({ ...template.limits, ...definedOnly(requested) });
  }

  async create(opts: CreateOptions): Promise<RuntimeSandbox> {
    this.ensurePrepared();
    if (this.removing) throw new RuntimeError('unavailable', 'the runtime is removing all its sandboxes and takes no new ones');
    const limits = this.limitsFor(opts.templateId, opts.limits);
    const template = this.templates.get(opts.templateId)!;
    const network = opts.network ?? {};
    // Bad rules are refused before anything is made.
    splitRules(network);
    if (!opts.cold && sameLimits(limits, template.limits)) {
      const claimed = await this.claimFromPool(opts.templateId, network, opts.init);
      if (claimed) return claimed;
    }
    const spec = await this.bootForCaller(opts.templateId, limits, network, opts.init);
    return this.info(spec, 'running');
  }

  /**
   * A boot someone is waiting for. While any runs, the pool does not start
   * refilling: in a burst of creates that emptied the pool, each refill is a
   * boot for a later caller that takes the two cores from the callers waiting
   * now (and a sandbox booted for the pool meanwhile does not serve them:
   * they are booting their own). The pool refills once the burst is over.
   */
  private async bootForCaller(templateId: string, limits: Limits, network: NetworkRules, init?: EnvdInit): Promise<SandboxSpec> {
    this.callerBoots++;
    try {
      return await this.boot(templateId, limits, network, init);
    } finally {
      if (--this.callerBoots === 0) {
        for (const wake of this.callerBootsEnded.splice(0)) wake();
        if (this.poolShort()) this.refillSoon();
      }
    }
  }

  /** Creates, starts and (when `init` is given) initialises a sandbox; 'pooled' boots one for the warm pool. */
  private async boot(templateId: string, limits: Limits, network: NetworkRules | 'pooled', init?: EnvdInit): Promise<SandboxSpec> {
    const id = newSandboxId();
    const pooled = network === 'pooled';
    const spec: SandboxSpec = {
      id,
      templateId,
      limits,
      createdAt: new Date().toISOString(),
      pooled,
      idShift: this.idShift,
      lowers: this.templates.layers(templateId),
      network: pooled ? POOLED_RULES : network,
    };
    const phases = new Phases();
    return this.mutex.run(id, async () => {
      phases.end('queued');
      try {
        await this.makeDisk(spec, phases);
        await this.startContainer(spec, init, phases);
        // A pooled sandbox's envd runs its first commands before anyone
        // waits for them (warmUpEnvd says why).
        let warmUpCommands: number | undefined;
        if (pooled) {
          warmUpCommands = await warmUpEnvd(this.socket(id, 'envd.sock'));
          await this.poolTemplates.find((t) => t.templateId === templateId)?.prepare?.(id);
          await this.keepPoolLink(id);
          spec.poolReady = true;
          this.writeSpec(spec);
          phases.end('warmup');
        }
        this.log.debug({ sandboxID: id, phases: phases.ms }, 'sandbox boot phases (ms)');
        this.log.info({ sandboxID: id, templateID: templateId, pooled, ms: phases.total(), ...(pooled ? { warmUpCommands } : {}) }, pooled ? 'sandbox booted for the warm pool' : 'sandbox booted');
        return spec;
      } catch (err) {
        this.log.warn({ sandboxID: id, templateID: templateId, pooled, err }, 'sandbox could not boot');
        await this.removeSandbox(id).catch(() => undefined);
        throw err instanceof RuntimeError ? err : new RuntimeError('unavailable', `sandbox could not start: ${(err as Error).message}`, { cause: err });
      }
    });
  }

  /** A new sandbox's disk, with its upper directory made, and its spec written. */
  private async makeDisk(spec: SandboxSpec, phases: Phases): Promise<void> {
    const { id, limits, pooled } = spec;
    const dir = this.dir(id);
    const disk = this.disk(id);
    // A caller's sandbox takes a disk made ahead; the warm pool's boots,
    // which nobody waits for, make their own and leave the spares to them.
    if (!pooled && this.spares.take(limits.diskSizeMB, dir)) {
      phases.end('spareDisk');
    } else {
      // startContainer() makes it passable to the sandbox's root.
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      mkdirSync(join(dir, 'rootfs'), { mode: 0o700 });
      await createDisk(disk, limits.diskSizeMB);
      phases.end('mkfs');
      await mountDisk(disk);
      phases.end('diskMount');
    }
    // The overlay's top: its root directory is the sandbox's `/`, owned by the sandbox's root.
    const root = this.idShift;
    chownSync(disk.upper, root, root);
    chmodSync(disk.upper, 0o755);
    // The sandbox's name, in its own layer (no sandbox process runs yet).
    mkdirSync(join(disk.upper, 'etc'), { mode: 0o755 });
    chownSync(join(disk.upper, 'etc'), root, root);
    for (const [name, text] of [
      ['hostname', `${id}\n`],
      ['hosts', `127.0.0.1\tlocalhost\n127.0.1.1\t${id}\n::1\tlocalhost ip6-localhost ip6-loopback\n`],
    ] as const) {
      writeFileSync(join(disk.upper, 'etc', name), text, { mode: 0o644 });
      chownSync(join(disk.upper, 'etc', name), root, root);
    }
    this.writeSpec(spec);
    phases.end('upper');
  }

  /**
   * Mounts a sandbox's root filesystem, gives it its network slot and
   * writes its OCI configuration: envd as its process, or `command` (a
   * build step's, which `commandFor` describes once the root is mounted).
   */
  private async prepareContainer(spec: SandboxSpec, phases: Phases, commandFor?: (rootfs: string) => Promise<ContainerCommand>): Promise<void> {
    const dir = this.dir(spec.id);
    // A sandbox made before lowers were recorded stands on its template as it is now.
    const lowers = spec.lowers ?? this.templates.layers(spec.templateId);
    const disk = this.disk(spec.id);
    await this.ensureDisk(spec);
    phases.end('diskMount');
    if (spec.idShift === undefined) {
      // Made before user namespaces: its files become its own root's and users' (ids in the range).
      // Nothing of the sandbox runs now, so nothing changes the tree while it is walked (without following links).
      await shiftOwners(disk.upper, this.idShift);
      spec = { ...spec, idShift: this.idShift };
      this.writeSpec(spec);
    }
    sandboxPassable(dir, this.idShift);
    await mountOverlay(join(dir, 'rootfs'), lowers, disk.upper, disk.work, dir);
    phases.end('overlay');
    // Each start is a new boot to the programs inside (E2B's SDK checks that a resume from a stop reboots).
    const bootIdFile = join(dir, 'boot_id');
    rmSync(bootIdFile, { force: true });
    writeFileSync(bootIdFile, `${randomUUID()}\n`, { mode: 0o444 });
    let net: { netnsPath: string; resolvConf: string } | undefined;
    if (this.networking) {
      // A sandbox keeps its slot while stopped; one whose slot was lost gets a new one with its rules.
      // A build's step container joins the slot its build holds.
      const slot = spec.netOf !== undefined ? this.heldStepNetwork(spec.netOf) : (this.networking.get(spec.id) ?? (await this.networking.acquire(spec.id, spec.network ?? {})));
      const resolvConf = join(dir, 'resolv.conf');
      rmSync(resolvConf, { force: true });
      // The sandbox's root may change it, as on any computer (its rules bind whatever server it names).
      writeFileSync(resolvConf, this.networking.resolvConf(), { mode: 0o644 });
      chownSync(resolvConf, this.idShift, this.idShift);
      net = { netnsPath: slot.netnsPath, resolvConf };
      phases.end('network');
    }
    // The step's command is described from the image's files before anything of the container runs.
    const command = commandFor ? await commandFor(join(dir, 'rootfs')) : undefined;
    const config = ociConfig({
      id: spec.id,
      rootfs: join(dir, 'rootfs'),
      bootIdFile,
      startHook: this.startHook!,
      idShift: this.idShift,
      limits: spec.limits,
      pidsLimit: this.opts.pidsLimit ?? 1024,
      swapAccounting: this.swap,
      paddockDir: this.paddockDir!,
      envdCommand: envdCommand({ args: envdOptions(this.templates.image(spec.templateId)) }),
      cgroupsPath: this.cgroupPath(spec.id),
      maxOpenFiles: hardOpenFilesLimit(),
      ...net,
      ...(command ? { command } : {}),
    });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
    phases.end('config');
  }

  /** Mounts the root filesystem and runs the container; resolves when envd answers. */
  private async startContainer(spec: SandboxSpec, init?: EnvdInit, phases = new Phases()): Promise<void> {
    const dir = this.dir(spec.id);
    await this.prepareContainer(spec, phases);
    // envd.sock then tunnel.sock: the descriptors ociConfig tells envd (ENVD_FD, TUNNEL_FD).
    mkdirSync(join(dir, 'sock'), { recursive: true, mode: 0o700 });
    const fds: number[] = [];
    let container: InitProcess;
    try {
      for (const name of ['envd.sock', 'tunnel.sock'] as const) {
        const path = this.socket(spec.id, name);
        rmSync(path, { force: true });
        fds.push(listenUnix(path));
      }
      container = await this.runc.runDetached(spec.id, dir, join(dir, 'envd.log'), fds);
    } finally {
      for (const fd of fds) closeSync(fd);
    }
    phases.end('runc');
    await waitForEnvd(this.socket(spec.id, 'envd.sock'), this.opts.readyTimeoutMs ?? 15_000, () =>
      container.running() ? undefined : `the container exited; envd log: ${tail(join(dir, 'envd.log'))}`,
    );
    phases.end('envd');
    if (init) {
      await initEnvd(this.socket(spec.id, 'envd.sock'), init);
      phases.end('init');
    }
    setCpuWeight(this.cgroups, this.cgroupPath(spec.id), RUNNING_CPU_WEIGHT);
    this.inits.set(spec.id, container);
  }

  async start(id: string, init?: EnvdInit): Promise<void> {
    await this.mutex.run(id, async () => {
      const spec = this.requireSpec(id);
      const status = this.statusOf(await this.runc.state(id));
      if (status !== 'stopped') throw new RuntimeError('conflict', `sandbox '${id}' is ${status}, not stopped`);
      try {
        // runc keeps a stopped container's state; a new one needs its name.
        // (A new sandbox's name is new: no runc process is spent on it there.)
        const phases = new Phases();
        await this.runc.deleteForce(id);
        phases.end('runcDelete');
        await this.startContainer(spec, init, phases);
        this.log.debug({ sandboxID: id, phases: phases.ms }, 'sandbox start phases (ms)');
        this.log.info({ sandboxID: id, ms: phases.total() }, 'sandbox started');
      } catch (err) {
        this.log.warn({ sandboxID: id, err }, 'sandbox could not start');
        await this.stopContainer(id).catch(() => undefined);
        throw err;
      }
    });
  }

  async pause(id: string): Promise<void> {
    await this.mutex.run(id, async () => {
      this.requireSpec(id);
      const status = this.statusOf(await this.runc.state(id));
      if (status !== 'running') throw new RuntimeError('conflict', `sandbox '${id}' is ${status}, not running`);
      const started = performance.now();
      await this.runc.pause(id);
      this.log.info({ sandboxID: id, ms: msSince(started) }, 'sandbox frozen');
    });
  }

  async resume(id: string): Promise<void> {
    await this.mutex.run(id, async () => {
      this.requireSpec(id);
      const status = this.statusOf(await this.runc.state(id));
      if (status !== 'paused') throw new RuntimeError('conflict', `sandbox '${id}' is ${status}, not paused`);
      const started = performance.now();
      await this.runc.resume(id);
      this.log.info({ sandboxID: id, ms: msSince(started) }, 'sandbox thawed');
    });
  }

  async stop(id: string): Promise<void> {
    await this.mutex.run(id, async () => {
      this.requireSpec(id);
      const started = performance.now();
      await this.stopContainer(id, this.runningInit(id));
      this.log.info({ sandboxID: id, ms: msSince(started) }, 'sandbox stopped');
    });
  }

  /** Ends the container and unmounts its root and disk; the disk's file stays. */
  private async stopContainer(id: string, runningInit?: number): Promise<void> {
    this.inits.delete(id);
    await this.runc.deleteForce(id, runningInit);
    await this.endStrayProcesses(id);
    await unmount(join(this.dir(id), 'rootfs'));
    // A stopped sandbox holds no loop device; start() mounts its disk again.
    await unmount(this.disk(id).mountPoint);
    this.lastCpu.delete(id);
  }

  onExit(listener: (id: string, oomKilled: boolean) => void): () => void {
    this.exitListeners.add(listener);
    return () => this.exitListeners.delete(listener);
  }

  /**
   * Looks at the init of every running sandbox each INIT_WATCH_MS. One that
   * exited by itself leaves a container that runc calls stopped, a mounted
   * root, a disk and a socket nobody answers: the sandbox is stopped as
   * stop() would, and the listeners are told. A pooled one is removed.
   */
  private watchInits(): void {
    this.initWatch = setInterval(() => {
      for (const [id, init] of this.inits) if (!init.running()) void this.initExited(id, init);
    }, INIT_WATCH_MS);
    this.initWatch.unref();
  }

  private async initExited(id: string, init: InitProcess): Promise<void> {
    let stopped = false;
    let oomKilled = false;
    try {
      stopped = await this.mutex.run(id, async () => {
        // Stopped, destroyed or started anew meanwhile: nothing to do.
        if (this.inits.get(id) !== init) return false;
        const spec = this.readSpec(id);
        // Being removed already (its tombstone sees the removal through).
        if (!spec || spec.destroying) return false;
        if (spec.pooled) {
          await this.removeSandbox(id);
          return false;
        }
        // Read before the stop removes its cgroup.
        oomKilled = (readUsage(this.cgroups, this.cgroupPath(id))?.oomKills ?? 0) > 0;
        this.log.warn({ sandboxID: id, oomKilled }, oomKilled ? "the sandbox's init was killed for want of memory; stopping the sandbox" : "the sandbox's init exited; stopping the sandbox");
        await this.stopContainer(id);
        return true;
      });
    } catch (err) {
      this.log.error({ sandboxID: id, err }, 'sandbox ended by itself and could not be stopped');
    }
    if (stopped) for (const listener of this.exitListeners) listener(id, oomKilled);
  }

  async destroy(id: string): Promise<void> {
    if (!SANDBOX_ID.test(id)) return;
    await this.mutex.run(id, () => this.removeSandbox(id));
  }

  /** Removes every trace of a sandbox: container, mount, cgroups, directory. */
  private async removeSandbox(id: string): Promise<void> {
    this.inits.delete(id);
    this.dropPoolLink(id);
    const dir = this.dir(id);
    if (!existsSync(dir)) return;
    const spec = this.readSpec(id);
    if (spec && !spec.destroying) this.writeSpec({ ...spec, destroying: true });
    for (const ids of this.pool.values()) {
      const i = ids.indexOf(id);
      if (i >= 0) ids.splice(i, 1);
    }
    try {
      const runcState = join(this.ociState, id);
      // runc keeps a container's state there from its creation to its
      // deletion. Without it there is no container to end (a build step's,
      // which runc deleted when its command ended), and no runc process is
      // spent finding that out.
      if (existsSync(runcState)) await this.runc.deleteForce(id, this.runningInit(id));
      // A runc killed while it created the container (with its process group,
      // by a Ctrl-C) leaves its state directory, holding the read-only bind
      // mount of its own binary that it makes there, and no container that
      // its delete would remove: both go here, before the sandbox's directory,
      // which marks that there is something left to remove.
      // The overlay goes before the disk that holds its upper directory.
      const rootfs = join(dir, 'rootfs');
      for (const mp of mountPoints()) if ([rootfs, runcState].some((d) => mp === d || mp.startsWith(d + '/'))) await unmount(mp);
      await unmount(this.disk(id).mountPoint);
      // Normally `runc delete` has removed it already.
      if (existsSync(runcState)) await removeTree(runcState);
      await this.networking?.release(id);
    } finally {
      // Whatever failed above, processes left in its cgroups are killed and
      // the cgroups go; the tombstone (spec.json, destroying) stays for the
      // rest to be tried again.
      await this.endStrayProcesses(id);
      const left = await removeCgroupsDrained(this.cgroups, this.cgroupPath(id));
      if (left.length) this.log.warn({ sandboxID: id, cgroups: left }, `cgroups still in use after the sandbox's removal: ${left.join(', ')}`);
    }
    await removeTree(dir);
    this.lastCpu.delete(id);
    this.log.info({ sandboxID: id }, 'sandbox removed');
  }

  /**
   * The pid of the sandbox's container init when it is sure to run unfrozen,
   * without asking runc: the pid runc wrote at the start (runDetached's
   * `--pid-file`), while that process is a member of this sandbox's cgroup
   * (a pid the kernel has since given to another process is not) and the
   * cgroup is thawed (on cgroup v1 a SIGKILL does not reach a frozen
   * process). Otherwise undefined, and deleteForce asks runc.
   */
  private runningInit(id: string): number | undefined {
    let pid: number;
    try {
      pid = Number(readFileSync(join(this.dir(id), 'init.pid'), 'utf8').trim());
    } catch {
      return undefined;
    }
    if (!Number.isInteger(pid) || pid <= 1) return undefined;
    const cgroup = this.cgroupPath(id);
    return inCgroup(pid, cgroup) && thawed(this.cgroups, cgroup) === true ? pid : undefined;
  }

  // ---------------------------------------------------------------- queries

  private info(spec: SandboxSpec, status: SandboxStatus, fromPool?: boolean): RuntimeSandbox {
    return { id: spec.id, templateId: spec.templateId, status, limits: spec.limits, createdAt: new Date(spec.createdAt), ...(fromPool ? { fromPool } : {}) };
  }

  async get(id: string): Promise<RuntimeSandbox | undefined> {
    if (!SANDBOX_ID.test(id)) return undefined;
    const spec = this.readSpec(id);
    if (!spec || spec.destroying || spec.pooled || spec.step) return undefined;
    return this.info(spec, this.statusOf(await this.runc.state(id)));
  }

  async list(): Promise<RuntimeSandbox[]> {
    if (!existsSync(this.sandboxesDir)) return [];
    const containers = new Map((await this.runc.list()).map((c) => [c.id, c]));
    const out: RuntimeSandbox[] = [];
    for (const id of readdirSync(this.sandboxesDir)) {
      const spec = this.readSpec(id);
      if (spec && !spec.destroying && !spec.pooled && !spec.step) out.push(this.info(spec, this.statusOf(containers.get(id))));
    }
    return out;
  }

  async stats(id: string): Promise<SandboxStats> {
    const spec = this.requireSpec(id);
    const usage = readUsage(this.cgroups, this.cgroupPath(id));
    const now = performance.now();
    let cpuUsedPct = 0;
    if (usage) {
      const last = this.lastCpu.get(id);
      if (last && now > last.at) cpuUsedPct = Math.min(100, Math.max(0, ((usage.cpuNs - last.ns) / ((now - last.at) * 1e6 * spec.limits.cpuCount)) * 100));
      this.lastCpu.set(id, { ns: usage.cpuNs, at: now });
    }
    const memTotal = spec.limits.memoryMB * 1024 * 1024;
    const disk = diskUsage(this.disk(id), spec.limits.diskSizeMB);
    return {
      timestamp: new Date(),
      cpuCount: spec.limits.cpuCount,
      cpuUsedPct: Math.round(cpuUsedPct * 100) / 100,
      memUsed: usage ? Math.min(memTotal, Math.max(0, usage.memUsage - usage.memInactiveFile)) : 0,
      memTotal,
      memCache: usage?.memCache ?? 0,
      diskUsed: disk.used,
      diskTotal: disk.total,
      oomKills: usage?.oomKills ?? 0,
    };
  }

  envdEndpoint(id: string): EnvdEndpoint {
    return { socketPath: this.socket(id, 'envd.sock') };
  }

  async updateNetwork(id: string, rules: NetworkRules): Promise<void> {
    splitRules(rules);
    await this.mutex.run(id, async () => {
      const spec = this.requireSpec(id);
      // Where nftables refuses, the previous rules stay in force and recorded.
      if (this.networking?.get(id)) await this.networking.setRules(id, rules);
      this.writeSpec({ ...spec, network: rules });
    });
  }

  async openTunnel(id: string, port: number): Promise<Duplex> {
    this.requireSpec(id);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RuntimeError('invalid', `port ${port} is not a TCP port`);
    return openTunnel(this.socket(id, 'tunnel.sock'), port);
  }

  // ---------------------------------------------------------------- templates

  async deriveTemplate(templateId: string, parentId: string, config: TemplateConfig): Promise<TemplateInfo> {
    return this.templates.derive(templateId, parentId, config);
  }

  async snapshot(id: string, templateId: string, opts: { config?: TemplateConfig; end?: boolean } = {}): Promise<TemplateInfo> {
    return this.mutex.run(id, async () => {
      const spec = this.requireSpec(id);
      const staged = this.templates.stage(templateId);
      const started = performance.now();
      // A sandbox of no more use has its processes ended rather than frozen
      // and thawed: what its files are then is what they stay. Its disk stays
      // mounted for the copy; destroy() removes the rest.
      const init = opts.end ? this.runningInit(id) : undefined;
      if (init !== undefined) this.inits.delete(id);
      const ended = init !== undefined && (await this.runc.killInit(init));
      const status = ended ? 'ended' : this.statusOf(await this.runc.state(id));
      const wasRunning = status === 'running';
      const disk = this.disk(id);
      try {
        // Frozen, its processes cannot change the files while they are copied.
        if (wasRunning) await this.runc.pause(id);
        const pausedMs = msSince(started);
        // A stopped sandbox's disk is mounted for the copy, and unmounted after.
        if (status === 'stopped') await this.ensureDisk(spec);
        const made = await this.takeUpper(spec, staged, templateId, opts.config);
        this.log.info({ sandboxID: id, templateID: templateId, pausedMs, ms: msSince(started) }, 'sandbox snapshot taken');
        return made;
      } catch (err) {
        await removeTree(staged.dir).catch(() => undefined);
        throw err instanceof RuntimeError ? err : new RuntimeError('internal', `snapshot of '${id}' failed: ${(err as Error).message}`, { cause: err });
      } finally {
        if (wasRunning) await this.runc.resume(id).catch(() => undefined);
        if (status === 'stopped') await unmount(disk.mountPoint).catch(() => undefined);
      }
    });
  }

  /**
   * Makes the staged template `templateId` of a sandbox's upper directory,
   * on the layers the sandbox stands on; nothing of the sandbox may run.
   * The staging directory goes when this fails.
   */
  private async takeUpper(spec: SandboxSpec, staged: { dir: string; layer: string }, templateId: string, config: TemplateConfig | undefined): Promise<TemplateInfo> {
    try {
      // cp -a copies links as links; nothing in the upper is followed.
      await run('cp', ['-a', `${this.disk(spec.id).upper}/.`, staged.layer], { timeoutMs: 600_000 });
      // The copy is the host's alone now, but its `etc` is whatever the
      // sandbox made it: a link there (to the host's /etc, say) must not
      // be followed by the removal of the sandbox's own name files.
      if (isRealDirectory(join(staged.layer, 'etc'))) for (const f of ['etc/hostname', 'etc/hosts']) rmSync(join(staged.layer, f), { recursive: true, force: true });
      // A sandbox made before user namespaces and not started since has host-owned files.
      if (spec.idShift === undefined) await shiftOwners(staged.layer, this.idShift);
      return this.templates.commit(staged.dir, templateId, spec.templateId, spec.limits, this.idShift, spec.lowers ?? this.templates.layers(spec.templateId), config);
    } catch (err) {
      await removeTree(staged.dir).catch(() => undefined);
      throw err;
    }
  }

  async runStep(templateId: string, stepTemplateId: string, command: StepCommand, opts: RunStepOptions = {}): Promise<StepResult> {
    const held = opts.stepNetwork;
    if (held === undefined) return this.runStepContainer(templateId, stepTemplateId, command, opts);
    // One step container at a time in a held network: each finds it as the last one's end left it.
    if (this.stepNetworksInUse.has(held)) throw new RuntimeError('conflict', `step network '${held}' is in use by another step`);
    this.stepNetworksInUse.add(held);
    try {
      return await this.runStepContainer(templateId, stepTemplateId, command, opts);
    } finally {
      this.stepNetworksInUse.delete(held);
    }
  }

  private async runStepContainer(templateId: string, stepTemplateId: string, command: StepCommand, opts: RunStepOptions): Promise<StepResult> {
    this.ensurePrepared();
    if (this.removing) throw new RuntimeError('unavailable', 'the runtime is removing all its sandboxes and takes no new ones');
    if (!command.shell === !command.argv) throw new RuntimeError('invalid', 'a step runs a shell command line or a program, one of the two');
    const limits = this.limitsFor(templateId, opts.limits);
    const held = opts.stepNetwork;
    if (held !== undefined && (!SANDBOX_ID.test(held) || this.readSpec(held)?.holdsNetwork !== true)) throw new RuntimeError('not_found', `step network '${held}' does not exist`);
    const network = held !== undefined ? (this.readSpec(held)!.network ?? {}) : (opts.network ?? {});
    splitRules(network);
    this.templates.checkNewId(stepTemplateId);
    opts.signal?.throwIfAborted();
    const id = newSandboxId();
    const dir = this.dir(id);
    const image = this.templates.image(templateId);
    const spec: SandboxSpec = {
      id,
      templateId,
      limits,
      createdAt: new Date().toISOString(),
      pooled: false,
      step: true,
      idShift: this.idShift,
      lowers: this.templates.layers(templateId),
      network,
      ...(held !== undefined ? { netOf: held } : {}),
    };
    const phases = new Phases();
    // What keeps the command from starting (a user that does not exist) is the step's failure, not the runtime's.
    let refused: string | undefined;
    const commandFor = async (rootfs: string): Promise<ContainerCommand> => {
      this.copyWorkers ??= new CopyWorkers(envdToolsScript(this.paddockDir!));
      let how: { user: string; uid: number; gid: number; home: string; cwd: string; shell: string[] };
      try {
        how = (await this.copyWorkers.stepProcess(
          [
            ...['--root', rootfs, '--id-shift', String(this.idShift)],
            ...['--default-user', image.user || SANDBOX_USER],
            ...(command.user ? ['--user', command.user] : []),
            ...(command.cwd ? ['--cwd', command.cwd] : []),
            ...(image.workingDir ? ['--default-workdir', image.workingDir] : []),
          ],
          { timeoutMs: 60_000 },
        )) as typeof how;
      } catch (err) {
        if (!(err instanceof CopyFailed)) throw err;
        refused = err.message;
        throw err;
      }
      // As envd makes a process's environment: a default PATH, the image's, the user's names, the command's own.
      const env: Record<string, string> = { PATH: COMMAND_DEFAULT_PATH, ...envMap(image.env), HOME: how.home, USER: how.user, LOGNAME: how.user, ...command.env };
      return {
        args: command.shell !== undefined ? [...how.shell, command.shell] : [...command.argv!],
        env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
        cwd: how.cwd,
        uid: how.uid,
        gid: how.gid,
      };
    };
    const stop = () => void this.runc.deleteForce(id, this.runningInit(id)).catch(() => undefined);
    const failed = async (err: unknown): Promise<never> => {
      this.log.warn({ sandboxID: id, templateID: templateId, err }, 'build step could not run');
      await this.mutex.run(id, () => this.removeSandbox(id)).catch(() => undefined);
      if (opts.signal?.aborted) throw opts.signal.reason;
      throw err instanceof RuntimeError ? err : new RuntimeError('unavailable', `the build step could not run: ${(err as Error).message}`, { cause: err });
    };
    // Made under the sandbox's lock; the command runs without it, so that a
    // destroy (of everything, at an uninstall) ends it rather than waiting for it.
    let ready: boolean;
    try {
      ready = await this.mutex.run(id, async () => {
        phases.end('queued');
        await this.makeDisk(spec, phases);
        try {
          await this.prepareContainer(spec, phases, commandFor);
        } catch (err) {
          if (refused === undefined) throw err;
          return false;
        }
        // Its CPU weight, as a running sandbox's, set on its cgroup before runc joins it.
        setCpuWeight(this.cgroups, this.cgroupPath(id), RUNNING_CPU_WEIGHT);
        return true;
      });
    } catch (err) {
      return failed(err);
    }
    const containerMs = phases.total();
    if (!ready) return { exitCode: -1, status: refused!, sandboxId: id, ms: { container: containerMs, command: 0 } };
    try {
      opts.signal?.throwIfAborted();
      opts.signal?.addEventListener('abort', stop, { once: true });
      const { exitCode, runcError } = await this.runc.runForeground(id, dir, (stream, bytes) => opts.onOutput?.(stream, bytes));
      phases.end('run');
      const commandMs = phases.total() - containerMs;
      opts.signal?.throwIfAborted();
      if (exitCode !== 0) return { exitCode, status: runcError ? `the command could not start: ${runcError}` : `exit status ${exitCode}`, sandboxId: id, ms: { container: containerMs, command: commandMs } };
      const template = await this.mutex.run(id, async () => {
        const now = this.readSpec(id);
        if (!now || now.destroying) throw new RuntimeError('unavailable', `the step's container '${id}' was removed while its command ran`);
        // The command and every process it left have ended (its PID namespace went with it): the upper is what the step made.
        return this.takeUpper(spec, this.templates.stage(stepTemplateId), stepTemplateId, opts.config);
      });
      phases.end('layer');
      this.log.info({ sandboxID: id, templateID: templateId, stepTemplateID: stepTemplateId, phases: phases.ms }, 'build step run');
      return { exitCode, status: 'exit status 0', template, sandboxId: id, ms: { container: containerMs, command: commandMs, layer: phases.total() - containerMs - commandMs } };
    } catch (err) {
      return failed(err);
    } finally {
      opts.signal?.removeEventListener('abort', stop);
    }
  }

  async holdStepNetwork(rules: NetworkRules = {}): Promise<string> {
    this.ensurePrepared();
    if (this.removing) throw new RuntimeError('unavailable', 'the runtime is removing all its sandboxes and takes no new ones');
    splitRules(rules);
    const id = newSandboxId();
    // A directory like a step container's, written before the slot is
    // taken: whatever a crash leaves of it, the next start removes (recover).
    const spec: SandboxSpec = { id, templateId: '', limits: DEFAULT_LIMITS, createdAt: new Date().toISOString(), pooled: false, step: true, holdsNetwork: true, lowers: [], network: rules };
    await this.mutex.run(id, async () => {
      mkdirSync(this.dir(id), { recursive: true, mode: 0o700 });
      this.writeSpec(spec);
      try {
        await this.networking?.acquire(id, rules);
      } catch (err) {
        await this.removeSandbox(id).catch(() => undefined);
        throw err;
      }
    });
    this.log.info({ sandboxID: id }, 'network held for build steps');
    return id;
  }

  /** The slot a build holds under `id` for its step containers. */
  private heldStepNetwork(id: string): { netnsPath: string } {
    const slot = this.networking?.get(id);
    if (!slot) throw new RuntimeError('not_found', `step network '${id}' has no network slot (released, or lost)`);
    return slot;
  }

  async templateWithFiles(templateId: string, parentId: string, files: FilesCopy, opts: TemplateWithFilesOptions = {}): Promise<TemplateInfo> {
    this.ensurePrepared();
    const parent = this.templates.get(parentId);
    if (!parent) throw new RuntimeError('not_found', `template '${parentId}' does not exist`);
    const limits = checkLimits({ ...parent.limits, ...definedOnly(opts.limits) });
    const lowers = this.templates.layers(parentId);
    const staged = this.templates.stage(templateId);
    // The image as a sandbox of it would see it, writable, its changes going
    // to the new layer: overlayfs itself makes the layer what the same
    // change in a sandbox would (directories copied up, whiteouts). Mounted
    // in the staging directory, which no sandbox sees.
    const image = join(staged.dir, 'image');
    const work = join(staged.dir, 'work');
    const started = performance.now();
    const ms: Record<string, number> = {};
    try {
      mkdirSync(image, { mode: 0o700 });
      mkdirSync(work, { mode: 0o700 });
      // The layer's top is the image's `/`, owned by its root, as a sandbox's upper is.
      chownSync(staged.layer, this.idShift, this.idShift);
      chmodSync(staged.layer, 0o755);
      // Volatile: its unmount does not sync the host's filesystem (most of
      // an unmount's time), which no more makes the layer durable than a
      // snapshot's `cp -a` is; a crash leaves only the staging directory.
      await mountOverlay(image, lowers, staged.layer, work, staged.dir, { volatile: true });
      ms.mountedMs = msSince(started);
      try {
        // envd's build tool, on the host: it resolves the image's paths itself, within the image.
        const args = [
          '--archive', files.archive,
          '--source', files.source,
          '--dest', files.dest,
          ...(files.workdir ? ['--workdir', files.workdir] : []),
          ...(files.user ? ['--user', files.user] : []),
          ...(files.owner ? ['--owner', files.owner] : []),
          ...(files.mode ? ['--mode', files.mode] : []),
          ...(files.unpacked ? ['--unpacked', files.unpacked.dir, '--unpack-scratch', files.unpacked.scratch] : []),
          '--max-bytes', String(limits.diskSizeMB * 1024 * 1024),
          '--root', image,
          '--id-shift', String(this.idShift),
        ];
        this.copyWorkers ??= new CopyWorkers(envdToolsScript(this.paddockDir!));
        try {
          await this.copyWorkers.copy(args, { timeoutMs: 600_000, ...(opts.signal ? { signal: opts.signal } : {}) });
        } catch (err) {
          if (opts.signal?.aborted) throw opts.signal.reason;
          // The tool's one line (what failed) is the reason.
          throw new RuntimeError('invalid', err instanceof CopyFailed ? err.message : (err as Error).message, { cause: err });
        }
        ms.copiedMs = msSince(started);
      } finally {
        await unmount(image);
      }
      ms.unmountedMs = msSince(started);
      for (const d of [image, work, join(staged.dir, 'l')]) await removeTree(d);
      const made = this.templates.commit(staged.dir, templateId, parentId, limits, this.idShift, lowers, opts.config);
      this.log.info({ templateID: templateId, parentID: parentId, ...ms, ms: msSince(started) }, 'template made with files');
      return made;
    } catch (err) {
      await unmount(image).catch(() => undefined);
      await removeTree(staged.dir).catch(() => undefined);
      throw err instanceof RuntimeError ? err : new RuntimeError('internal', `the files of template '${templateId}' could not be placed: ${(err as Error).message}`, { cause: err });
    }
  }

  async getTemplate(id: string): Promise<TemplateInfo | undefined> {
    return this.templates.get(id);
  }

  async listTemplates(): Promise<TemplateInfo[]> {
    return this.templates.list();
  }

  async deleteTemplate(id: string): Promise<void> {
    if (!this.templates.get(id)) throw new RuntimeError('not_found', `template '${id}' does not exist`);
    if (id === BASE_TEMPLATE_ID) throw new RuntimeError('conflict', 'the base template cannot be deleted');
    const children = this.templates.children(id);
    if (children.length) throw new RuntimeError('conflict', `template '${id}' is the parent of ${children.join(', ')}`);
    const users = readdirSync(this.sandboxesDir).filter((s) => this.readSpec(s)?.templateId === id);
    for (const s of users) if (this.readSpec(s)?.pooled) await this.destroy(s);
    const inUse = users.filter((s) => this.readSpec(s));
    if (inUse.length) throw new RuntimeError('conflict', `template '${id}' is used by sandboxes ${inUse.join(', ')}`);
    this.pool.delete(id);
    this.templates.discard(id);
    await this.collectLayers();
  }

  // ---------------------------------------------------------------- warm pool

  private poolFor(templateId: string): string[] {
    let ids = this.pool.get(templateId);
    if (!ids) this.pool.set(templateId, (ids = []));
    return ids;
  }

  private async claimFromPool(templateId: string, network: NetworkRules, init?: EnvdInit): Promise<RuntimeSandbox | undefined> {
    const ids = this.pool.get(templateId);
    while (ids && ids.length > 0) {
      const id = ids.shift()!;
      const started = performance.now();
      this.refillSoon();
      try {
        return await this.mutex.run(id, async () => {
          const spec = this.requireSpec(id);
          // A pooled sandbox that died must not be handed out. Asking its envd
          // tells as much as `runc state` does and costs a request instead of
          // a runc process on the path of every create: /init fails
          // on a dead one too.
          const socket = this.socket(id, 'envd.sock');
          const link = this.poolLinks.get(id);
          this.poolLinks.delete(id);
          try {
            if (init) await (link ? link.init(init) : initEnvd(socket, init));
            else if (!(await envdAnswers(socket))) throw new RuntimeError('unavailable', 'pooled sandbox is not running');
          } finally {
            void link?.close();
          }
          await this.networking?.setRules(id, network);
          const claimed = { ...spec, pooled: false, createdAt: new Date().toISOString(), network };
          this.writeSpec(claimed);
          this.log.info({ sandboxID: id, templateID: templateId, ms: msSince(started) }, 'sandbox taken from the warm pool');
          return this.info(claimed, 'running', true);
        });
      } catch (err) {
        this.log.warn({ sandboxID: id, err }, 'pooled sandbox could not be taken; removed');
        await this.destroy(id).catch(() => undefined);
      }
    }
    return undefined;
  }

  private refillSoon(): void {
    if (this.refillTimer || this.closed) return;
    this.refillTimer = setTimeout(() => {
      this.refillTimer = undefined;
      this.fillPool();
    }, POOL_REFILL_DELAY_MS);
    this.refillTimer.unref();
  }

  /**
   * Tops up every pooled template, one sandbox at a time, in the background;
   * stops while a caller's boot runs (bootForCaller starts it again after).
   * A template whose pooled boot fails (its image broken, its ready command
   * never succeeding) waits before it is tried again, longer after each
   * failure in a row, and meanwhile does not hold up the other templates.
   */
  private fillPool(): void {
    const size = this.opts.warmPoolSize ?? 0;
    if (size <= 0 || this.closed || this.poolFilling || this.callerBoots > 0) return;
    const fill = async () => {
      for (const { templateId } of this.poolTemplates) {
        const template = this.templates.get(templateId);
        if (!template || this.poolWaiting(templateId)) continue;
        while (!this.closed && this.callerBoots === 0 && this.isPooled(templateId) && this.poolFor(templateId).length < size) {
          const generation = this.poolGeneration;
          let spec: SandboxSpec;
          try {
            spec = await this.boot(templateId, template.limits, 'pooled');
          } catch (err) {
            // A failure under an earlier list of templates (another preparation) says nothing of this one.
            if (generation !== this.poolGeneration) break;
            const delayMs = Math.min(2 * (this.poolFailures.get(templateId)?.delayMs ?? POOL_RETRY_MS / 2), POOL_RETRY_MAX_MS);
            this.poolFailures.set(templateId, { delayMs, until: Date.now() + delayMs });
            this.log.error({ templateID: templateId, err, retryInMs: delayMs }, 'a sandbox for the warm pool could not boot; its template is tried again later');
            break;
          }
          this.poolFailures.delete(templateId);
          // Pooled even when the runtime closed meanwhile: release() or the
          // next start finds it there. Not when its template left the pool
          // while it booted.
          if (this.isPooled(templateId)) this.poolFor(templateId).push(spec.id);
          else await this.destroy(spec.id);
        }
      }
    };
    // Cleared in a later tick (fill() may finish synchronously when the pool
    // is full); a claim that came in meanwhile is topped up right after.
    let failed = false;
    this.poolFilling = fill()
      .catch((err: unknown) => {
        failed = true;
        this.log.error({ err }, 'warm pool fill failed');
      })
      .finally(() => {
        this.poolFilling = undefined;
        if (this.closed || this.callerBoots > 0) return;
        if (!failed && this.poolShort(false)) return this.fillPool();
        // What is short waits: after a failed boot of its template, or (rather than spin) after a failed fill.
        const waits = [...this.poolFailures.values()].map((f) => f.until);
        if (failed) waits.push(Date.now() + POOL_RETRY_MS);
        if (!this.poolShort(true) || waits.length === 0) return;
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => this.fillPool(), Math.max(0, Math.min(...waits) - Date.now())).unref();
      });
  }

  /** Opens and keeps the connection a claim of pooled sandbox `id` will use (none where envd does not answer: the claim makes its own). */
  private async keepPoolLink(id: string): Promise<void> {
    this.dropPoolLink(id);
    const link = new PooledEnvdLink(this.socket(id, 'envd.sock'));
    try {
      await link.warm();
      this.poolLinks.set(id, link);
    } catch {
      await link.close();
    }
  }

  private dropPoolLink(id: string): void {
    void this.poolLinks.get(id)?.close();
    this.poolLinks.delete(id);
  }

  /** Whether `templateId` waits after failed pooled boots. */
  private poolWaiting(templateId: string): boolean {
    return (this.poolFailures.get(templateId)?.until ?? 0) > Date.now();
  }

  /** Whether a pooled template has fewer sandboxes than the pool size; with `waiting` false, only those not waiting after a failure count. */
  private poolShort(waiting = true): boolean {
    const size = this.opts.warmPoolSize ?? 0;
    return this.poolTemplates.some(({ templateId: t }) => this.templates.get(t) && this.poolFor(t).length < size && (waiting || !this.poolWaiting(t)));
  }

  async poolReady(): Promise<void> {
    for (;;) {
      this.fillPool();
      while (this.poolFilling) await this.poolFilling;
      if (this.closed || this.callerBoots === 0) return;
      await new Promise<void>((resolve) => this.callerBootsEnded.push(resolve));
    }
  }

  /** Also removes this data directory's parent cgroup when no sandbox of it is left. */
  async health(): Promise<Record<string, HealthCheck>> {
    const checks: Record<string, HealthCheck> = {};
    try {
      await access(this.sandboxesDir, constants.W_OK);
      checks.runtime = this.closed ? { ok: false, detail: 'the runtime is closed' } : { ok: true, detail: `sandboxes in ${this.sandboxesDir}` };
    } catch (err) {
      checks.runtime = { ok: false, detail: `${this.sandboxesDir} is not writable: ${(err as Error).message}` };
    }
    if (this.networking) checks.network = this.networkReady ? this.networking.health() : { ok: false, detail: 'the sandbox network is not set up' };
    return checks;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.initWatch);
    clearTimeout(this.refillTimer);
    this.refillTimer = undefined;
    clearTimeout(this.retryTimer);
    await this.poolFilling;
    for (const id of [...this.poolLinks.keys()]) this.dropPoolLink(id);
    await this.copyWorkers?.close();
    this.copyWorkers = undefined;
    await this.spares.close();
    await this.networking?.close();
    this.networkReady = false;
    this.dropCgroupParent();
  }

  /**
   * Removes the parent cgroup (`/paddock/<hash>`) from every hierarchy when
   * the data directory has no sandbox; runc makes it again for the next one.
   * With sandboxes left (running, paused or stopped, possibly adopted later
   * by another instance) it stays. The check and the removal run without
   * yielding, and a sandbox's directory exists before runc makes its cgroup,
   * so a sandbox being created meanwhile is seen. Whatever cannot be removed
   * shows in leftovers().
   */
  private dropCgroupParent(): void {
    if (existsSync(this.sandboxesDir) && readdirSync(this.sandboxesDir).length > 0) return;
    removeCgroupDir(this.cgroups, this.cgroupParent);
  }

  /**
   * Destroys the warm pool's sandboxes and removes the parent cgroup,
   * leaving nothing on the host; refused while other sandboxes exist.
   */
  async release(): Promise<void> {
    await this.close();
    for (const id of existsSync(this.sandboxesDir) ? readdirSync(this.sandboxesDir) : []) {
      if (this.readSpec(id)?.pooled) await this.destroy(id);
    }
    const left = await this.list();
    if (left.length) throw new RuntimeError('conflict', `sandboxes still exist: ${left.map((s) => s.id).join(', ')}`);
    await this.removeStrayCgroups();
    await this.dropHostView();
    // close() removed this runtime's spare disks; a crashed one's may be left.
    await this.spares.removeStale();
    await this.networking?.removeEverything();
    this.dropCgroupParent();
  }

  /**
   * Destroys every sandbox and releases the host: what uninstalling (and each
   * test's teardown) does. Creates still booting are waited for and
   * destroyed with the rest; creates asked for from now on are refused.
   * Every sandbox directory goes, not only the sandboxes list() shows: also
   * the pooled ones, and one whose removal stopped part-way (a create that
   * failed and could not clean up after itself leaves such a tombstone).
   * A sandbox that cannot be removed does not keep the others; the error
   * names each that failed.
   */
  async removeEverything(): Promise<void> {
    this.removing = true;
    await this.close();
    while (this.callerBoots > 0) await new Promise<void>((resolve) => this.callerBootsEnded.push(resolve));
    const failed: string[] = [];
    for (const id of existsSync(this.sandboxesDir) ? readdirSync(this.sandboxesDir) : []) {
      await this.destroy(id).catch((err: Error) => failed.push(`${id}: ${err.message}`));
    }
    if (failed.length) throw new RuntimeError('unavailable', `could not remove ${failed.length} sandbox(es): ${failed.join('; ')}`);
    await this.release();
  }

  /**
   * What this runtime has left on the host: mounts under its data directory,
   * cgroups (its parent cgroup included), runc containers and state
   * directories, and sandbox directories. Empty after removeEverything(); a
   * leak check for tests.
   */
  async leftovers(): Promise<string[]> {
    const out = [...mountPoints()].filter((m) => m.startsWith(this.dataDir + '/')).map((m) => `mount ${m}`);
    for (const d of this.leftoverCgroups()) out.push(`cgroup ${d}`);
    const stateRoot = this.ociState;
    if (existsSync(stateRoot)) {
      const containers = (await this.runc.list()).map((c) => c.id);
      for (const c of containers) out.push(`${this.ociRuntime} container ${c}`);
      // What the OCI runtime does not list: a state directory a dead one left (see removeSandbox).
      for (const d of readdirSync(stateRoot)) if (!containers.includes(d)) out.push(`${this.ociRuntime} state directory ${d}`);
    }
    if (existsSync(this.sandboxesDir)) for (const d of readdirSync(this.sandboxesDir)) out.push(`directory sandboxes/${d}`);
    const spareDisks = join(this.dataDir, 'spare-disks');
    if (existsSync(spareDisks)) for (const d of readdirSync(spareDisks)) out.push(`directory spare-disks/${d}`);
    for (const l of loopDevicesUnder(this.dataDir)) out.push(`loop device ${l}`);
    if (this.networking) out.push(...(await this.networking.leftovers()));
    return out;
  }

  private ensurePrepared(): void {
    if (!this.prepared) throw new RuntimeError('unavailable', 'runtime is not prepared; call prepare() first');
  }

  /** cgroup directories that belong to this instance, its parent cgroup included (for leak checks). */
  leftoverCgroups(): string[] {
    return cgroupDirs(this.cgroups, this.cgroupParent);
  }

  /** Resolves once the spare disks are all made (for tests and benchmarks), or making one failed. */
  spareDisksReady(): Promise<void> {
    return this.spares.full();
  }

  /** How many spare disks are ready now. */
  spareDiskCount(): number {
    return this.spares.count();
  }

  /** Sandbox ids in the warm pool, per template. */
  pooled(): Record<string, string[]> {
    return Object.fromEntries([...this.pool].map(([t, ids]) => [t, [...ids]]));
  }

  async setPooledTemplates(templates: PooledTemplate[]): Promise<void> {
    this.poolTemplates = templates.map((t) => ({ ...t }));
    // New preparations may succeed where the old ones failed: every template is tried at once.
    this.poolGeneration++;
    this.poolFailures.clear();
    for (const [templateId, ids] of this.pool) {
      if (this.isPooled(templateId)) continue;
      this.pool.delete(templateId);
      for (const id of ids) await this.destroy(id).catch((err: unknown) => this.log.warn({ sandboxID: id, err }, 'pooled sandbox of a template that left the pool could not be removed'));
    }
    this.fillPool();
  }

  private isPooled(templateId: string): boolean {
    return this.poolTemplates.some((t) => t.templateId === templateId);
  }
}

/** The network name a previous run recorded in the network's state directory. */
function recordedNetworkName(stateDir: string): string | undefined {
  try {
    const name = (JSON.parse(readFileSync(join(stateDir, 'network.json'), 'utf8')) as { name?: unknown }).name;
    return typeof name === 'string' ? name : undefined;
  } catch {
    return undefined;
  }
}

function isRealDirectory(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The host root's inotify limits, which every sandbox's use is charged to too, at least HOST_INOTIFY_LIMITS. */
function raiseHostLimits(): void {
  for (const [name, least] of Object.entries(HOST_INOTIFY_LIMITS)) {
    const file = `/proc/sys/fs/inotify/${name}`;
    if (Number(readFileSync(file, 'utf8').trim()) < least) writeFileSync(file, String(least));
  }
}

function checkLimits(limits: Limits): Limits {
  if (!Number.isInteger(limits.cpuCount) || limits.cpuCount < 1) throw new RuntimeError('invalid', `cpuCount ${limits.cpuCount} must be a whole number of at least 1`);
  if (!Number.isInteger(limits.memoryMB) || limits.memoryMB < 128) throw new RuntimeError('invalid', `memoryMB ${limits.memoryMB} must be a whole number of at least 128`);
  if (!Number.isInteger(limits.diskSizeMB) || limits.diskSizeMB < MIN_DISK_MB) throw new RuntimeError('invalid', `diskSizeMB ${limits.diskSizeMB} must be a whole number of at least ${MIN_DISK_MB}`);
  return limits;
}

const definedOnly = (limits?: Partial<Limits>): Partial<Limits> => Object.fromEntries(Object.entries(limits ?? {}).filter(([, v]) => v !== undefined));

function sameLimits(a: Limits, b: Limits): boolean {
  return a.cpuCount === b.cpuCount && a.memoryMB === b.memoryMB && a.diskSizeMB === b.diskSizeMB;
}

/** The last lines of a log file, for error messages. */
function tail(file: string, bytes = 2048): string {
  try {
    const size = statSync(file).size;
    const fd = openSync(file, 'r');
    const buf = Buffer.alloc(Math.min(bytes, size));
    readSync(fd, buf, 0, buf.length, size - buf.length);
    closeSync(fd);
    return buf.toString('utf8').trim() || '(empty)';
  } catch {
    return '(no log)';
  }
}


/**
 * The command line of the chosen OCI runtime. crun goes through the
 * legacy-cgroups launcher (native/legacy_cgroups_exec.c), which hides a
 * hybrid host's cgroup v2 hierarchy from it (crun refuses such a host) and
 * only executes it elsewhere; the launcher executes crun by its absolute path.
 */
function ociRuntimeCommand(state: string, name: OciRuntimeName, binary?: string): Runc {
  if (name === 'runc') return new Runc(state, binary ?? 'runc', 'runc');
  const program = binary ?? onPath('crun');
  // Not found: no launcher, so that the version check says crun is not installed.
  if (!program) return new Runc(state, 'crun', 'crun');
  return new Runc(state, resolve(program), 'crun', legacyCgroupsLauncher());
}


/** crun where it is installed (it starts containers faster), else runc. */
export function defaultOciRuntime(): OciRuntimeName {
  return onPath('crun') ? 'crun' : 'runc';
}

/**
 * The OCI runtime whose containers a data directory holds (its state
 * directory has entries), or undefined when neither has any: for tools that
 * must drive whichever one the server was set to (uninstall).
 */
export function ociRuntimeInUse(dataDir: string): OciRuntimeName | undefined {
  return OCI_RUNTIMES.find((name) => {
    const dir = join(dataDir, name);
    return existsSync(dir) && readdirSync(dir).length > 0;
  });
}
