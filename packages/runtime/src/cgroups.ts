// Reads a sandbox's cgroup for its usage, kills what is left in it and
// removes leftover cgroups, on cgroup v1, hybrid (v1 controllers plus an
// empty v2 tree) and v2 hosts.
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = '/sys/fs/cgroup';

export interface CgroupLayout {
  version: 1 | 2;
  /** Controller mount directories (v1), or the single tree (v2). */
  dirs: string[];
}

export function detectCgroups(): CgroupLayout {
  if (existsSync(join(ROOT, 'cgroup.controllers'))) return { version: 2, dirs: [ROOT] };
  // runc puts a container in every hierarchy mounted here: the v1
  // controllers, named ones (name=systemd) and, on a hybrid host, the v2
  // tree beside them (`unified`). Links such as `cpu` -> `cpu,cpuacct` only
  // name a hierarchy that is listed already.
  const dirs = readdirSync(ROOT)
    .map((d) => join(ROOT, d))
    .filter((d) => !lstatSync(d).isSymbolicLink() && existsSync(join(d, 'cgroup.procs')));
  return { version: 1, dirs };
}

/** Whether memory+swap can be limited (v1 needs swap accounting in the kernel). */
export function swapAccounting(layout: CgroupLayout): boolean {
  if (layout.version === 1) return existsSync(join(ROOT, 'memory', 'memory.memsw.limit_in_bytes'));
  return readdirSync(ROOT).some((d) => existsSync(join(ROOT, d, 'memory.swap.max')));
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function field(stat: string | undefined, key: string): number | undefined {
  const m = stat && new RegExp(`^${key} (\\d+)$`, 'm').exec(stat);
  return m ? Number(m[1]) : undefined;
}

export interface CgroupUsage {
  cpuNs: number;
  memUsage: number;
  memInactiveFile: number;
  memCache: number;
  /** Processes the kernel killed in the cgroup for want of memory, since it was made. */
  oomKills: number;
}

export function readUsage(layout: CgroupLayout, cgroupPath: string): CgroupUsage | undefined {
  if (layout.version === 2) {
    const dir = join(ROOT, cgroupPath);
    const usec = field(read(join(dir, 'cpu.stat')), 'usage_usec');
    const mem = read(join(dir, 'memory.current'));
    if (usec === undefined || mem === undefined) return undefined;
    const stat = read(join(dir, 'memory.stat'));
    return {
      cpuNs: usec * 1000,
      memUsage: Number(mem),
      memInactiveFile: field(stat, 'inactive_file') ?? 0,
      memCache: field(stat, 'file') ?? 0,
      oomKills: field(read(join(dir, 'memory.events')), 'oom_kill') ?? 0,
    };
  }
  const cpu = read(join(ROOT, 'cpuacct', cgroupPath, 'cpuacct.usage')) ?? read(join(ROOT, 'cpu,cpuacct', cgroupPath, 'cpuacct.usage'));
  const mem = read(join(ROOT, 'memory', cgroupPath, 'memory.usage_in_bytes'));
  if (cpu === undefined || mem === undefined) return undefined;
  const stat = read(join(ROOT, 'memory', cgroupPath, 'memory.stat'));
  return {
    cpuNs: Number(cpu),
    memUsage: Number(mem),
    memInactiveFile: field(stat, 'total_inactive_file') ?? 0,
    memCache: field(stat, 'total_cache') ?? 0,
    // memory.oom_control counts them since Linux 4.13.
    oomKills: field(read(join(ROOT, 'memory', cgroupPath, 'memory.oom_control')), 'oom_kill') ?? 0,
  };
}

/**
 * Sets the CPU weight of `cgroupPath`, making the directory (and its
 * parents) in the CPU hierarchy if needed: in cgroup v2's units (1 to
 * 10000, 100 by default), written as `cpu.weight`, or on v1 as the
 * equivalent `cpu.shares` (1024 for 100). A weight only counts against the
 * cgroup's siblings, and only while the CPUs are contended. False when
 * there is no CPU controller to write to.
 */
export function setCpuWeight(layout: CgroupLayout, cgroupPath: string, weight: number): boolean {
  const cpu = layout.version === 2 ? ROOT : layout.dirs.find((d) => existsSync(join(d, 'cpu.shares')));
  if (!cpu) return false;
  const dir = join(cpu, cgroupPath);
  const [file, value] = layout.version === 2 ? ['cpu.weight', weight] : ['cpu.shares', Math.round((weight * 1024) / 100)];
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, file), String(value));
    return true;
  } catch {
    // v2 without the cpu controller enabled for this subtree
    return false;
  }
}

/**
 * Whether process `pid` is a member of `cgroupPath` (in any hierarchy), or
 * with `below` of a cgroup below it too. Read from /proc/PID/cgroup, whose
 * lines end in `:<path>`; false when the process is gone.
 */
export function inCgroup(pid: number, cgroupPath: string, below = false): boolean {
  const lines = read(`/proc/${pid}/cgroup`);
  return !!lines && lines.split('\n').some((l) => l.endsWith(`:${cgroupPath}`) || (below && l.includes(`:${cgroupPath}/`)));
}

/**
 * Whether `cgroupPath` is thawed: true when its freezer says so, false when
 * frozen or freezing, undefined when there is no freezer to ask (the cgroup
 * is gone, or v1 has no freezer hierarchy).
 */
export function thawed(layout: CgroupLayout, cgroupPath: string): boolean | undefined {
  if (layout.version === 2) {
    const freeze = read(join(ROOT, cgroupPath, 'cgroup.freeze'));
    return freeze === undefined ? undefined : freeze === '0';
  }
  const state = read(join(ROOT, 'freezer', cgroupPath, 'freezer.state'));
  return state === undefined ? undefined : state === 'THAWED';
}

/** Every directory that exists for `cgroupPath`, deepest first. */
export function cgroupDirs(layout: CgroupLayout, cgroupPath: string): string[] {
  const out: string[] = [];
  for (const base of layout.dirs) {
    const top = join(base, cgroupPath);
    if (!existsSync(top) || !lstatSync(top).isDirectory()) continue;
    // cgroupfs does not report entry types in readdir, so every entry is
    // checked with lstat.
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        if (lstatSync(p).isDirectory()) walk(p);
      }
      out.push(d);
    };
    walk(top);
  }
  return out;
}

/** The processes in `cgroupPath` and the cgroups below it, in every hierarchy. */
export function cgroupProcesses(layout: CgroupLayout, cgroupPath: string): number[] {
  const pids = new Set<number>();
  for (const d of cgroupDirs(layout, cgroupPath)) {
    for (const line of (read(join(d, 'cgroup.procs')) ?? '').split('\n')) if (line) pids.add(Number(line));
  }
  return [...pids];
}

/** How long removal waits for a killed sandbox's last processes to leave its cgroups. */
const DRAIN_MS = 2000;
/** How long killing waits for a cgroup to freeze. */
const FREEZE_MS = 1000;

/**
 * Writes `state` (v1: FROZEN or THAWED; v2: 1 or 0) to the freezer of
 * `cgroupPath` and, when freezing, waits (bounded) until every process in
 * it has stopped. False when there is no freezer or it did not freeze in time.
 */
async function setFrozen(layout: CgroupLayout, cgroupPath: string, frozen: boolean): Promise<boolean> {
  const v2 = layout.version === 2;
  const file = v2 ? join(ROOT, cgroupPath, 'cgroup.freeze') : join(ROOT, 'freezer', cgroupPath, 'freezer.state');
  try {
    writeFileSync(file, v2 ? (frozen ? '1' : '0') : frozen ? 'FROZEN' : 'THAWED');
  } catch {
    return false;
  }
  if (!frozen) return true;
  const done = () => (v2 ? /^frozen 1$/m.test(read(join(ROOT, cgroupPath, 'cgroup.events')) ?? '') : read(file) === 'FROZEN');
  const deadline = Date.now() + FREEZE_MS;
  for (let pause = 1; !done(); pause = Math.min(pause * 2, 20)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, pause));
  }
  return true;
}

/**
 * Kills every process left in `cgroupPath` (and below it) and waits,
 * bounded, for them to leave; returns how many it signalled. For processes
 * no OCI runtime knows of any more: a container whose runtime was killed
 * while it created it, before it wrote its state, runs on where nothing
 * else would end it. v2 kills through cgroup.kill where the kernel has it.
 * Otherwise the cgroup is frozen first, so that the pids read from it stay
 * its processes' (none can exit, and its pid go to another process, nor
 * fork) until the SIGKILLs are sent; then thawed, which is when a v1
 * freezer lets the signals take effect.
 */
export async function killCgroupProcesses(layout: CgroupLayout, cgroupPath: string): Promise<number> {
  let signalled = 0;
  const deadline = Date.now() + FREEZE_MS + DRAIN_MS;
  for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
    const pids = cgroupProcesses(layout, cgroupPath);
    if (pids.length === 0 || Date.now() > deadline) return signalled;
    const killFile = join(ROOT, cgroupPath, 'cgroup.kill');
    if (layout.version === 2 && existsSync(killFile)) {
      writeFileSync(killFile, '1');
      signalled += pids.length;
    } else {
      const frozen = await setFrozen(layout, cgroupPath, true);
      for (const pid of cgroupProcesses(layout, cgroupPath)) {
        // Without a freezer: a last check that the pid is still the cgroup's (or one below it).
        if (!frozen && !inCgroup(pid, cgroupPath, true)) continue;
        try {
          process.kill(pid, 'SIGKILL');
          signalled++;
        } catch {
          // Gone meanwhile.
        }
      }
      await setFrozen(layout, cgroupPath, false);
    }
    await new Promise((r) => setTimeout(r, pause));
  }
}

/** Removes the (empty) cgroup directories of `cgroupPath`; returns those that could not be removed. */
export function removeCgroups(layout: CgroupLayout, cgroupPath: string): string[] {
  const left: string[] = [];
  for (const d of cgroupDirs(layout, cgroupPath)) {
    try {
      rmdirSync(d);
    } catch {
      left.push(d);
    }
  }
  return left;
}

/**
 * Removes the cgroup directories of `cgroupPath` as removeCgroups does,
 * trying again for a while those still busy: processes of a sandbox that
 * was just killed take a moment to exit, and until then the kernel refuses
 * (EBUSY). Returns those that are still there after that.
 */
export async function removeCgroupsDrained(layout: CgroupLayout, cgroupPath: string): Promise<string[]> {
  const deadline = Date.now() + DRAIN_MS;
  for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
    const left = removeCgroups(layout, cgroupPath);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, pause));
  }
}

/**
 * Removes the directory of `cgroupPath` itself (not its children) from every
 * hierarchy. The kernel refuses while it still holds child cgroups or
 * processes; returns the directories that are still there, with the reason.
 */
export function removeCgroupDir(layout: CgroupLayout, cgroupPath: string): string[] {
  const left: string[] = [];
  for (const base of layout.dirs) {
    const dir = join(base, cgroupPath);
    try {
      rmdirSync(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') left.push(`${dir} (${code ?? (err as Error).message})`);
    }
  }
  return left;
}
