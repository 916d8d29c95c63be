// Checks that this machine can run Paddock, each failure with the command
// that fixes it.
import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, readFileSync, statfsSync } from 'node:fs';
import { hostUpstreams, OCI_RUNTIMES, ociRuntimeInUse, type OciRuntimeName } from '@paddock/runtime';
import { lookup } from 'node:dns/promises';
import { createServer } from 'node:net';
import { delimiter, dirname, join } from 'node:path';

export interface Check {
  name: string;
  ok: boolean;
  /** What was found. */
  detail: string;
  /** How to fix it, when it failed. */
  fix?: string;
  /** The Debian package that fixes it, which `paddock start` installs itself when it may. */
  package?: string;
  /** A failure that does not stop `paddock start`. */
  warning?: boolean;
}

export interface DoctorOptions {
  home: string;
  apiHost: string;
  apiPort: number;
  proxyHost: string;
  proxyPort: number;
  /** Skip the port checks (the server already listens on them). */
  skipPorts?: boolean;
  /** The sandboxes' network as the server will set it up; unset: on, with the defaults. */
  network?: NetworkSettings;
  /** The domain of sandbox hosts, `{port}-{id}.<domain>` (its port, if any, is left out of the name). */
  sandboxDomain?: string;
  /** The OCI runtime the server is set to (PADDOCK_OCI_RUNTIME); unset: the runtime's own choice. */
  ociRuntime?: string;
}

export interface NetworkSettings {
  enabled: boolean;
  uplink?: string;
  dns: string[];
  allowedPrivate: string[];
  subnet?: string;
}

/** The full path of `cmd` on PATH, or undefined. */
export function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, cmd);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

function osRelease(): Record<string, string> {
  try {
    return Object.fromEntries(
      readFileSync('/etc/os-release', 'utf8')
        .split('\n')
        .map((l) => /^(\w+)=(.*)$/.exec(l))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => [m[1]!, m[2]!.replace(/^"|"$/g, '')]),
    );
  } catch {
    return {};
  }
}

/** Whether apt-get can install what Paddock needs here (Debian, Ubuntu and derivatives). */
export function isDebianLike(): boolean {
  const os = osRelease();
  return /debian|ubuntu/i.test(`${os.ID ?? ''} ${os.ID_LIKE ?? ''}`) && which('apt-get') !== undefined;
}

function ociRuntimeFix(name: OciRuntimeName): string {
  return isDebianLike() ? `apt-get install -y ${name}` : `install ${name} from your distribution (e.g. \`dnf install ${name}\`)`;
}

/**
 * The OCI runtime the server will run containers with: the one it is set
 * to, else the one whose containers the home holds, else crun where it is
 * installed; neither installed, crun is what to install.
 */
function ociRuntimeCheck(opts: DoctorOptions): Check {
  const set = opts.ociRuntime;
  if (set !== undefined && !(OCI_RUNTIMES as readonly string[]).includes(set)) {
    return { name: 'oci runtime', ok: false, detail: `the OCI runtime is set to '${set}', not one of ${OCI_RUNTIMES.join(', ')}`, fix: 'set PADDOCK_OCI_RUNTIME (or oci-runtime in the configuration file) to crun or runc' };
  }
  const inUse = ociRuntimeInUse(join(opts.home, 'runtime'));
  const name = (set as OciRuntimeName | undefined) ?? inUse ?? (which('runc') && !which('crun') ? 'runc' : 'crun');
  const program = which(name);
  let version = '';
  if (program) {
    try {
      version = execFileSync(program, ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
    } catch {
      version = '';
    }
  }
  if (program && version) return { name: 'oci runtime', ok: true, detail: `${version} (${program})` };
  const why = set ? ' (set by PADDOCK_OCI_RUNTIME or the configuration file)' : inUse ? ` (the home's sandboxes run on it)` : '';
  return { name: 'oci runtime', ok: false, detail: program ? `${program} does not run` : `${name} is not on PATH${why}`, fix: ociRuntimeFix(name), package: name };
}

function portFree(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

function hasCapability(bit: number): boolean {
  const m = /^CapEff:\s+([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? (BigInt(`0x${m[1]}`) & (1n << BigInt(bit))) !== 0n : false;
}

function cgroupCheck(): Check {
  const root = '/sys/fs/cgroup';
  if (!existsSync(root)) return { name: 'cgroups', ok: false, detail: `${root} is not mounted`, fix: 'mount -t cgroup2 none /sys/fs/cgroup' };
  if (existsSync(join(root, 'cgroup.controllers'))) {
    const have = readFileSync(join(root, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    const missing = ['cpu', 'memory', 'pids'].filter((c) => !have.includes(c));
    return missing.length
      ? { name: 'cgroups', ok: false, detail: `cgroup v2 without the ${missing.join(', ')} controller`, fix: `echo "+${missing.join(' +')}" > ${root}/cgroup.subtree_control` }
      : { name: 'cgroups', ok: true, detail: 'cgroup v2 with cpu, memory and pids' };
  }
  const missing = ['cpu', 'cpuacct', 'memory', 'pids', 'freezer'].filter((c) => !existsSync(join(root, c, 'cgroup.procs')) && !existsSync(join(root, `cpu,cpuacct`, 'cgroup.procs')));
  return missing.length
    ? { name: 'cgroups', ok: false, detail: `cgroup v1 without the ${missing.join(', ')} controller`, fix: `mkdir -p ${root}/${missing[0]} && mount -t cgroup -o ${missing[0]} cgroup ${root}/${missing[0]}` }
    : { name: 'cgroups', ok: true, detail: existsSync(join(root, 'unified')) ? 'cgroup v1 with a v2 tree (hybrid)' : 'cgroup v1' };
}

export async function runDoctor(opts: DoctorOptions): Promise<Check[]> {
  const checks: Check[] = [];
  const linux = process.platform === 'linux';
  checks.push(linux ? { name: 'linux', ok: true, detail: `Linux ${readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim()}` } : { name: 'linux', ok: false, detail: `${process.platform} is not Linux`, fix: 'run Paddock on a Linux host or VM' });
  if (!linux) return checks;

  const major = Number(process.versions.node.split('.')[0]);
  checks.push(
    major >= 22
      ? { name: 'node', ok: true, detail: `Node.js ${process.versions.node}` }
      : { name: 'node', ok: false, detail: `Node.js ${process.versions.node}`, fix: 'run Paddock with Node.js 22: `npm start` in the repository brings it (tools/node/run.sh)' },
  );

  const root = process.getuid?.() === 0;
  const admin = hasCapability(21); // CAP_SYS_ADMIN: mounts, namespaces
  checks.push(root && admin ? { name: 'root', ok: true, detail: 'running as root with CAP_SYS_ADMIN' } : { name: 'root', ok: false, detail: root ? 'root without CAP_SYS_ADMIN' : `running as uid ${process.getuid?.()}`, fix: 'sudo paddock start (containers need root: mounts, namespaces, cgroups)' });

  checks.push(ociRuntimeCheck(opts));

  for (const tool of ['mount', 'umount', 'mknod', 'cp']) {
    if (!which(tool)) checks.push({ name: tool, ok: false, detail: `${tool} is not on PATH`, fix: tool === 'cp' || tool === 'mknod' ? 'apt-get install -y coreutils' : 'apt-get install -y mount' });
  }
  // The base template is a Debian root filesystem made here on first start.
  if (!which('mmdebstrap')) checks.push({ name: 'mmdebstrap', ok: false, detail: 'mmdebstrap is not on PATH (it makes the base template on first start)', fix: 'apt-get install -y mmdebstrap (or start with --base-image REF from a registry you can reach)', package: 'mmdebstrap' });
  // Sandbox root is an unprivileged id outside: every sandbox has a user namespace.
  const userns = Number(readIfExists('/proc/sys/user/max_user_namespaces') ?? '0');
  checks.push(
    userns > 0
      ? { name: 'user namespaces', ok: true, detail: `up to ${userns}` }
      : { name: 'user namespaces', ok: false, detail: 'user namespaces are off (/proc/sys/user/max_user_namespaces is 0)', fix: 'sysctl -w user.max_user_namespaces=15000' },
  );
  // Each sandbox's disk is an ext4 filesystem in a file, loop-mounted.
  if (!which('mkfs.ext4')) checks.push({ name: 'mkfs.ext4', ok: false, detail: 'mkfs.ext4 is not on PATH (sandbox disks are ext4)', fix: 'apt-get install -y e2fsprogs' });
  checks.push(
    existsSync('/dev/loop-control')
      ? { name: 'loop devices', ok: true, detail: '/dev/loop-control is there (sandbox disks are loop-mounted)' }
      : { name: 'loop devices', ok: false, detail: 'no /dev/loop-control: sandbox disks cannot be loop-mounted', fix: 'modprobe loop' },
  );

  const filesystems = readFileSync('/proc/filesystems', 'utf8');
  checks.push(/\boverlay\b/.test(filesystems) ? { name: 'overlayfs', ok: true, detail: 'overlay filesystem available' } : { name: 'overlayfs', ok: false, detail: 'the kernel has no overlay filesystem', fix: 'modprobe overlay' });
  const rootFs = (readFileSync('/proc/self/mounts', 'utf8').split('\n').find((l) => l.split(' ')[1] === '/') ?? '').split(' ')[2];
  if (rootFs === 'overlay') {
    checks.push({ name: 'root filesystem', ok: false, warning: true, detail: '/ is itself an overlay (a container?): sandboxes stack one overlay deeper than the kernel allows', fix: 'run Paddock on a host or VM whose / is not an overlay' });
  }

  checks.push(cgroupCheck());
  checks.push(...networkChecks(opts.network ?? { enabled: true, dns: [], allowedPrivate: [] }));
  if (opts.sandboxDomain) checks.push(await sandboxHostCheck(opts.sandboxDomain));

  let free: number;
  try {
    mkdirSync(opts.home, { recursive: true, mode: 0o700 });
    const fs = statfsSync(opts.home);
    free = fs.bavail * fs.bsize;
  } catch {
    const fs = statfsSync(dirname(opts.home));
    free = fs.bavail * fs.bsize;
  }
  const gib = free / 2 ** 30;
  checks.push(gib >= 2 ? { name: 'disk', ok: true, detail: `${gib.toFixed(1)} GiB free in ${opts.home}` } : { name: 'disk', ok: false, detail: `only ${gib.toFixed(1)} GiB free in ${opts.home}`, fix: 'free some space, or set PADDOCK_HOME to a larger disk' });

  if (!opts.skipPorts) {
    for (const [what, host, port, env] of [
      ['api port', opts.apiHost, opts.apiPort, 'PADDOCK_API_PORT'],
      ['proxy port', opts.proxyHost, opts.proxyPort, 'PADDOCK_PROXY_PORT'],
    ] as const) {
      if (port === 0) continue;
      checks.push((await portFree(host, port)) ? { name: what, ok: true, detail: `${host}:${port} is free` } : { name: what, ok: false, detail: `${host}:${port} is in use`, fix: `stop what listens there, or choose another port: ${env}=<port>` });
    }
  }
  return checks;
}

function run(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 });
  } catch {
    return undefined;
  }
}

/**
 * What each sandbox's network needs (nftables, iproute2, veth pairs, IPv4
 * forwarding, an uplink) and how it is configured: the uplink, the DNS
 * servers asked, the private ranges opened, the subnet.
 */
export function networkChecks(n: NetworkSettings): Check[] {
  if (!n.enabled) return [{ name: 'network', ok: true, detail: 'off: sandboxes have loopback only (PADDOCK_NETWORK=off)' }];
  const checks: Check[] = [];
  const nft = which('nft') && run('nft', ['--version']);
  checks.push(nft ? { name: 'nftables', ok: true, detail: nft.trim() } : { name: 'nftables', ok: false, detail: 'nft is not on PATH (sandbox egress rules are nftables)', fix: 'apt-get install -y nftables (or --no-network: sandboxes get loopback only)', package: 'nftables' });
  const ip = which('ip') && which('ss') && run('ip', ['-V']);
  checks.push(ip ? { name: 'iproute2', ok: true, detail: ip.trim() } : { name: 'iproute2', ok: false, detail: 'ip or ss is not on PATH', fix: 'apt-get install -y iproute2', package: 'iproute2' });
  if (!which('nsenter')) checks.push({ name: 'nsenter', ok: false, detail: 'nsenter is not on PATH', fix: 'apt-get install -y util-linux' });
  if (ip && process.getuid?.() === 0) {
    const probe = `pdkv${process.pid % 100000}`;
    const made = run('ip', ['link', 'add', probe, 'type', 'veth', 'peer', 'name', `${probe}p`]) !== undefined;
    if (made) run('ip', ['link', 'del', probe]);
    checks.push(made ? { name: 'veth', ok: true, detail: 'veth pairs can be made' } : { name: 'veth', ok: false, detail: 'the kernel refused a veth pair', fix: 'modprobe veth' });
  }
  const forwarding = readIfExists('/proc/sys/net/ipv4/ip_forward') === '1';
  checks.push({ name: 'ip forwarding', ok: true, detail: forwarding ? 'IPv4 forwarding is on' : 'IPv4 forwarding is off; `paddock start` turns it on' });
  const routes = ip ? run('ip', ['-j', '-4', 'route', 'show', 'default']) : undefined;
  const defaultDev = routes ? (JSON.parse(routes) as Array<{ dev?: string }>)[0]?.dev : undefined;
  const uplink = n.uplink ?? defaultDev;
  if (!uplink) checks.push({ name: 'uplink', ok: false, detail: 'no IPv4 default route, and no uplink configured', fix: 'PADDOCK_UPLINK=<interface> (or --uplink): where sandbox traffic goes out' });
  else if (ip && run('ip', ['link', 'show', uplink]) === undefined) checks.push({ name: 'uplink', ok: false, detail: `interface '${uplink}' does not exist`, fix: 'PADDOCK_UPLINK=<interface> (or --uplink) naming one that does' });
  else checks.push({ name: 'uplink', ok: true, detail: `${uplink}${n.uplink ? ' (configured)' : " (the default route's)"}` });
  // The servers the sandboxes' resolver will ask, read as it reads them.
  const dns = n.dns.length ? n.dns : hostUpstreams();
  checks.push(
    dns.length
      ? { name: 'dns', ok: true, detail: `sandboxes' resolver asks ${dns.join(', ')}${n.dns.length ? ' (configured)' : " (the host's)"}` }
      : { name: 'dns', ok: false, warning: true, detail: 'no DNS server known: sandboxes resolve nothing', fix: 'PADDOCK_DNS=<address>[,...] (or --dns)' },
  );
  checks.push({ name: 'private ranges', ok: true, detail: n.allowedPrivate.length ? `sandboxes may reach ${n.allowedPrivate.join(', ')} (PADDOCK_ALLOW_PRIVATE)` : 'none open (PADDOCK_ALLOW_PRIVATE)' });
  checks.push({ name: 'subnet', ok: true, detail: n.subnet ? `${n.subnet} (configured)` : 'a free /20 of 10.208.0.0/12, kept across restarts' });
  return checks;
}

/**
 * Whether Node programs here resolve the names `getHost()` gives
 * (`{port}-{id}.<domain>`). `*.localhost` resolves only through glibc's
 * myhostname NSS module (curl resolves it itself, Node does not).
 */
export async function sandboxHostCheck(domain: string): Promise<Check> {
  const host = domain.replace(/:\d+$/, '');
  const name = `49983-doctor.${host}`;
  try {
    const { address } = await lookup(name);
    return { name: 'sandbox hosts', ok: true, detail: `${name} resolves to ${address} (the names getHost() gives)` };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    const detail = `${name} does not resolve (${code}): getHost() names do not reach the sandbox proxy from Node programs here`;
    return host === 'localhost' || host.endsWith('.localhost')
      ? { name: 'sandbox hosts', ok: false, warning: true, detail, fix: 'apt-get install -y libnss-myhostname (it adds myhostname to /etc/nsswitch.conf), or --domain with a wildcard DNS name', package: 'libnss-myhostname' }
      : { name: 'sandbox hosts', ok: false, warning: true, detail, fix: `make *.${host} resolve to this host (a wildcard DNS record), or --domain with one that does` };
  }
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}
