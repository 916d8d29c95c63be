// The server's Prometheus metrics (prom-client): what the parts count as
// they work (creates, builds, proxied requests, store calls) and what is
// read at each scrape (sandboxes by state, the warm pool, disk).
import { isWarmPool, type Runtime } from '@paddock/runtime';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What a scrape reads from the rest of the server. */
export interface MetricsSources {
  /** Sandboxes clients can see, by state and template. */
  sandboxCounts(): Promise<Array<{ state: string; template: string; count: number }>>;
  /** Bytes used inside the running sandboxes' disks, as last sampled. */
  sandboxDiskUsed(): Promise<number>;
  runtime: Runtime;
  /** Directories whose size is reported as disk used, by kind. */
  dirs: Record<string, string | undefined>;
}

const execFileAsync = promisify(execFile);

/** How long a directory's size is reused before it is walked again, ms: a walk of the layers reads every inode. */
const DIR_SIZE_TTL_MS = 60_000;

/** Bytes of disk a directory's tree takes, as du counts them (a walk in JavaScript takes many times longer), on its own filesystem; 0 if it cannot be read. */
async function dirSize(dir: string): Promise<number> {
  try {
    const { stdout } = await execFileAsync('du', ['-s', '-x', '-B1', dir], { timeout: 300_000 });
    return Number(stdout.split('\t')[0]) || 0;
  } catch (err) {
    // du counts what it can and says what it could not (a file removed while it ran); its count stands.
    const out = (err as { stdout?: string }).stdout;
    return out ? Number(out.split('\t')[0]) || 0 : 0;
  }
}

export class Metrics {
  readonly registry = new Registry();
  readonly creates: Counter<'pool' | 'result'>;
  readonly createSeconds: Histogram<'pool'>;
  readonly poolMisses: Counter;
  readonly proxyRequests: Counter<'target'>;
  readonly proxyBytes: Counter<'direction'>;
  readonly proxyErrors: Counter<'status' | 'target'>;
  readonly sampleFailures: Counter;
  readonly buildsQueued: Gauge;
  readonly buildsRunning: Gauge;
  readonly buildSeconds: Histogram<'status'>;
  readonly storeSeconds: Histogram<'call'>;
  readonly lifecycle: Counter<'event'>;
  private readonly dirSizes = new Map<string, { at: number; bytes?: number; walking?: Promise<void> }>();

  constructor(private sources?: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'paddock_' });
    this.creates = new Counter({ name: 'paddock_sandbox_creates_total', help: 'Sandbox creates, by whether a warm sandbox was claimed and by result', labelNames: ['pool', 'result'], registers });
    this.createSeconds = new Histogram({
      name: 'paddock_sandbox_create_seconds',
      help: 'Time to answer a successful create, by whether a warm sandbox was claimed',
      labelNames: ['pool'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.poolMisses = new Counter({ name: 'paddock_warm_pool_misses_total', help: 'Creates that found no warm sandbox of their template and booted one', registers });
    this.proxyRequests = new Counter({ name: 'paddock_proxy_requests_total', help: "Requests the sandbox proxy passed on, by target: envd or a sandbox's own port", labelNames: ['target'], registers });
    this.proxyBytes = new Counter({
      name: 'paddock_proxy_bytes_total',
      help: "Bytes on the proxy's client connections, in (from clients) and out, heads included, counted as each connection closes",
      labelNames: ['direction'],
      registers,
    });
    this.proxyErrors = new Counter({
      name: 'paddock_proxy_errors_total',
      help: "Requests the proxy refused or could not pass on, by status and by target (envd, a sandbox's port, or none when refused before routing); a 502 to envd is an envd that did not answer",
      labelNames: ['status', 'target'],
      registers,
    });
    this.sampleFailures = new Counter({ name: 'paddock_sandbox_sample_failures_total', help: "Samplings of a sandbox's use (its cgroup and disk) that failed", registers });
    this.buildsQueued = new Gauge({ name: 'paddock_builds_queued', help: 'Template builds waiting for a slot', registers });
    this.buildsRunning = new Gauge({ name: 'paddock_builds_running', help: 'Template builds under way', registers });
    this.buildSeconds = new Histogram({
      name: 'paddock_build_seconds',
      help: 'Duration of finished template builds, by status',
      labelNames: ['status'],
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600],
      registers,
    });
    this.storeSeconds = new Histogram({
      name: 'paddock_store_seconds',
      help: 'Latency of calls to the store, by repository and method',
      labelNames: ['call'],
      buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1],
      registers,
    });
    this.lifecycle = new Counter({ name: 'paddock_sandbox_events_total', help: "Events of sandboxes' lives (killed, paused, resumed, expired, stopped by itself ...)", labelNames: ['event'], registers });

    // prom-client calls collect() with the gauge as `this`; the sources are the Metrics'.
    const sandboxCounts = () => this.sources?.sandboxCounts() ?? Promise.resolve([]);
    const runtimeOf = () => this.sources?.runtime;
    const diskUsed = () => this.diskUsed();
    new Gauge({
      name: 'paddock_sandboxes',
      help: 'Sandboxes clients can see, by state and template',
      labelNames: ['state', 'template'],
      registers,
      async collect() {
        this.reset();
        for (const c of await sandboxCounts()) this.set({ state: c.state, template: c.template }, c.count);
      },
    });
    new Gauge({
      name: 'paddock_warm_pool_size',
      help: 'Booted sandboxes waiting in the warm pool, by runtime template',
      labelNames: ['template'],
      registers,
      collect() {
        this.reset();
        const runtime = runtimeOf();
        if (!runtime || !isWarmPool(runtime)) return;
        for (const [template, ids] of Object.entries(runtime.pooled())) this.set({ template }, ids.length);
      },
    });
    new Gauge({
      name: 'paddock_disk_used_bytes',
      help: "Disk used: image layers and templates, sandboxes' directories, and the bytes in use inside running sandboxes' disks",
      labelNames: ['kind'],
      registers,
      async collect() {
        this.reset();
        for (const [kind, bytes] of Object.entries(await diskUsed())) this.set({ kind }, bytes);
      },
    });
  }

  /** Connects what scrapes read, once the parts exist. */
  setSources(sources: MetricsSources): void {
    this.sources = sources;
  }

  /** Disk used by kind: the directories' sizes as last measured, and what running sandboxes hold. */
  private async diskUsed(): Promise<Record<string, number>> {
    if (!this.sources) return {};
    const used: Record<string, number> = {};
    for (const [kind, dir] of Object.entries(this.sources.dirs)) {
      const bytes = dir === undefined ? undefined : this.dirSize(dir);
      if (bytes !== undefined) used[kind] = bytes;
    }
    used.sandbox_contents = await this.sources.sandboxDiskUsed();
    return used;
  }

  /**
   * A directory's size as last measured; a scrape never waits for a walk
   * (one of many layers takes longer than a scrape may), it starts one when
   * the last is older than DIR_SIZE_TTL_MS. Undefined until the first ends.
   */
  private dirSize(dir: string): number | undefined {
    const entry = this.dirSizes.get(dir) ?? { at: 0 };
    this.dirSizes.set(dir, entry);
    if (!entry.walking && Date.now() - entry.at >= DIR_SIZE_TTL_MS) {
      entry.walking = dirSize(dir).then((bytes) => {
        entry.bytes = bytes;
        entry.at = Date.now();
        entry.walking = undefined;
      });
    }
    return entry.bytes;
  }

  /**
   * The repository with each of its async methods timed into
   * paddock_store_seconds, under `name.method`.
   */
  timed<T extends object>(name: string, repository: T): T {
    const histogram = this.storeSeconds;
    // One wrapper per method, made at its first call: the proxy looks a sandbox up on every request.
    const wrappers = new Map<string, (...args: unknown[]) => unknown>();
    return new Proxy(repository, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function' || typeof prop !== 'string') return value;
        let wrapped = wrappers.get(prop);
        if (!wrapped) {
          const labels = { call: `${name}.${prop}` };
          wrapped = (...args: unknown[]) => {
            const end = histogram.startTimer(labels);
            const result = (value as (...a: unknown[]) => unknown).apply(target, args);
            if (result instanceof Promise) return result.finally(end);
            end();
            return result;
          };
          wrappers.set(prop, wrapped);
        }
        return wrapped;
      },
    });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
