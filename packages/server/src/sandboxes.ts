// Sandbox lifecycle as the control API presents it, on top of the runtime:
// create, connect/resume, pause, kill, timeouts and expiry, metrics, logs,
// snapshots and forks. Every state change is written to the store before
// it is answered; operations on one sandbox never interleave.
import { randomBytes } from 'node:crypto';
import { KeyedMutex, envdVersion, type EnvdInit, type Runtime } from '@paddock/runtime';
import type { ServerConfig } from './config.js';
import { ApiError, badRequest, conflict, notFound, toApiError } from './errors.js';
import { decodeCursor, encodeCursor, parseMetadataFilter } from './list-query.js';
import { validateEgress } from './network.js';
import type { NetworkRules, SandboxRecord, SandboxStore } from './store/sandboxes.js';
import type { MetricSample, Telemetry } from './store/telemetry.js';
import type { TemplateRecord, TemplateStore } from './store/templates.js';

const SANDBOX_ID = /^[a-z0-9]{1,63}$/;

export interface CreateRequest {
  templateID: string;
  timeout?: number;
  autoPause?: boolean;
  autoPauseMemory?: boolean;
  autoResume?: { enabled: boolean };
  secure?: boolean;
  allow_internet_access?: boolean;
  network?: NetworkRules & { egressProxy?: unknown; rules?: unknown };
  metadata?: Record<string, string>;
  envVars?: Record<string, string>;
  volumeMounts?: Array<{ name: string; path: string }>;
}

export interface ListQuery {
  metadata?: string;
  state?: Array<'running' | 'paused'>;
  order?: 'asc' | 'desc';
  startedAfter?: string;
  template?: string;
  limit?: number;
  nextToken?: string;
}

/** What create, connect and resume answer (the `Sandbox` schema). */
export interface SandboxHandle {
  templateID: string;
  sandboxID: string;
  alias?: string;
  clientID: string;
  envdVersion: string;
  envdAccessToken?: string;
  trafficAccessToken: string | null;
  domain: string | null;
}

const newToken = () => randomBytes(24).toString('base64url');
const iso = (ms: number) => new Date(ms).toISOString();

export class Sandboxes {
  private readonly mutex = new KeyedMutex();
  private expiryTimer: NodeJS.Timeout | undefined;
  private samplerTimer: NodeJS.Timeout | undefined;
  private stopFollowing: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly config: ServerConfig,
    private readonly runtime: Runtime,
    private readonly store: SandboxStore,
    private readonly templates: TemplateStore,
    private readonly telemetry: Telemetry,
  ) {}

  // ---------------------------------------------------------------- helpers

  /** A sandbox clients can see (not killed), or 404. */
  private require(id: string): SandboxRecord {
    const s = SANDBOX_ID.test(id) ? this.store.live(id) : undefined;
    if (!s) throw notFound(`sandbox '${id}' not found`);
    return s;
  }

  private seconds(timeout: number | undefined, field = 'timeout'): number {
    const t = timeout ?? this.config.defaultTimeoutSeconds;
    if (!Number.isInteger(t) || t < 0) throw badRequest(`${field} must be a whole number of seconds, at least 0`);
    if (t > this.config.maxTimeoutSeconds) throw badRequest(`${field} ${t} is longer than the maximum of ${this.config.maxTimeoutSeconds} seconds`);
    return t;
  }

  private handle(s: SandboxRecord): SandboxHandle {
    return {
      templateID: s.templateId,
      sandboxID: s.id,
      ...(s.alias ? { alias: s.alias } : {}),
      clientID: s.id,
      envdVersion: s.envdVersion,
      ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
      trafficAccessToken: s.trafficAccessToken,
      domain: this.config.domain,
    };
  }

  private init(s: SandboxRecord): EnvdInit {
    return { accessToken: s.envdAccessToken ?? undefined, envVars: s.envVars, defaultUser: 'user' };
  }

  private resolveTemplate(ref: string): TemplateRecord {
    const t = this.templates.resolve(ref);
    if (!t) throw notFound(`template '${ref}' not found`);
    return t;
  }

  // ---------------------------------------------------------------- create

  async create(req: CreateRequest): Promise<SandboxHandle> {
    const template = this.resolveTemplate(req.templateID);
    const timeout = this.seconds(req.timeout);
    if (req.volumeMounts?.length) throw badRequest('volumeMounts are not supported by this server');
    const network: NetworkRules = {
      ...(req.network?.allowOut ? { allowOut: validateEgress('allowOut', req.network.allowOut) } : {}),
      ...(req.network?.denyOut ? { denyOut: validateEgress('denyOut', req.network.denyOut) } : {}),
      ...(req.network?.allowPublicTraffic !== undefined ? { allowPublicTraffic: req.network.allowPublicTraffic } : {}),
      ...(req.network?.maskRequestHost ? { maskRequestHost: req.network.maskRequestHost } : {}),
    };
    const secure = req.secure ?? true;
    const accessToken = secure ? newToken() : null;
    const envVars = req.envVars ?? {};
    const build = template.builds[0]!;
    const info = await this.runtime
      .create({
        templateId: template.id,
        init: { accessToken: accessToken ?? undefined, envVars, defaultUser: 'user' },
      })
      .catch((err: unknown) => {
        throw toApiError(err);
      });
    const now = Date.now();
    const record: SandboxRecord = {
      id: info.id,
      templateId: template.id,
      alias: template.names[0] ?? null,
      state: 'running',
      pausedWithMemory: false,
      startedAt: now,
      endAt: now + timeout * 1000,
      endedAt: null,
      cpuCount: info.limits.cpuCount,
      memoryMB: info.limits.memoryMB,
      diskSizeMB: info.limits.diskSizeMB ?? build.diskSizeMB,
      envdVersion,
      metadata: req.metadata ?? {},
      envVars,
      envdAccessToken: accessToken,
      trafficAccessToken: network.allowPublicTraffic === false ? newToken() : null,
      autoPause: req.autoPause ?? false,
      autoPauseMemory: req.autoPauseMemory ?? true,
      autoResume: req.autoResume?.enabled ?? false,
      allowInternetAccess: req.allow_internet_access ?? null,
      network,
    };
    try {
      // The server closed while the sandbox booted: its store may be closed
      // already, and a sandbox it does not record must not stay.
      if (this.closed) throw new ApiError(503, 'the server is shutting down: the sandbox was not kept');
      this.store.insert(record);
    } catch (err) {
      await this.runtime.destroy(info.id).catch(() => undefined);
      throw err;
    }
    this.templates.spawned(template.id);
    this.telemetry.log(record.id, 'info', 'sandbox created', { templateID: template.id, fromPool: String(Boolean(info.fromPool)) });
    this.scheduleExpiry();
    void this.sample(record.id);
    return this.handle(record);
  }

  // ---------------------------------------------------------------- read

  detail(id: string) {
    const s = this.require(id);
    return {
      templateID: s.templateId,
      ...(s.alias ? { alias: s.alias } : {}),
      sandboxID: s.id,
      clientID: s.id,
      startedAt: iso(s.startedAt),
      endAt: iso(s.endAt),
      envdVersion: s.envdVersion,
      ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
      allowInternetAccess: s.allowInternetAccess,
      domain: this.config.domain,
      cpuCount: s.cpuCount,
      memoryMB: s.memoryMB,
      diskSizeMB: s.diskSizeMB,
      metadata: s.metadata,
      state: s.state as 'running' | 'paused',
      network: s.network,
      lifecycle: { autoResume: s.autoResume, onTimeout: s.autoPause ? ('pause' as const) : ('kill' as const) },
      volumeMounts: [],
    };
  }

  private listed(s: SandboxRecord) {
    return {
      templateID: s.templateId,
      ...(s.alias ? { alias: s.alias } : {}),
      sandboxID: s.id,
      clientID: s.id,
      startedAt: iso(s.startedAt),
      endAt: iso(s.endAt),
      cpuCount: s.cpuCount,
      memoryMB: s.memoryMB,
      diskSizeMB: s.diskSizeMB,
      metadata: s.metadata,
      state: s.state as 'running' | 'paused',
      envdVersion: s.envdVersion,
      volumeMounts: [],
    };
  }

  /** GET /v2/sandboxes: one page, and the cursor of the next. */
  list(q: ListQuery) {
    const limit = q.limit ?? 100;
    const startedAfter = q.startedAfter === undefined ? undefined : Date.parse(q.startedAfter);
    if (startedAfter !== undefined && Number.isNaN(startedAfter)) throw badRequest(`startedAfter '${q.startedAfter}' is not a date-time`);
    let templateIds: string[] | undefined;
    if (q.template) {
      const t = this.templates.resolve(q.template);
      templateIds = t ? [t.id] : [];
    }
    const page = this.store.list({
      states: q.state?.length ? q.state : ['running', 'paused'],
      metadata: parseMetadataFilter(q.metadata),
      startedAfter,
      templateIds,
      order: q.order ?? 'desc',
      limit: limit + 1,
      after: decodeCursor(q.nextToken),
    });
    const items = page.slice(0, limit);
    const last = items.at(-1);
    return {
      items: items.map((s) => this.listed(s)),
      nextToken: page.length > limit && last ? encodeCursor({ startedAt: last.startedAt, id: last.id }) : undefined,
      totalRunning: this.store.countRunning(),
    };
  }

  /** GET /sandboxes (legacy): every running sandbox. */
  listRunning(metadata?: string) {
    const filter = parseMetadataFilter(metadata);
    return this.store
      .running()
      .filter((s) => Object.entries(filter ?? {}).every(([k, v]) => s.metadata[k] === v))
      .sort((a, b) => b.startedAt - a.startedAt)
      .map((s) => this.listed(s));
  }

  // ---------------------------------------------------------------- lifecycle

  kill(id: string): Promise<void> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      // Recorded first: should the removal fail half-way, the next start
      // removes what is left of a sandbox the store calls killed.
      this.store.setState(s.id, 'killed');
      this.telemetry.log(s.id, 'info', 'sandbox killed');
      await this.runtime.destroy(s.id).catch((err: unknown) => {
        throw toApiError(err);
      });
      this.scheduleExpiry();
    });
  }

  pause(id: string, memory = true): Promise<void> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      if (s.state !== 'running') throw conflict(`sandbox '${id}' is ${s.state}, not running`);
      await this.doPause(s, memory);
    });
  }

  private async doPause(s: SandboxRecord, memory: boolean): Promise<void> {
    try {
      if (memory) await this.runtime.pause(s.id);
      else await this.runtime.stop(s.id);
    } catch (err) {
      throw toApiError(err);
    }
    this.store.setState(s.id, 'paused', memory);
    this.telemetry.log(s.id, 'info', memory ? 'sandbox paused with its memory' : 'sandbox paused (filesystem only)');
    this.scheduleExpiry();
  }

  /**
   * Connect: a running sandbox only ever gets a later expiry; a paused one is
   * resumed. `resumed` tells which (201 vs 200).
   */
  connect(id: string, timeout: number | undefined, memory = true): Promise<{ sandbox: SandboxHandle; resumed: boolean }> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      if (s.state === 'running') {
        if (timeout !== undefined) this.extend(s, this.seconds(timeout));
        return { sandbox: this.handle(this.store.get(id)!), resumed: false };
      }
      await this.doResume(s, this.seconds(timeout), memory);
      return { sandbox: this.handle(this.store.get(id)!), resumed: true };
    });
  }

  /** Legacy resume: 409 when the sandbox is already running. */
  resume(id: string, timeout: number | undefined): Promise<SandboxHandle> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      if (s.state !== 'paused') throw conflict(`sandbox '${id}' is ${s.state}, not paused`);
      await this.doResume(s, this.seconds(timeout), true);
      return this.handle(this.store.get(id)!);
    });
  }

  private async doResume(s: SandboxRecord, timeoutSeconds: number, memory: boolean): Promise<void> {
    try {
      const status = (await this.runtime.get(s.id))?.status;
      if (status === undefined) throw new ApiError(404, `sandbox '${s.id}' no longer exists on this host`);
      if (status === 'paused' && memory) await this.runtime.resume(s.id);
      else {
        if (status !== 'stopped') await this.runtime.stop(s.id);
        await this.runtime.start(s.id, this.init(s));
      }
    } catch (err) {
      throw toApiError(err);
    }
    this.store.setState(s.id, 'running');
    this.extend({ ...s, endAt: Math.max(s.endAt, Date.now()) }, timeoutSeconds);
    this.telemetry.log(s.id, 'info', 'sandbox resumed');
  }

  /** Moves the expiry to now + `seconds` unless it is already later. */
  private extend(s: SandboxRecord, seconds: number): void {
    const endAt = Math.max(s.endAt, Date.now() + seconds * 1000);
    this.store.setEndAt(s.id, endAt);
    this.scheduleExpiry();
  }

  /** POST /timeout: expiry = now + seconds, sooner or later than before. */
  setTimeout(id: string, timeout: number): Promise<void> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      this.store.setEndAt(s.id, Date.now() + this.seconds(timeout) * 1000);
      this.scheduleExpiry();
    });
  }

  refresh(id: string, duration: number | undefined): Promise<void> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      this.extend(s, this.seconds(duration, 'duration'));
    });
  }

  updateNetwork(id: string, body: { allowOut?: string[]; denyOut?: string[]; allow_internet_access?: boolean }): Promise<void> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      // An update replaces the whole configuration, as E2B's does: what it
      // leaves out is cleared, and internet access goes back to the default.
      const network: NetworkRules = {};
      if (body.allowOut !== undefined) network.allowOut = validateEgress('allowOut', body.allowOut);
      if (body.denyOut !== undefined) network.denyOut = validateEgress('denyOut', body.denyOut);
      this.store.setNetwork(s.id, network, body.allow_internet_access ?? null);
      this.telemetry.log(s.id, 'info', 'network rules updated', { allowOut: (network.allowOut ?? []).join(','), denyOut: (network.denyOut ?? []).join(',') });
    });
  }

  // ---------------------------------------------------------------- expiry

  /** Arms one timer for the earliest expiry of a running sandbox. */
  scheduleExpiry(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    if (this.closed) return;
    const next = this.store.nextExpiry();
    if (next === undefined) return;
    const delay = Math.min(Math.max(0, next - Date.now()), 2 ** 31 - 1);
    this.expiryTimer = setTimeout(() => void this.expireDue(), delay);
    this.expiryTimer.unref();
  }

  /** Kills (or pauses, with autoPause) every running sandbox past its expiry. */
  async expireDue(): Promise<void> {
    for (const s of this.store.expired(Date.now())) {
      await this.mutex
        .run(s.id, async () => {
          const now = this.store.get(s.id);
          if (!now || now.state !== 'running' || now.endAt > Date.now()) return;
          if (now.autoPause) {
            await this.doPause(now, now.autoPauseMemory);
            this.telemetry.log(s.id, 'info', 'sandbox paused at its expiry');
          } else {
            this.store.setState(now.id, 'killed');
            this.telemetry.log(s.id, 'info', 'sandbox killed at its expiry');
            await this.runtime.destroy(now.id);
          }
        })
        .catch((err: unknown) => this.telemetry.log(s.id, 'error', `expiry failed: ${(err as Error).message}`));
    }
    this.scheduleExpiry();
  }

  // ---------------------------------------------------------------- metrics

  private async sample(id: string): Promise<void> {
    try {
      const st = await this.runtime.stats(id);
      this.telemetry.addSample(id, {
        ts: st.timestamp.getTime(),
        cpuCount: st.cpuCount,
        cpuUsedPct: st.cpuUsedPct,
        memUsed: st.memUsed,
        memTotal: st.memTotal,
        memCache: st.memCache,
        diskUsed: st.diskUsed,
        diskTotal: st.diskTotal,
      });
    } catch {
      // The sandbox went away between listing and sampling.
    }
  }

  /** Samples every running sandbox now and then at the configured interval; drops old data. */
  startSampling(): void {
    const tick = async () => {
      for (const s of this.store.running()) await this.sample(s.id);
      const before = Date.now() - this.config.retentionMs;
      this.telemetry.purge(before);
      this.store.purgeKilled(before);
    };
    void tick();
    this.samplerTimer = setInterval(() => void tick(), this.config.metricsIntervalMs);
    this.samplerTimer.unref();
  }

  private metric(s: MetricSample) {
    return {
      timestamp: iso(s.ts),
      timestampUnix: Math.floor(s.ts / 1000),
      cpuCount: s.cpuCount,
      cpuUsedPct: s.cpuUsedPct,
      memUsed: s.memUsed,
      memTotal: s.memTotal,
      memCache: s.memCache,
      diskUsed: s.diskUsed,
      diskTotal: s.diskTotal,
    };
  }

  metrics(id: string, start?: number, end?: number) {
    if (!SANDBOX_ID.test(id) || !this.store.get(id)) throw notFound(`sandbox '${id}' not found`);
    if (start !== undefined && end !== undefined && start > end) throw badRequest(`start ${start} is after end ${end}`);
    const from = start === undefined ? 0 : start * 1000;
    const to = end === undefined ? Date.now() : end * 1000 + 999;
    return this.telemetry.samples(id, from, to).map((m) => this.metric(m));
  }

  latestMetrics(ids: string[]) {
    const out: Record<string, ReturnType<Sandboxes['metric']>> = {};
    for (const id of ids) {
      const m = SANDBOX_ID.test(id) ? this.telemetry.latest(id) : undefined;
      if (m) out[id] = this.metric(m);
    }
    return { sandboxes: out };
  }

  logs(id: string, q: { start?: number; limit?: number }) {
    if (!SANDBOX_ID.test(id) || !this.store.get(id)) throw notFound(`sandbox '${id}' not found`);
    const entries = this.telemetry.logs(id, { fromTs: q.start, limit: q.limit ?? 1000, direction: 'forward' });
    return {
      logs: entries.map((e) => ({ timestamp: iso(e.ts), line: e.message })),
      logEntries: entries.map((e) => ({ timestamp: iso(e.ts), message: e.message, level: e.level, fields: e.fields })),
    };
  }

  logsV2(id: string, q: { cursor?: number; limit?: number; direction?: 'forward' | 'backward'; level?: 'debug' | 'info' | 'warn' | 'error'; search?: string }) {
    if (!SANDBOX_ID.test(id) || !this.store.get(id)) throw notFound(`sandbox '${id}' not found`);
    const order = ['debug', 'info', 'warn', 'error'];
    const levels = q.level ? order.slice(order.indexOf(q.level)) : undefined;
    const entries = this.telemetry.logs(id, { fromTs: q.cursor, limit: q.limit ?? 1000, direction: q.direction ?? 'forward', levels, search: q.search });
    return { logs: entries.map((e) => ({ timestamp: iso(e.ts), message: e.message, level: e.level, fields: e.fields })) };
  }

  // ---------------------------------------------------------------- snapshots and forks

  /** Copies the sandbox's filesystem into a new template. */
  snapshot(id: string, name: string | undefined): Promise<TemplateRecord> {
    return this.mutex.run(id, async () => {
      const s = this.require(id);
      if (name !== undefined && (!/^[a-z0-9][a-z0-9._/-]{0,127}$/i.test(name) || name.includes(':'))) {
        throw badRequest(`snapshot name '${name}' may use letters, digits, '.', '_', '-' and '/', up to 128 characters`);
      }
      if (name !== undefined && this.templates.nameTaken(name)) throw conflict(`the name '${name}' is already taken`);
      const templateId = `snap${randomBytes(10).toString('hex')}`;
      const info = await this.runtime.snapshot(s.id, templateId).catch((err: unknown) => {
        throw toApiError(err);
      });
      this.telemetry.log(s.id, 'info', 'snapshot taken', { snapshotID: templateId });
      return this.templates.insert({
        id: templateId,
        kind: 'snapshot',
        public: false,
        names: name ? [name] : [],
        sourceSandboxId: s.id,
        cpuCount: info.limits.cpuCount,
        memoryMB: info.limits.memoryMB,
        diskSizeMB: info.limits.diskSizeMB,
        envdVersion,
      });
    });
  }

  /**
   * Fork: a snapshot of the sandbox's filesystem, then `count` new sandboxes
   * from it. Processes and memory are not copied.
   */
  async fork(id: string, count = 1, timeout?: number): Promise<Array<{ sandbox?: SandboxHandle; error?: { code: number; message: string } }>> {
    const source = this.require(id);
    this.seconds(timeout);
    const template = await this.snapshot(source.id, undefined);
    const results: Array<{ sandbox?: SandboxHandle; error?: { code: number; message: string } }> = [];
    for (let i = 0; i < count; i++) {
      try {
        results.push({
          sandbox: await this.create({
            templateID: template.id,
            timeout,
            metadata: source.metadata,
            envVars: source.envVars,
            secure: source.envdAccessToken !== null,
            autoPause: source.autoPause,
            autoPauseMemory: source.autoPauseMemory,
            autoResume: { enabled: source.autoResume },
          }),
        });
      } catch (err) {
        const e = toApiError(err);
        results.push({ error: { code: e.status, message: e.message } });
      }
    }
    return results;
  }

  // ---------------------------------------------------------------- startup

  /**
   * Makes the store and the runtime agree after a start: sandboxes that run
   * are adopted, those the runtime lost are marked, strays are removed, and
   * the expired are ended.
   */
  async reconcile(): Promise<{ adopted: number; lost: number; removed: number }> {
    const onHost = new Map((await this.runtime.list()).map((s) => [s.id, s]));
    let adopted = 0;
    let lost = 0;
    let removed = 0;
    for (const s of this.store.allLive()) {
      const h = onHost.get(s.id);
      onHost.delete(s.id);
      if (!h) {
        this.store.setState(s.id, 'killed');
        this.telemetry.log(s.id, 'warn', 'sandbox vanished from the host while the server was down');
        lost++;
      } else if (s.state === 'running' && h.status !== 'running') {
        // Its processes are gone (a host restart) or it is frozen: it keeps
        // its files and can be resumed.
        this.store.setState(s.id, 'paused', h.status === 'paused');
        this.telemetry.log(s.id, 'warn', `sandbox found ${h.status} after a restart; marked paused`);
        lost++;
      } else if (s.state === 'paused' && h.status === 'running') {
        await this.runtime.pause(s.id).catch(() => undefined);
        adopted++;
      } else {
        adopted++;
      }
    }
    // On the host but unknown to the store: created while the server died.
    for (const id of onHost.keys()) {
      await this.runtime.destroy(id).catch(() => undefined);
      removed++;
    }
    await this.expireDue();
    return { adopted, lost, removed };
  }

  /**
   * From now on, a sandbox that the runtime finds ended by itself (its init
   * exited) is recorded as a restart would find it: paused, its files kept,
   * so that connect and resume start it again.
   */
  followRuntime(): void {
    this.stopFollowing ??= this.runtime.onExit((id) => void this.exited(id));
  }

  private exited(id: string): Promise<void> {
    return this.mutex
      .run(id, async () => {
        const s = this.store.get(id);
        if (!s || s.state !== 'running') return;
        this.store.setState(id, 'paused', false);
        this.telemetry.log(id, 'warn', 'sandbox stopped by itself (its init exited); marked paused, its files kept');
        this.scheduleExpiry();
      })
      .catch((err: unknown) => this.telemetry.log(id, 'error', `recording the sandbox's end failed: ${(err as Error).message}`));
  }

  close(): void {
    this.closed = true;
    this.stopFollowing?.();
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    if (this.samplerTimer) clearInterval(this.samplerTimer);
  }
}
