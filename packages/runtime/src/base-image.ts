// The `base` image: a Debian root filesystem that mmdebstrap makes from the
// Debian mirror the host already uses, written as one plain tar (uid 0 is
// root inside) that the image store imports as a single layer. Building
// takes minutes, so the tar is kept in a cache directory under the hash of
// the recipe that made it and only remade when the recipe changes or a
// rebuild is asked for.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, createWriteStream, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { removeTree } from './mounts.js';
import { RuntimeError } from './runtime.js';

/** Bump when something that shapes the image changes outside the recipe's own fields (how a hook is written, what is skipped). */
export const BASE_RECIPE_VERSION = 1;

export const BASE_SUITE = 'bookworm';

export const DEFAULT_DEBIAN_MIRROR = 'http://deb.debian.org/debian';
export const DEFAULT_DEBIAN_SECURITY_MIRROR = 'http://deb.debian.org/debian-security';

/**
 * What the image offers beyond Debian's essential set and apt: what E2B's
 * base gives its users. pip recommends build-essential and python3-dev, and
 * npm's node-gyp needs a compiler for native addons: without them `pip
 * install` of anything without a wheel and `npm install` of native modules
 * fail, so they are in despite their size.
 */
export const BASE_PACKAGES: readonly string[] = [
  'bash',
  'build-essential',
  'ca-certificates',
  'coreutils',
  'curl',
  'git',
  'iproute2',
  'less',
  'nano',
  'netbase',
  'nodejs',
  'npm',
  'passwd',
  'procps',
  'python-is-python3',
  'python3',
  'python3-dev',
  'python3-pip',
  'python3-venv',
  'sudo',
  'tzdata',
  'unzip',
  'wget',
  'xz-utils',
  'zip',
];

/** What a sandbox of the base image starts with, in the image store's config shape. */
export const BASE_IMAGE_CONFIG = {
  env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=C.UTF-8'],
  user: 'user',
  workingDir: '/home/user',
} as const;

// Runs inside the new root filesystem (mmdebstrap chroots into it) once all
// packages are installed.
const CUSTOMIZE = `set -eu
groupadd --gid 1000 user
useradd --uid 1000 --gid 1000 --groups sudo --create-home --home-dir /home/user --shell /bin/bash user
chmod 0750 /home/user
printf 'user ALL=(ALL:ALL) NOPASSWD: ALL\\n' > /etc/sudoers.d/paddock-user
chmod 0440 /etc/sudoers.d/paddock-user
visudo --check --quiet --file=/etc/sudoers.d/paddock-user
printf 'sandbox\\n' > /etc/hostname
printf '127.0.0.1\\tlocalhost\\n127.0.1.1\\tsandbox\\n::1\\tlocalhost ip6-localhost ip6-loopback\\n' > /etc/hosts
rm -f /etc/resolv.conf
printf '[global]\\nbreak-system-packages = true\\n' > /etc/pip.conf
printf 'LANG=C.UTF-8\\n' > /etc/default/locale
sed -i 's/"$(id -u)"/"\${EUID:-$(id -u)}"/g' /etc/profile
grep -q 'EUID:-' /etc/profile
if grep -q '"$(id -u)"' /etc/profile; then echo '/etc/profile still asks id -u' >&2; exit 1; fi
`;

// About the /etc/profile line above: every command the SDKs run is a login
// shell (`bash -l -c`), and Debian's /etc/profile asks `$(id -u)` for the
// PATH it sets, a fork and an exec that were about half of a login shell's
// time in a sandbox. bash knows its own EUID; sh, which does not set it,
// still asks `id`. The two checks fail the build if Debian's file changes
// so that the edit no longer applies.

// Documentation and manual pages are of no use without man(1), nor are
// translations with only the C.UTF-8 locale, and together they make up a good
// part of the image; the copyright files stay.
const DPKG_OPTS = [
  'path-exclude=/usr/share/man/*',
  'path-exclude=/usr/share/info/*',
  'path-exclude=/usr/share/doc/*',
  'path-include=/usr/share/doc/*/copyright',
  'path-exclude=/usr/share/locale/*',
  'path-include=/usr/share/locale/locale.alias',
];

const APT_OPTS = ['Acquire::Retries "3"'];

// Device nodes are not taken into the tar: the image store refuses them in
// a layer, and every sandbox gets its own /dev.
const SKIP = ['output/dev'];

// Hard-links the host's downloaded packages into the new root's apt cache, so
// that apt only fetches what the host does not have. apt takes a file there
// whose name and size match the package it wants; the links go with the
// cleanup that empties the cache before the tar is written. On another
// filesystem `ln` fails on the first file and nothing is linked.
const LINK_HOST_APT_CACHE = `mkdir -p "$1/var/cache/apt/archives"
for deb in /var/cache/apt/archives/*.deb; do
  if [ -f "$deb" ] && [ ! -L "$deb" ]; then ln "$deb" "$1/var/cache/apt/archives/" 2>/dev/null || break; fi
done`;

const DEBIAN_SUITES = new Set(['oldoldstable', 'oldstable', 'stable', 'testing', 'unstable', 'sid', 'experimental', 'buster', 'bullseye', 'bookworm', 'trixie', 'forky', 'duke']);
// Suites without an `-updates` companion, and those without a `-security` one.
const NO_UPDATES = new Set(['testing', 'unstable', 'sid', 'experimental']);
const NO_SECURITY = new Set(['unstable', 'sid', 'experimental']);

export interface DebianSources {
  /** The Debian archive, e.g. http://deb.debian.org/debian. */
  mirror: string;
  /** The security archive, e.g. http://deb.debian.org/debian-security; none when the host has none. */
  security?: string;
}

interface SourceEntry {
  types: string[];
  uris: string[];
  suites: string[];
}

function oneLineEntries(text: string): SourceEntry[] {
  const out: SourceEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    // `deb [arch=amd64 signed-by=...] uri suite component...`
    const m = /^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)/.exec(line);
    if (m) out.push({ types: [m[1]!], uris: [m[2]!], suites: [m[3]!] });
  }
  return out;
}

function deb822Entries(text: string): SourceEntry[] {
  const out: SourceEntry[] = [];
  for (const stanza of text.split(/\n\s*\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const line of stanza.split('\n')) {
      if (line.startsWith('#')) continue;
      if (/^\s/.test(line) && last) {
        fields.set(last, `${fields.get(last)} ${line.trim()}`);
        continue;
      }
      const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
      if (!m) continue;
      last = m[1]!.toLowerCase();
      fields.set(last, m[2]!.trim());
    }
    if (/^(no|false)$/i.test(fields.get('enabled') ?? '')) continue;
    const list = (k: string) => (fields.get(k) ?? '').split(/\s+/).filter(Boolean);
    if (fields.has('uris')) out.push({ types: list('types'), uris: list('uris'), suites: list('suites') });
  }
  return out;
}

const isHttp = (uri: string) => /^https?:\/\//.test(uri);
const withoutSlash = (uri: string) => uri.replace(/\/+$/, '');

/**
 * The Debian archive and security archive the host's apt uses, from
 * `sources.list` and `sources.list.d/` (one-line `.list` and deb822
 * `.sources` files): the first http(s) source of binary packages whose suite
 * is a Debian release. Undefined when there is none (not a Debian host).
 */
export function hostDebianSources(aptDir = '/etc/apt'): DebianSources | undefined {
  const entries: SourceEntry[] = [];
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch {
      return '';
    }
  };
  entries.push(...oneLineEntries(read(join(aptDir, 'sources.list'))));
  let names: string[] = [];
  try {
    names = readdirSync(join(aptDir, 'sources.list.d')).sort();
  } catch {
    // no sources.list.d
  }
  for (const name of names) {
    const path = join(aptDir, 'sources.list.d', name);
    if (name.endsWith('.list')) entries.push(...oneLineEntries(read(path)));
    else if (name.endsWith('.sources')) entries.push(...deb822Entries(read(path)));
  }
  let mirror: string | undefined;
  let security: string | undefined;
  for (const e of entries) {
    if (!e.types.includes('deb')) continue;
    const uri = e.uris.find(isHttp);
    if (!uri) continue;
    for (const suite of e.suites) {
      const [release, pocket] = suite.split(/[-/]/, 2) as [string, string | undefined];
      if (!DEBIAN_SUITES.has(release)) continue;
      if (pocket === 'security' || (pocket === 'updates' && suite.includes('/'))) security ??= withoutSlash(uri);
      else if (pocket === undefined) mirror ??= withoutSlash(uri);
    }
  }
  return mirror ? { mirror, ...(security ? { security } : {}) } : undefined;
}

function checkMirror(uri: string, what: string): string {
  // The URI goes into a sources.list line: no spaces, no option brackets.
  if (!/^https?:\/\/[^\s[\]]+$/.test(uri)) throw new RuntimeError('invalid', `${what} '${uri}' is not an http(s) URL`);
  return withoutSlash(uri);
}

export interface BaseRecipe {
  suite: string;
  sources: DebianSources;
  /** The sources.list lines mmdebstrap gets (and writes into the image). */
  sourceLines: string[];
  /** sha256 of everything that shapes the image. */
  hash: string;
}

/** The recipe for `suite` from `sources`, and its hash: the cache key of the tar. */
export function baseRecipe(sources: DebianSources, suite = BASE_SUITE): BaseRecipe {
  if (!/^[a-z][a-z0-9-]*$/.test(suite)) throw new RuntimeError('invalid', `Debian suite '${suite}' is not a suite name`);
  const mirror = checkMirror(sources.mirror, 'Debian mirror');
  const security = sources.security === undefined ? undefined : checkMirror(sources.security, 'Debian security mirror');
  const sourceLines = [`deb ${mirror} ${suite} main`];
  if (!NO_UPDATES.has(suite)) sourceLines.push(`deb ${mirror} ${suite}-updates main`);
  if (security && !NO_SECURITY.has(suite)) sourceLines.push(`deb ${security} ${suite}-security main`);
  const hash = createHash('sha256')
    .update(
      JSON.stringify({
        version: BASE_RECIPE_VERSION,
        suite,
        variant: 'apt',
        sourceLines,
        packages: [...BASE_PACKAGES].sort(),
        customize: CUSTOMIZE,
        dpkg: DPKG_OPTS,
        apt: APT_OPTS,
        skip: SKIP,
      }),
    )
    .digest('hex');
  return { suite, sources: { mirror, ...(security ? { security } : {}) }, sourceLines, hash };
}

export type BaseBuildStage = 'waiting' | 'resolving' | 'downloading' | 'extracting' | 'installing' | 'customizing' | 'cleaning' | 'writing';

export interface BaseBuildProgress {
  stage: BaseBuildStage;
  /** For people: `downloading packages`, `installing packages (12/479)`, `writing tar`. */
  message: string;
  /** 0..100 within the stage, where mmdebstrap's output tells one. */
  percent?: number;
}

export interface BuildBaseRootfsOptions {
  /**
   * Where the tar is kept (`base-<recipe hash>.tar`, its build's log beside
   * it); made if missing. The build happens in here too: apt downloads as
   * the `_apt` user, which must be able to reach it (else apt warns and
   * downloads as root).
   */
  cacheDir: string;
  onProgress?: (progress: BaseBuildProgress) => void;
  /** Every line mmdebstrap prints. */
  onLog?: (line: string) => void;
  /** Aborts a build: mmdebstrap and everything it started are killed and the partial output removed. */
  signal?: AbortSignal;
  /** The Debian archive; default: the host's (see hostDebianSources), else deb.debian.org. */
  mirror?: string;
  /** The security archive; with `mirror` given, none unless given too. */
  securityMirror?: string;
  suite?: string;
  /** Build even when the cache has the tar (`paddock template rebuild base`). */
  force?: boolean;
}

export interface BaseRootfs {
  tarPath: string;
  recipeHash: string;
  fromCache: boolean;
  /** Bytes of the tar. */
  size: number;
  /** How long mmdebstrap took, when it ran. */
  buildMs?: number;
}

/** The mirrors a build uses when the caller names none. */
export function defaultDebianSources(): DebianSources {
  return hostDebianSources() ?? { mirror: DEFAULT_DEBIAN_MIRROR, security: DEFAULT_DEBIAN_SECURITY_MIRROR };
}

function onPath(cmd: string): boolean {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    try {
      accessSync(join(dir, cmd), constants.X_OK);
      return true;
    } catch {
      // not in this one
    }
  }
  return false;
}

const abortReason = (signal: AbortSignal): unknown => signal.reason ?? new DOMException('This operation was aborted', 'AbortError');

/**
 * Makes the base image's root filesystem as a tar in `cacheDir`, or returns
 * the one already there for the same recipe. One build at a time per cache
 * directory, across processes: a second caller waits for the first and then
 * takes its tar.
 */
export async function buildBaseRootfs(opts: BuildBaseRootfsOptions): Promise<BaseRootfs> {
  const sources: DebianSources = opts.mirror !== undefined ? { mirror: opts.mirror, ...(opts.securityMirror !== undefined ? { security: opts.securityMirror } : {}) } : defaultDebianSources();
  const recipe = baseRecipe(sources, opts.suite ?? BASE_SUITE);
  const cacheDir = resolve(opts.cacheDir);
  const tarPath = join(cacheDir, `base-${recipe.hash}.tar`);
  const cached = (): BaseRootfs | undefined => {
    try {
      const st = lstatSync(tarPath);
      return st.isFile() ? { tarPath, recipeHash: recipe.hash, fromCache: true, size: st.size } : undefined;
    } catch {
      return undefined;
    }
  };
  if (!opts.force) {
    const hit = cached();
    if (hit) {
      await removeLeftovers(cacheDir);
      return hit;
    }
  }
  opts.signal?.throwIfAborted();
  if (process.getuid?.() !== 0) throw new RuntimeError('unavailable', 'building the base image needs root (mmdebstrap runs in its root mode)');
  for (const cmd of ['mmdebstrap', 'unshare', 'setpriv']) {
    if (!onPath(cmd)) throw new RuntimeError('unavailable', `building the base image needs '${cmd}', which is not installed (apt-get install -y ${cmd === 'mmdebstrap' ? 'mmdebstrap' : 'util-linux'})`);
  }
  mkdirSync(cacheDir, { recursive: true });

  const release = (await lock(join(cacheDir, 'base.lock'), opts))!;
  try {
    if (!opts.force) {
      // Another process may have built it while this one waited.
      const hit = cached();
      if (hit) return hit;
    }
    // Holding the lock, any build directory is a leftover of a killed build.
    for (const dir of buildDirs(cacheDir)) await removeBuildDir(dir);
    const buildDir = join(cacheDir, `.build-${recipe.hash.slice(0, 12)}-${randomBytes(4).toString('hex')}`);
    mkdirSync(buildDir);
    // apt downloads as the `_apt` user, which must reach the root being built in here.
    chmodSync(buildDir, 0o755);
    try {
      const started = Date.now();
      const out = join(buildDir, 'rootfs.tar');
      const log = join(buildDir, 'mmdebstrap.log');
      await runMmdebstrap(recipe, out, log, buildDir, opts);
      // The log goes first: a tar in the cache always has the log of its build beside it.
      renameSync(log, logPath(tarPath));
      renameSync(out, tarPath);
      const buildMs = Date.now() - started;
      return { tarPath, recipeHash: recipe.hash, fromCache: false, size: statSync(tarPath).size, buildMs };
    } finally {
      await removeBuildDir(buildDir);
    }
  } finally {
    await release();
  }
}

const buildDirs = (cacheDir: string): string[] => readdirSync(cacheDir).filter((n) => n.startsWith('.build-')).map((n) => join(cacheDir, n));

/**
 * Removes what builds that were killed left in `cacheDir`. Only while no
 * build runs there, which the lock tells: whoever holds it may be building,
 * and a later call cleans up instead.
 */
async function removeLeftovers(cacheDir: string): Promise<void> {
  if (buildDirs(cacheDir).length === 0) return;
  const release = await lock(join(cacheDir, 'base.lock'), { wait: false });
  if (!release) return;
  try {
    for (const dir of buildDirs(cacheDir)) await removeBuildDir(dir);
  } finally {
    await release();
  }
}

async function removeBuildDir(dir: string): Promise<void> {
  // mmdebstrap mounts only inside its own mount namespace, which is gone
  // with its last process; removeTree still refuses a directory with
  // something mounted in it rather than walk into the mount.
  await removeTree(dir);
}

function mmdebstrapArgs(recipe: BaseRecipe, out: string): string[] {
  return [
    '--mode=root',
    '--variant=apt',
    '--format=tar',
    '--verbose',
    `--include=${BASE_PACKAGES.join(',')}`,
    ...APT_OPTS.map((o) => `--aptopt=${o}`),
    ...DPKG_OPTS.map((o) => `--dpkgopt=${o}`),
    ...SKIP.map((s) => `--skip=${s}`),
    `--setup-hook=${LINK_HOST_APT_CACHE}`,
    `--chrooted-customize-hook=${CUSTOMIZE}`,
    recipe.suite,
    out,
    ...recipe.sourceLines,
  ];
}

/** Processes whose command line names `dir`: mmdebstrap and what it runs inside its chroot there. */
export function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dir)) found.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Where the output of the build that made `tarPath` is kept. */
export const logPath = (tarPath: string): string => tarPath.replace(/\.tar$/, '.log');

function runMmdebstrap(recipe: BaseRecipe, out: string, logFile: string, buildDir: string, opts: BuildBaseRootfsOptions): Promise<void> {
  const progress = new MmdebstrapProgress(opts.onProgress ?? (() => {}));
  const tail: string[] = [];
  const log = createWriteStream(logFile);
  const logClosed = new Promise<void>((r) => log.once('close', () => r()));
  return new Promise<void>((resolvePromise, reject) => {
    // mmdebstrap runs as pid 1 of its own pid and mount namespaces: its
    // bind mounts of /dev and /proc live only there, and when it dies (or
    // the process that started it: the parent-death signal) the kernel
    // kills everything it started and drops the mounts with the namespace.
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', 'unshare', '--pid', '--fork', '--kill-child', '--mount-proc', '--', 'mmdebstrap', ...mmdebstrapArgs(recipe, out)], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TMPDIR: buildDir, LC_ALL: 'C.UTF-8' },
    });
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    let failedIn: BaseBuildStage | undefined;
    const onLine = (line: string) => {
      // mmdebstrap goes on to clean up after an error: the error belongs to the step before.
      if (line.startsWith('E: ') && !failedIn) failedIn = progress.stage;
      tail.push(line);
      if (tail.length > 400) tail.shift();
      opts.onLog?.(line);
      log.write(line + '\n');
      progress.line(line);
    };
    let open = 2;
    let exit: { code: number | null; sig: NodeJS.Signals | null } | undefined;
    const finish = async () => {
      if (open > 0 || !exit) return;
      opts.signal?.removeEventListener('abort', onAbort);
      log.end();
      await logClosed;
      // The namespace's processes are killed by the kernel but may take a
      // moment to exit; none may outlive the build.
      for (let i = 0; i < 200 && processesIn(buildDir).length; i++) await new Promise((r) => setTimeout(r, 50));
      if (aborted) return reject(abortReason(opts.signal!));
      if (exit.code === 0 && existsSync(out)) return resolvePromise();
      reject(buildError(recipe, failedIn ?? progress.stage, tail, exit));
    };
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', onLine).on('close', () => {
        open--;
        void finish();
      });
    }
    child.on('error', (err) => {
      opts.signal?.removeEventListener('abort', onAbort);
      log.end();
      reject(new RuntimeError('unavailable', `building the base image failed: cannot run mmdebstrap: ${err.message}`, { cause: err }));
    });
    child.on('exit', (code, sig) => {
      exit = { code, sig };
      void finish();
    });
    if (opts.signal?.aborted) onAbort();
  });
}

function buildError(recipe: BaseRecipe, stage: BaseBuildStage | undefined, tail: string[], exit: { code: number | null; sig: NodeJS.Signals | null }): RuntimeError {
  // apt's `Err:` lines are followed by an indented line that says why.
  const reasons: string[] = [];
  tail.forEach((line, i) => {
    if (/^(E|W): |^Err:/.test(line)) {
      reasons.push(line);
      if (line.startsWith('Err:') && /^\s+\S/.test(tail[i + 1] ?? '')) reasons.push(tail[i + 1]!.trim());
    }
  });
  const detail = (reasons.length ? reasons.slice(-12) : tail.slice(-20)).join('\n');
  const how = exit.code !== null ? `exit ${exit.code}` : `signal ${exit.sig}`;
  if (tail.some((line) => /^E: apt-get update\b.* failed$/.test(line))) {
    const mirrors = [recipe.sources.mirror, recipe.sources.security].filter(Boolean).join(' and ');
    return new RuntimeError('unavailable', `building the base image failed: apt could not read the package lists of ${recipe.suite} from the Debian mirror ${mirrors} (mmdebstrap ${how}):\n${detail}`);
  }
  return new RuntimeError('unavailable', `building the base image failed while ${stage ?? 'starting'} (mmdebstrap ${how}, mirror ${recipe.sources.mirror}):\n${detail}`);
}

/** The progress a build reports, replayed from its log (see logPath). */
export function progressOfLog(lines: Iterable<string>): BaseBuildProgress[] {
  const out: BaseBuildProgress[] = [];
  const parser = new MmdebstrapProgress((p) => out.push(p));
  for (const line of lines) parser.line(line);
  return out;
}

const UNITS: Record<string, number> = { B: 1, kB: 1e3, MB: 1e6, GB: 1e9 };
const bytes = (n: string, unit: string) => Number(n.replace(',', '.')) * (UNITS[unit] ?? 1);

/**
 * Turns mmdebstrap's verbose output into progress. Its `I:` lines mark the
 * phases; within them apt's own lines tell how far it is: `N newly
 * installed` and `Need to get X MB` first, then one `Get:` line per
 * download with its size, then dpkg's `Unpacking` and `Setting up` lines.
 */
class MmdebstrapProgress {
  stage: BaseBuildStage | undefined;
  private what = '';
  private total = 0;
  private steps = 0;
  private setUp = 0;
  private needBytes = 0;
  private gotBytes = 0;

  constructor(private readonly emit: (p: BaseBuildProgress) => void) {}

  private enter(stage: BaseBuildStage, message: string, what = ''): void {
    this.stage = stage;
    this.what = what;
    this.emit({ stage, message });
  }

  line(line: string): void {
    let m: RegExpExecArray | null;
    if (line.startsWith('I: ')) {
      const info = line.slice(3);
      if (info.startsWith('running apt-get update')) this.enter('resolving', 'reading package lists');
      else if (info.startsWith('downloading packages')) this.enter('downloading', 'downloading essential packages', 'essential packages');
      else if (info.startsWith('extracting archives')) this.enter('extracting', 'extracting essential packages');
      else if (info.startsWith('installing essential packages')) this.startInstall('essential packages');
      else if (info.startsWith('installing remaining packages')) this.startInstall('packages');
      else if (/^running --(chrooted-)?customize-hook/.test(info)) this.enter('customizing', 'customizing');
      else if (info.startsWith('cleaning package lists')) this.enter('cleaning', 'cleaning package lists and apt cache');
      else if (info.startsWith('creating tarball')) this.enter('writing', 'writing tar');
      else if (info.startsWith('removing tempdir')) this.enter('cleaning', 'removing temporary files');
      return;
    }
    if ((m = /^\d+ upgraded, (\d+) newly installed/.exec(line))) {
      // The essential download counts every essential package; each
      // install phase counts its own.
      if (this.stage === 'downloading' || this.stage === 'installing') this.total = Number(m[1]);
    } else if ((m = /^Need to get (?:([\d.,]+) (\w+)\/)?([\d.,]+) (\w+) of archives/.exec(line))) {
      this.needBytes = m[1] ? bytes(m[1], m[2]!) : bytes(m[3]!, m[4]!);
      this.gotBytes = 0;
    } else if ((m = /^Get:\d+ .* \[([\d.,]+) (\w+)\]$/.exec(line)) && (this.stage === 'downloading' || this.stage === 'installing')) {
      if (this.stage === 'installing' && this.steps === 0) {
        // apt downloads what the install needs before dpkg starts.
        this.stage = 'downloading';
        this.emit({ stage: 'downloading', message: `downloading ${this.what}`, percent: 0 });
      }
      this.gotBytes += bytes(m[1]!, m[2]!);
      if (this.needBytes > 0) this.emit({ stage: 'downloading', message: `downloading ${this.what}`, percent: Math.min(100, (100 * this.gotBytes) / this.needBytes) });
    } else if (/^(Unpacking|Setting up) \S+/.test(line)) {
      if (this.stage === 'downloading' && this.what === 'packages') this.stage = 'installing';
      if (this.stage !== 'installing') return;
      this.steps++;
      if (line.startsWith('Setting up')) this.setUp++;
      const percent = this.total > 0 ? Math.min(100, (100 * this.steps) / (2 * this.total)) : undefined;
      const count = this.total > 0 ? ` (${this.setUp}/${this.total})` : '';
      this.emit({ stage: 'installing', message: `installing ${this.what}${count}`, ...(percent === undefined ? {} : { percent }) });
    }
  }

  private startInstall(what: string): void {
    // The essential packages' count came with their download; the others'
    // comes with apt's own summary.
    if (what === 'packages') this.total = 0;
    this.steps = 0;
    this.setUp = 0;
    this.enter('installing', `installing ${what}`, what);
  }
}

// One build per cache directory at a time, across processes: an flock(2) on
// a file in it, held by a small process (flock running cat) for as long as
// its stdin stays open. The kernel drops the lock when that process ends,
// which it does when this one dies too: no stale lock is ever left.
const BUSY = 75;

/** Takes the lock, waiting for it; with `wait: false`, undefined when another holds it. */
async function lock(path: string, opts: Pick<BuildBaseRootfsOptions, 'signal' | 'onProgress'> & { wait?: boolean }): Promise<(() => Promise<void>) | undefined> {
  opts.signal?.throwIfAborted();
  const wait = opts.wait ?? true;
  const flags = wait ? [] : ['--nonblock', '--conflict-exit-code', String(BUSY)];
  const holder = spawn('flock', ['--exclusive', ...flags, '--no-fork', path, 'sh', '-c', 'echo locked && exec cat'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((r) => holder.once('close', () => r()));
  let stderr = '';
  holder.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let busy = false;
  try {
    await new Promise<void>((resolveLock, reject) => {
      const waiting = wait ? setTimeout(() => opts.onProgress?.({ stage: 'waiting', message: `waiting for another build of the base image (lock ${path})` }), 200) : undefined;
      let settled = false;
      const done = (err?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(waiting);
        opts.signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolveLock();
      };
      const onAbort = () => done(abortReason(opts.signal!));
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      holder.stdout!.once('data', () => done());
      holder.once('error', (err) => done(new RuntimeError('unavailable', `building the base image: cannot lock ${path}: ${err.message}`, { cause: err })));
      holder.once('exit', (code) => {
        busy = !wait && code === BUSY;
        done(busy ? undefined : new RuntimeError('unavailable', `building the base image: cannot lock ${path}: flock exited with ${code}: ${stderr.trim()}`));
      });
    });
  } catch (err) {
    holder.kill('SIGKILL');
    await exited;
    throw err;
  }
  if (busy) return undefined;
  return async () => {
    holder.stdin!.end();
    await exited;
  };
}
