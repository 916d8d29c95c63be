// The OCI runtime configuration (config.json) of a sandbox's container.
import { envdMountPoint } from '@paddock/envd';
import { ENVD_PORT } from '@paddock/protocol';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ID_RANGE } from './ids.js';
import type { Limits } from './runtime.js';
import { sandboxSeccomp } from './seccomp.js';

export interface ConfigInput {
  id: string;
  limits: Limits;
  pidsLimit: number;
  /** Whether the host accounts swap per cgroup, so memory+swap can be limited too. */
  swapAccounting: boolean;
  /** envd's self-contained directory on the host, mounted read-only at envd's mount point (envdMountPoint). */
  paddockDir: string;
  /** The command that starts envd from its mount point, with its options (envdCommand of @paddock/envd). */
  envdCommand: readonly string[];
  /** The static start hook on the host (native/start_hook.c). */
  startHook: string;
  cgroupsPath: string;
  /** Open files a sandbox process may have: the runtime's own hard limit, as it cannot raise it. */
  maxOpenFiles: number;
  /** The container's root filesystem, absolute (the start hook needs it before runc pivots into it). */
  rootfs: string;
  /** A file holding this start's boot id, mounted over /proc/sys/kernel/random/boot_id. */
  bootIdFile: string;
  /** Sandbox ids 0..ID_RANGE-1 are host ids idShift..; omitted: no user namespace. */
  idShift?: number;
  /** The network namespace to join (the sandbox's network slot); omitted: a new one with only loopback. */
  netnsPath?: string;
  /** A file of the sandbox's, in its host-only directory, mounted over /etc/resolv.conf (naming the sandboxes' resolver). */
  resolvConf?: string;
  /** A build step's command, the container's process instead of envd (RuncRuntime.runStep). */
  command?: ContainerCommand;
}

/** A process the container runs instead of envd: what envd would have started, with what envd would have given it. */
export interface ContainerCommand {
  args: string[];
  /** `NAME=value` entries. */
  env: string[];
  cwd: string;
  uid: number;
  gid: number;
}

/**
 * The OOM score adjustment of a process envd starts (envd's
 * CHILD_OOM_SCORE_ADJ): when memory runs out, the kernel kills the
 * sandbox's commands before envd. A step's command has it too.
 */
export const COMMAND_OOM_SCORE_ADJ = 500;

/**
 * The process part of the configuration: envd as root, or a command as
 * envd would start it. envd, root with the capabilities below, starts
 * another user's process through setuid and exec, which leave it none of
 * them (and no supplementary groups); root's keep them.
 */
function processOf(c: ConfigInput): object {
  const common = {
    terminal: false,
    rlimits: [{ type: 'RLIMIT_NOFILE', hard: c.maxOpenFiles, soft: c.maxOpenFiles }],
    noNewPrivileges: false,
  };
  if (!c.command) {
    return {
      ...common,
      user: { uid: 0, gid: 0 },
      args: [...c.envdCommand],
      // envd's own node takes nothing from the environment; the image's is in envd's options.
      env: [],
      cwd: '/',
      capabilities: { bounding: CAPABILITIES, effective: CAPABILITIES, permitted: CAPABILITIES, inheritable: [], ambient: [] },
    };
  }
  const root = c.command.uid === 0;
  const held = root ? CAPABILITIES : [];
  return {
    ...common,
    user: { uid: c.command.uid, gid: c.command.gid, additionalGids: [] },
    args: c.command.args,
    env: c.command.env,
    cwd: c.command.cwd,
    capabilities: { bounding: CAPABILITIES, effective: held, permitted: held, inheritable: [], ambient: [] },
    oomScoreAdj: COMMAND_OOM_SCORE_ADJ,
  };
}

// The capabilities a container's root keeps: Docker's default set. Enough for
// envd to act as any user and for sudo; none that reach the host (no
// SYS_ADMIN, SYS_MODULE, SYS_PTRACE, NET_ADMIN, SYS_TIME...).
const CAPABILITIES = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_NET_RAW',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

const CPU_PERIOD_US = 100_000;

/** Where envd finds its listening sockets: the descriptors runc passes on, in this order. */
export const ENVD_FD = 3;
export const TUNNEL_FD = 4;

/** Who commands run as when neither the caller nor the image names anyone: E2B's `user`, where the image has one (envd falls back to root). */
export const SANDBOX_USER = 'user';

/**
 * envd's options for a sandbox: the sockets the host made, its port inside
 * the sandbox, and the image's defaults.
 */
export function envdOptions(image: { env: string[]; user?: string; workingDir?: string }): string[] {
  return [
    // Sockets the host made and listens on (RuncRuntime.startContainer):
    // the host reaches envd only through these, never through the sandbox's network.
    '--listen-fd',
    String(ENVD_FD),
    '--tunnel-fd',
    String(TUNNEL_FD),
    // Programs inside reach envd as in E2B's sandboxes (the code interpreter
    // calls http://localhost:49983); other sandboxes cannot (nftables).
    '--port',
    String(ENVD_PORT),
    '--host',
    '0.0.0.0',
    '--default-user',
    image.user || SANDBOX_USER,
    ...(image.workingDir ? ['--default-workdir', image.workingDir] : []),
    ...image.env.flatMap((e) => ['--env', e]),
  ];
}

export function ociConfig(c: ConfigInput): object {
  const memory = c.limits.memoryMB * 1024 * 1024;
  return {
    ociVersion: '1.0.2-dev',
    process: processOf(c),
    root: { path: c.rootfs, readonly: false },
    hostname: c.id,
    mounts: [
      { destination: '/proc', type: 'proc', source: 'proc' },
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      { destination: '/dev/pts', type: 'devpts', source: 'devpts', options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'] },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
      // A sysfs is mounted only by a user namespace that owns the network
      // namespace, and a sandbox's network slot is the host's. It gets the
      // host's sysfs bound read-only (a user namespace may only bind it with
      // what is mounted under it; the cgroup mount below covers the cgroups),
      // with the net/ directories (other sandboxes' interfaces) and the
      // kernel's debug and security file systems masked.
      c.netnsPath
        ? { destination: '/sys', type: 'bind', source: '/sys', options: ['rbind', 'ro', 'nosuid', 'noexec', 'nodev'] }
        : { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
      { destination: '/sys/fs/cgroup', type: 'cgroup', source: 'cgroup', options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'] },
      { destination: envdMountPoint, type: 'bind', source: c.paddockDir, options: ['rbind', 'ro', 'nosuid', 'nodev'] },
      ...(c.resolvConf ? [{ destination: '/etc/resolv.conf', type: 'bind', source: c.resolvConf, options: ['bind', 'nosuid', 'nodev', 'noexec'] }] : []),
    ],
    hooks: {
      // The boot id, and the user namespace's own limits (native/start_hook.c).
      createContainer: [{ path: c.startHook, args: ['paddock-start-hook', c.bootIdFile, c.rootfs, ...Object.entries(SANDBOX_USER_LIMITS).map(([k, v]) => `${k}=${v}`)] }],
    },
    linux: {
      namespaces: [{ type: 'pid' }, { type: 'network', ...(c.netnsPath ? { path: c.netnsPath } : {}) }, { type: 'ipc' }, { type: 'uts' }, { type: 'mount' }, { type: 'cgroup' }, ...(c.idShift === undefined ? [] : [{ type: 'user' }])],
      ...(c.idShift === undefined ? {} : { uidMappings: [idMap(c.idShift)], gidMappings: [idMap(c.idShift)] }),
      cgroupsPath: c.cgroupsPath,
      resources: {
        devices: [{ allow: false, access: 'rwm' }],
        memory: { limit: memory, ...(c.swapAccounting ? { swap: memory } : {}) },
        cpu: { quota: c.limits.cpuCount * CPU_PERIOD_US, period: CPU_PERIOD_US },
        pids: { limit: c.pidsLimit },
      },
      maskedPaths: [
        '/proc/acpi',
        '/proc/asound',
        '/proc/kcore',
        '/proc/keys',
        '/proc/latency_stats',
        '/proc/timer_list',
        '/proc/timer_stats',
        '/proc/sched_debug',
        '/proc/scsi',
        '/sys/firmware',
        '/sys/devices/virtual/powercap',
        ...(c.netnsPath ? HOST_SYSFS_MASKED : []),
      ],
      readonlyPaths: ['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
      // Default-deny allow-list of system calls: seccomp/profile.json.
      seccomp: sandboxSeccomp(),
    },
  };
}

/** What of the host's sysfs a sandbox with a network slot does not see. */
export const HOST_SYSFS_MASKED = ['/sys/class/net', '/sys/devices/virtual/net', '/sys/kernel/debug', '/sys/kernel/tracing', '/sys/kernel/security', '/sys/kernel/config', '/sys/fs/bpf', '/sys/fs/fuse'];

function idMap(shift: number) {
  return { containerID: 0, hostID: shift, size: ID_RANGE };
}

/** The static hook every start of a container runs (native/start_hook.c), as built. */
export const startHookBinary = (): string => join(import.meta.dirname, '../build/Release/paddock-start-hook');

/**
 * Each sandbox's own limits on what the kernel counts per user namespace
 * (/proc/sys/user/*). Without them a new namespace has none, and what it
 * uses is charged only to its owner, the host's root: one sandbox could take
 * every inotify instance of the host's root and of all other sandboxes.
 * Linux's own defaults for one user.
 */
export const SANDBOX_USER_LIMITS = { max_inotify_instances: 128, max_inotify_watches: 131072 } as const;

/**
 * The host root's limits (fs.inotify.*), which all sandboxes' use is charged
 * to as well: raised (never lowered) by prepare() so that many sandboxes at
 * their own limits still leave the host room. What the watches cost is
 * kernel memory, counted in each sandbox's memory cgroup.
 */
export const HOST_INOTIFY_LIMITS = { max_user_instances: 65536, max_user_watches: 16_777_216 } as const;

/** This process's hard limit on open files, from /proc/self/limits. */
export function hardOpenFilesLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const hard = line?.trim().split(/\s+/)[4];
  return hard === undefined || hard === 'unlimited' ? 1048576 : Number(hard);
}

/** The launcher crun runs through (native/legacy_cgroups_exec.c), as built. */
export const legacyCgroupsLauncher = (): string => join(import.meta.dirname, '../build/Release/paddock-legacy-cgroups');
