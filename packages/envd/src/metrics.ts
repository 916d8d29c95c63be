// Resource usage as seen from inside the sandbox: the limits and usage of
// envd's own cgroup when it has them (a container), the host's otherwise.
import { existsSync, readFileSync, statfsSync } from 'node:fs';
import { availableParallelism, freemem, totalmem } from 'node:os';
import { join } from 'node:path';

export interface Metrics {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_total: number;
  mem_used: number;
  mem_cache: number;
  mem_total_mib: number;
  mem_used_mib: number;
  disk_used: number;
  disk_total: number;
}

const MiB = 1024 * 1024;
const CGROUP_ROOT = '/sys/fs/cgroup';

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

function num(text: string | undefined): number | undefined {
  if (text === undefined || text === 'max') return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}

function statField(text: string | undefined, key: string): number | undefined {
  if (!text) return undefined;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** Where each controller's files for this process's cgroup are. */
function cgroupDirs(): { v2?: string; cpu?: string; cpuacct?: string; memory?: string } {
  const text = read('/proc/self/cgroup') ?? '';
  const dirs: { v2?: string; cpu?: string; cpuacct?: string; memory?: string } = {};
  for (const line of text.split('\n')) {
    const [, controllers, path] = line.split(':');
    if (controllers === undefined || path === undefined) continue;
    if (controllers === '') {
      const d = join(CGROUP_ROOT, path);
      if (existsSync(join(d, 'cgroup.controllers'))) dirs.v2 = d;
      continue;
    }
    for (const c of controllers.split(',')) {
      if (c === 'cpu' || c === 'cpuacct' || c === 'memory') {
        const d = [join(CGROUP_ROOT, c, path), join(CGROUP_ROOT, controllers, path)].find((p) => existsSync(p));
        if (d) dirs[c] = d;
      }
    }
  }
  return dirs;
}

interface Reading {
  cpuCount: number;
  /** Total CPU time used by the cgroup (or host), nanoseconds. */
  cpuNs: number | undefined;
  memTotal: number;
  memUsed: number;
  memCache: number;
}

function hostCpuNs(): number {
  const line = (read('/proc/stat') ?? '').split('\n')[0] ?? '';
  const ticks = line.split(/\s+/).slice(1).map(Number);
  // user nice system (idle iowait excluded) irq softirq steal
  const busy = (ticks[0] ?? 0) + (ticks[1] ?? 0) + (ticks[2] ?? 0) + (ticks[5] ?? 0) + (ticks[6] ?? 0) + (ticks[7] ?? 0);
  return (busy * 1e9) / 100;
}

function readNow(): Reading {
  const dirs = cgroupDirs();
  const hostCpus = availableParallelism();
  const hostMem = totalmem();
  let quota: number | undefined;
  let period: number | undefined;
  let cpuNs: number | undefined;
  let limit: number | undefined;
  let usage: number | undefined;
  let inactiveFile: number | undefined;
  let cache: number | undefined;
  if (dirs.v2) {
    const [q, p] = (read(join(dirs.v2, 'cpu.max')) ?? 'max').split(' ');
    quota = num(q);
    period = num(p);
    const usec = statField(read(join(dirs.v2, 'cpu.stat')), 'usage_usec');
    cpuNs = usec === undefined ? undefined : usec * 1000;
    limit = num(read(join(dirs.v2, 'memory.max')));
    usage = num(read(join(dirs.v2, 'memory.current')));
    const stat = read(join(dirs.v2, 'memory.stat'));
    inactiveFile = statField(stat, 'inactive_file');
    cache = statField(stat, 'file');
  }
  if (dirs.cpu && quota === undefined) {
    quota = num(read(join(dirs.cpu, 'cpu.cfs_quota_us')));
    period = num(read(join(dirs.cpu, 'cpu.cfs_period_us')));
  }
  if (dirs.cpuacct && cpuNs === undefined) cpuNs = num(read(join(dirs.cpuacct, 'cpuacct.usage')));
  if (dirs.memory && usage === undefined) {
    limit = num(read(join(dirs.memory, 'memory.limit_in_bytes')));
    usage = num(read(join(dirs.memory, 'memory.usage_in_bytes')));
    const stat = read(join(dirs.memory, 'memory.stat'));
    inactiveFile = statField(stat, 'total_inactive_file');
    cache = statField(stat, 'total_cache');
  }
  const cpuCount = quota !== undefined && quota > 0 && period ? Math.max(1, Math.ceil(quota / period)) : hostCpus;
  const limited = limit !== undefined && limit < hostMem;
  const memTotal = limited ? limit! : hostMem;
  const memUsed = limited && usage !== undefined ? Math.max(0, usage - (inactiveFile ?? 0)) : hostMem - freemem();
  return {
    cpuCount: Math.min(cpuCount, hostCpus),
    cpuNs: limited || quota !== undefined ? cpuNs : hostCpuNs(),
    memTotal,
    memUsed,
    memCache: cache ?? 0,
  };
}

export class MetricsSampler {
  private last: { cpuNs: number; at: number } | undefined;

  constructor() {
    const r = readNow();
    if (r.cpuNs !== undefined) this.last = { cpuNs: r.cpuNs, at: performance.now() };
  }

  /** One sample; CPU use is the average since the previous sample. */
  sample(diskPath = '/'): Metrics {
    const r = readNow();
    let cpuPct = 0;
    const now = performance.now();
    if (r.cpuNs !== undefined) {
      if (this.last && now > this.last.at) {
        const wallNs = (now - this.last.at) * 1e6;
        cpuPct = Math.min(100, Math.max(0, ((r.cpuNs - this.last.cpuNs) / (wallNs * r.cpuCount)) * 100));
      }
      this.last = { cpuNs: r.cpuNs, at: now };
    }
    const fs = statfsSync(diskPath);
    const diskTotal = fs.blocks * fs.bsize;
    const diskUsed = (fs.blocks - fs.bfree) * fs.bsize;
    return {
      ts: Math.floor(Date.now() / 1000),
      cpu_count: r.cpuCount,
      cpu_used_pct: Math.round(cpuPct * 100) / 100,
      mem_total: r.memTotal,
      mem_used: r.memUsed,
      mem_cache: r.memCache,
      mem_total_mib: Math.floor(r.memTotal / MiB),
      mem_used_mib: Math.floor(r.memUsed / MiB),
      disk_used: diskUsed,
      disk_total: diskTotal,
    };
  }
}
