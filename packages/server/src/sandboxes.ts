// Sandbox lifecycle as the control API presents it, on top of the runtime:
// create, connect/resume, pause, kill, timeouts and expiry, metrics, logs,
// snapshots and forks. Every state change is written to the store before
// it is answered. Operations on one sandbox in this process queue one behind
// another; the sandbox repository refuses a change another process has
// under way or that the state no longer allows.
import { randomBytes } from 'node:crypto';
import { KeyedMutex, envdVersion, type EnvdInit, type Runtime } from '@paddock/runtime';
import { isSandboxId } from '@paddock/protocol';
import type { ServerConfig } from './config.js';
import { logOf, type Logger } from './log.js';
import { RateLimiter } from './rate-limit.js';
import { Admission } from './admission.js';
import { scopeOf, type Caller } from './auth.js';
import type { Metrics } from './metrics.js';
import { ApiError, badRequest, conflict, errorBody, notFound, toApiError } from './errors.js';
import { parseMetadataFilter } from './metadata-filter.js';
import { validateEgress, validateMaskRequestHost } from './network.js';
import { SandboxShell, startAndWaitReady } from './builds/sandbox-commands.js';
import type { Templates } from './templates.js';
import { readPage } from './pagination.js';
import {
  StoreError,
  inScope,
  type MetricSample,
  type NetworkRules,
  type Repositories,
  type SandboxClaim,
  type SandboxRecord,
  type SandboxRepository,
  type BuildRecord,
  type TelemetryRepository,
  type TemplateRecord,
  type TemplateRepository,
} from './store/repositories.js';

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

/** Whether the repository refused a change because the sandbox is no longer as it was listed. */
const refused = (err: unknown) => err instanceof StoreError;

/** How long after its create a sandbox is first sampled (sampleSoon). */
const FIRST_SAMPLE_DELAY_MS = 100;
/** Events after which a sandbox no longer runs on this server. */
const LEAVING = new Set(['killed', 'paused', 'expired_paused', 'expired_killed', 'lost', 'marked_paused', 'oom_killed', 'exited']);

export class Sandboxes {
  private readonly mutex = new KeyedMutex();
  private readonly records: SandboxRepository;
  private readonly templates: TemplateRepository;
  private readonly telemetry: TelemetryRepository;
  private expiryTimer: NodeJS.Timeout | undefined;
  /** Calls of scheduleExpiry so far; only the latest arms the timer. */
  private expiryCalls = 0;
  private samplerTimer: NodeJS.Timeout | undefined;
  private stopFollowing: (() => void) | undefined;
  private closed = false;
  private readonly createLimiter: RateLimiter;
  /** Out-of-memory kills in each running sandbox as last sampled; more at the next sample are an event. */
  private readonly oomSeen = new Map<string, number>();
  private readonly admission: Admission;
  private readonly leaveListeners = new Set<(id: string) => void>();

  constructor(
    private readonly config: ServerConfig,
    private readonly runtime: Runtime,
    repositories: Pick<Repositories, 'sandboxes' | 'templates' | 'telemetry' | 'teams'>,
    private readonly templateApi: Pick<Templates, 'startable'>,
    private readonly observe: { log: Logger; metrics: Metrics },
  ) {
    this.records = repositories.sandboxes;
    this.templates = repositories.templates;
    this.telemetry = repositories.telemetry;
    this.createLimiter = new RateLimiter(config.createRate, config.createBurst);
    this.admission = new Admission(config.maxSandboxesPerKey, repositories.sandboxes, repositories.teams);
  }

  /**
   * Calls `listener` with a sandbox's id each time it stops running here
   * (paused, killed, expired, exited), as the change is recorded: the proxy
   * lets go of the connections it keeps into it.
   */
  onLeave(listener: (id: string) => void): () => void {
    this.leaveListeners.add(listener);
    return () => this.leaveListeners.delete(listener);
  }

  // ---------------------------------------------------------------- helpers

  /**
   * A sandbox the caller can see (not killed, of its team), or 404: another
   * team's is answered exactly as one that does not exist.
   */
  private async require(caller: Caller, id: string): Promise<SandboxRecord> {
    const s = isSandboxId(id) ? await this.records.live(id) : undefined;
    if (!s || !inScope(scopeOf(caller), s.teamId)) throw notFound(`sandbox '${id}' not found`);
    return s;
  }

  /** A sandbox of the caller's team in any state, killed included (its metrics and logs stay readable), or 404. */
  private async requireAny(caller: Caller, id: string): Promise<SandboxRecord> {
    const s = isSandboxId(id) ? await this.records.get(id) : undefined;
    if (!s || !inScope(scopeOf(caller), s.teamId)) throw notFound(`sandbox '${id}' not found`);
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
    // The default user is the template's (envd has it from the runtime).
    return { accessToken: s.envdAccessToken ?? undefined, envVars: s.envVars };
  }

  /**
   * Runs the start command of the build a sandbox was made from and waits
   * for its ready command; a sandbox that does not get ready is removed.
   */
  private async startCommands(id: string, build: Pick<BuildRecord, 'startCmd' | 'readyCmd'>, accessToken: string | null): Promise<void> {
    if (!build.startCmd && !build.readyCmd) return;
    const shell = new SandboxShell(this.runtime.envdEndpoint(id), accessToken ?? undefined);
    try {
      await startAndWaitReady(shell, build, { timeoutMs: this.config.readyTimeoutMs });
    } catch (err) {
      throw new ApiError(503, `sandbox '${id}' did not get ready: ${(err as Error).message}`);
    } finally {
      await shell.close().catch(() => undefined);
    }
  }

  /** A failure of background work (expiry, sampling) that no request answers. */
  private report(what: string, err: unknown): void {
    if (!this.closed) this.observe.log.error({ err }, `${what} failed`);
  }

  /**
   * An event of a sandbox's life: kept with the sandbox (its logs route)
   * and written to the server's log, with the id of the request that
   * caused it, if one did.
   */
  private async event(id: string, kind: string, level: 'info' | 'warn' | 'error', message: string, fields: Record<string, string> = {}): Promise<void> {
    if (LEAVING.has(kind)) for (const listener of this.leaveListeners) listener(id);
    logOf(this.observe.log)[level]({ sandboxID: id, event: kind, ...fields }, message);
    this.observe.metrics.lifecycle.inc({ event: kind });
    await this.telemetry.log(id, level, message, { event: kind, ...fields });
  }

  // ---------------------------------------------------------------- create

  /**
   * Makes a sandbox of the caller's team (a fork: of its source's team,
   * `teamId`); the key that asked is held to the per-key limits and
   * recorded, the team to its limits.
   */
  async create(caller: Caller, req: CreateRequest, teamId = caller.teamId): Promise<SandboxHandle> {
    const { metrics } = this.observe;
    const started = performance.now();
    try {
      if (teamId === null) throw new ApiError(403, 'the admin credential belongs to no team and makes no sandboxes; use an API key of a team');
      const keyId = caller.admin ? null : caller.keyId;
      if (keyId !== null) this.limitRate(keyId);
      const start = await this.templateApi.startable(req.templateID, { scope: { teamId }, publicToo: true });
      const demand = { teamId, ...(keyId !== null ? { keyId } : {}), memoryMB: start.build.memoryMB, diskMB: start.build.diskSizeMB };
      const { handle, fromPool } = await this.admission.admit(demand, () => this.createSandbox(req, start, keyId, teamId));
      const pool = fromPool ? 'warm' : 'cold';
      metrics.creates.inc({ pool, result: 'ok' });
      metrics.createSeconds.observe({ pool }, (performance.now() - started) / 1000);
      if (!fromPool) metrics.poolMisses.inc();
      return handle;
    } catch (err) {
      metrics.creates.inc({ pool: 'none', result: err instanceof ApiError && err.status < 500 ? 'refused' : 'failed' });
      throw err;
    }
  }

  /** Refuses a create beyond the key's rate (429 with Retry-After). */
  private limitRate(apiKeyId: string): void {
    const wait = this.createLimiter.take(apiKeyId);
    if (wait > 0) {
      const seconds = Math.ceil(wait / 1000);
      throw new ApiError(429, `API key '${apiKeyId}' creates sandboxes faster than this server allows (${this.config.createRate} a second, PADDOCK_CREATE_RATE); retry in ${seconds} s`, {
        'retry-after': String(seconds),
      });
    }
  }

  private async createSandbox(
    req: CreateRequest,
    { template, build, runtimeTemplateId }: Awaited<ReturnType<Templates['startable']>>,
    apiKeyId: string | null,
    teamId: string,
  ): Promise<{ handle: SandboxHandle; fromPool: boolean }> {
    const timeout = this.seconds(req.timeout);
    if (req.volumeMounts?.length) throw badRequest('volumeMounts are not supported by this server');
    const max = this.config.maxNetworkRules;
    const network: NetworkRules = {
      ...(req.network?.allowOut ? { allowOut: validateEgress('allowOut', req.network.allowOut, max) } : {}),
      ...(req.network?.denyOut ? { denyOut: validateEgress('denyOut', req.network.denyOut, max) } : {}),
      ...(req.network?.allowPublicTraffic !== undefined ? { allowPublicTraffic: req.network.allowPublicTraffic } : {}),
      ...(req.network?.maskRequestHost !== undefined ? { maskRequestHost: validateMaskRequestHost(req.network.maskRequestHost) } : {}),
    };
    const secure = req.secure ?? true;
    const accessToken = secure ? newToken() : null;
    const envVars = req.envVars ?? {};
    const info = await this.runtime
      .create({
        templateId: runtimeTemplateId,
        init: { accessToken: accessToken ?? undefined, envVars },
        network: { allowInternet: req.allow_internet_access ?? true, allowOut: network.allowOut, denyOut: network.denyOut },
      })
      .catch((err: unknown) => {
        throw toApiError(err);
      });
    const now = Date.now();
    let record: SandboxRecord;
    try {
      // The server closed while the sandbox booted: its store may be closed
      // already, and a sandbox it does not record must not stay.
      if (this.closed) throw new ApiError(503, 'the server is shutting down: the sandbox was not kept');
      record = await this.records.insert({
        id: info.id,
        templateId: template.id,
        alias: template.names[0] ?? null,
        startedAt: now,
        endAt: now + timeout * 1000,
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
        buildId: build.id,
        apiKeyId,
        teamId,
      });
      // One from the warm pool ran them before it was pooled (WarmPoolPlan).
      if (!info.fromPool) await this.startCommands(info.id, build, accessToken);
    } catch (err) {
      await this.runtime.destroy(info.id).catch(() => undefined);
      if (record!) await this.records.transition(info.id, 'killed').catch(() => undefined);
      throw err;
    }
    await this.templates.recordSpawn(template.id);
    await this.event(record.id, 'created', 'info', 'sandbox created', { templateID: template.id, fromPool: String(Boolean(info.fromPool)) });
    this.scheduleExpiry();
    this.sampleSoon(record.id);
    return { handle: this.handle(record), fromPool: Boolean(info.fromPool) };
  }

  // ---------------------------------------------------------------- read

  /** GET /sandboxes/{id}: what a listing says of it, and how to reach it and what it may do. */
  async detail(caller: Caller, id: string) {
    const s = await this.require(caller, id);
    return {
      ...this.listed(s),
      ...(s.envdAccessToken ? { envdAccessToken: s.envdAccessToken } : {}),
      allowInternetAccess: s.allowInternetAccess,
      domain: this.config.domain,
      network: s.network,
      lifecycle: { autoResume: s.autoResume, onTimeout: s.autoPause ? ('pause' as const) : ('kill' as const) },
    };
  }

  /** What a listing (GET /v2/sandboxes) says of a sandbox. */
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

  /** GET /v2/sandboxes: one page, and the number running. */
  async list(caller: Caller, q: ListQuery) {
    const scope = scopeOf(caller);
    const startedAfter = q.startedAfter === undefined ? undefined : Date.parse(q.startedAfter);
    if (startedAfter !== undefined && Number.isNaN(startedAfter)) throw badRequest(`startedAfter '${q.startedAfter}' is not a date-time`);
    let templateIds: string[] | undefined;
    if (q.template) {
      const t = await this.templates.resolve(q.template, { scope, publicToo: true });
      templateIds = t ? [t.id] : [];
    }
    const metadata = parseMetadataFilter(q.metadata);
    const page = await readPage(
      q,
      (window) =>
        this.records.list({
          ...window,
          scope,
          states: q.state?.length ? q.state : ['running', 'paused'],
          metadata,
          startedAfter,
          templateIds,
          order: q.order ?? 'desc',
        }),
      (s) => ({ key: s.startedAt, id: s.id }),
    );
    return { items: page.items.map((s) => this.listed(s)), nextToken: page.nextToken, totalRunning: await this.records.countRunning(scope) };
  }

  /** GET /sandboxes (legacy): every running sandbox. */
  async listRunning(caller: Caller, metadata?: string) {
    const filter = parseMetadataFilter(metadata);
    const scope = scopeOf(caller);
    return (await this.records.running())
      .filter((s) => inScope(scope, s.teamId))
      .filter((s) => Object.entries(filter ?? {}).every(([k, v]) => s.metadata[k] === v))
      .sort((a, b) => b.startedAt - a.startedAt)
      .map((s) => this.listed(s));
  }

  // ---------------------------------------------------------------- lifecycle

  kill(caller: Caller, id: string): Promise<void> {
    return this.mutex.run(id, async () => {
      await this.require(caller, id);
      // Recorded first: should the removal fail half-way, the next start
      // removes what is left of a sandbox the store calls killed.
      await this.records.transition(id, 'killed');
      await this.event(id, 'killed', 'info', 'sandbox killed');
      await this.runtime.destroy(id).catch((err: unknown) => {
        throw toApiError(err);
      });
      this.scheduleExpiry();
    });
  }

  pause(caller: Caller, id: string, memory = true): Promise<void> {
    return this.mutex.run(id, async () => {
      await this.require(caller, id);
      await this.doPause(await this.records.claim(id, 'paused'), memory);
    });
  }

  private async doPause(claim: SandboxClaim, memory: boolean): Promise<void> {
    const id = claim.record.id;
    try {
      if (memory) await this.runtime.pause(id);
      else await this.runtime.stop(id);
    } catch (err) {
      await claim.abandon();
      throw toApiError(err);
    }
    await claim.complete({ pausedWithMemory: memory });
    await this.event(id, 'paused', 'info', memory ? 'sandbox paused with its memory' : 'sandbox paused (filesystem only)');
    this.scheduleExpiry();
  }

  /**
   * Connect: a running sandbox only ever gets a later expiry; a paused one is
   * resumed. `resumed` tells which (201 vs 200).
   */
  connect(caller: Caller, id: string, timeout: number | undefined, memory = true): Promise<{ sandbox: SandboxHandle; resumed: boolean }> {
    return this.mutex.run(id, async () => {
      const s = await this.require(caller, id);
      if (s.state === 'running') {
        const now = timeout === undefined ? s : await this.extend(id, this.seconds(timeout));
        return { sandbox: this.handle(now), resumed: false };
      }
      const seconds = this.seconds(timeout);
      return { sandbox: this.handle(await this.resumeAdmitted(s, seconds, memory)), resumed: true };
    });
  }

  /** Legacy resume: 409 when the sandbox is already running. */
  resume(caller: Caller, id: string, timeout: number | undefined): Promise<SandboxHandle> {
    return this.mutex.run(id, async () => {
      const s = await this.require(caller, id);
      const seconds = this.seconds(timeout);
      // A running one is refused by the claim (409) before its team's limits are asked.
      if (s.state === 'running' || s.pendingChange) return this.handle(await this.doResume(await this.records.claim(id, 'running'), seconds, true));
      return this.handle(await this.resumeAdmitted(s, seconds, true));
    });
  }

  /** Resumes a paused sandbox if its team's limits leave room for it. */
  private resumeAdmitted(s: SandboxRecord, seconds: number, memory: boolean): Promise<SandboxRecord> {
    return this.admission.admit({ teamId: s.teamId, memoryMB: s.memoryMB, diskMB: s.diskSizeMB }, async () =>
      this.doResume(await this.records.claim(s.id, 'running'), seconds, memory),
    );
  }

  private async doResume(claim: SandboxClaim, timeoutSeconds: number, memory: boolean): Promise<SandboxRecord> {
    const s = claim.record;
    try {
      const status = (await this.runtime.get(s.id))?.status;
      if (status === undefined) throw new ApiError(404, `sandbox '${s.id}' no longer exists on this host`);
      if (status === 'paused' && memory) await this.runtime.resume(s.id);
      else {
        if (status !== 'stopped') await this.runtime.stop(s.id);
        await this.runtime.start(s.id, this.init(s));
        // A new boot: the start command of the build it was made from runs again.
        const build = s.buildId ? (await this.templates.get(s.templateId))?.builds.find((b) => b.id === s.buildId) : undefined;
        if (build) await this.startCommands(s.id, build, s.envdAccessToken);
      }
    } catch (err) {
      await claim.abandon();
      throw toApiError(err);
    }
    const resumed = await claim.complete({ extendTo: Date.now() + timeoutSeconds * 1000 });
    this.scheduleExpiry();
    await this.event(s.id, 'resumed', 'info', 'sandbox resumed');
    return resumed;
  }

  /** Moves the expiry to now + `seconds` unless it is already later. */
  private async extend(id: string, seconds: number): Promise<SandboxRecord> {
    const s = await this.records.update(id, (now) => ({ endAt: Math.max(now.endAt, Date.now() + seconds * 1000) }));
    this.scheduleExpiry();
    return s;
  }

  /** POST /timeout: expiry = now + seconds, sooner or later than before. */
  setTimeout(caller: Caller, id: string, timeout: number): Promise<void> {
    return this.mutex.run(id, async () => {
      await this.require(caller, id);
      const seconds = this.seconds(timeout);
      await this.records.update(id, () => ({ endAt: Date.now() + seconds * 1000 }));
      this.scheduleExpiry();
    });
  }

  refresh(caller: Caller, id: string, duration: number | undefined): Promise<void> {
    return this.mutex.run(id, async () => {
      await this.require(caller, id);
      await this.extend(id, this.seconds(duration, 'duration'));
    });
  }

  updateNetwork(caller: Caller, id: string, body: { allowOut?: string[]; denyOut?: string[]; allow_internet_access?: boolean }): Promise<void> {
    return this.mutex.run(id, async () => {
      // An update replaces the whole egress configuration, as E2B's does:
      // what it leaves out is cleared, and internet access goes back to the
      // default. What the proxy does with public traffic stays.
      const record = await this.require(caller, id);
      const max = this.config.maxNetworkRules;
      const network: NetworkRules = { ...(record.network.allowPublicTraffic !== undefined ? { allowPublicTraffic: record.network.allowPublicTraffic } : {}), ...(record.network.maskRequestHost ? { maskRequestHost: record.network.maskRequestHost } : {}) };
      if (body.allowOut !== undefined) network.allowOut = validateEgress('allowOut', body.allowOut, max);
      if (body.denyOut !== undefined) network.denyOut = validateEgress('denyOut', body.denyOut, max);
      // In force before it is recorded: a refused change leaves both as they were.
      await this.runtime.updateNetwork(id, { allowInternet: body.allow_internet_access ?? true, allowOut: network.allowOut, denyOut: network.denyOut }).catch((err: unknown) => {
        throw toApiError(err);
      });
      await this.records.update(id, () => ({ network, allowInternetAccess: body.allow_internet_access ?? null }));
      await this.event(id, 'network_updated', 'info', 'network rules updated', { allowOut: (network.allowOut ?? []).join(','), denyOut: (network.denyOut ?? []).join(',') });
    });
  }

  // ---------------------------------------------------------------- expiry

  /** Arms one timer for the earliest expiry of a running sandbox. */
  scheduleExpiry(): void {
    const call = ++this.expiryCalls;
    if (this.closed) return;
    this.records
      .nextExpiry()
      .then((next) => {
        // A later call read a later state of the store.
        if (call !== this.expiryCalls || this.closed) return;
        if (this.expiryTimer) clearTimeout(this.expiryTimer);
        this.expiryTimer = undefined;
        if (next === undefined) return;
        const delay = Math.min(Math.max(0, next - Date.now()), 2 ** 31 - 1);
        this.expiryTimer = setTimeout(() => void this.expireDue().catch((err: unknown) => this.report('expiring sandboxes', err)), delay);
        this.expiryTimer.unref();
      })
      .catch((err: unknown) => this.report('arming the expiry timer', err));
  }

  /** Kills (or pauses, with autoPause) every running sandbox past its expiry. */
  async expireDue(): Promise<void> {
    for (const s of await this.records.expired(Date.now())) {
      await this.mutex
        .run(s.id, async () => {
          // Refused when the sandbox changed since it was listed: extended,
          // paused or killed by a request, here or in another process.
          const now = Date.now();
          if (s.autoPause) {
            const claim = await this.records.claim(s.id, 'paused', { expiredBy: now });
            await this.doPause(claim, s.autoPauseMemory);
            await this.event(s.id, 'expired_paused', 'info', 'sandbox paused at its expiry');
          } else {
            await this.records.transition(s.id, 'killed', { expiredBy: now });
            await this.event(s.id, 'expired_killed', 'info', 'sandbox killed at its expiry');
            await this.runtime.destroy(s.id);
          }
        })
        .catch(async (err: unknown) => {
          if (!refused(err)) await this.event(s.id, 'expiry_failed', 'error', `expiry failed: ${(err as Error).message}`);
        });
    }
    this.scheduleExpiry();
  }

  // ---------------------------------------------------------------- metrics

  private async sample(id: string): Promise<void> {
    let st;
    try {
      st = await this.runtime.stats(id);
    } catch {
      // Mostly a sandbox that went away between listing and sampling.
      this.observe.metrics.sampleFailures.inc();
      return;
    }
    const seen = this.oomSeen.get(id) ?? (await this.oomKillsRecorded(id));
    this.oomSeen.set(id, st.oomKills);
    if (st.oomKills > seen) {
      const n = st.oomKills - seen;
      await this.event(id, 'oom_kill', 'warn', `the kernel killed ${n} process${n === 1 ? '' : 'es'} in the sandbox for want of memory (its limit is ${Math.round(st.memTotal / 1024 ** 2)} MiB)`, {
        oomKills: String(st.oomKills),
      }).catch((err: unknown) => this.report(`recording an out-of-memory kill in sandbox '${id}'`, err));
    }
    await this.telemetry
      .addSample(id, {
        ts: st.timestamp.getTime(),
        cpuCount: st.cpuCount,
        cpuUsedPct: st.cpuUsedPct,
        memUsed: st.memUsed,
        memTotal: st.memTotal,
        memCache: st.memCache,
        diskUsed: st.diskUsed,
        diskTotal: st.diskTotal,
      })
      .catch((err: unknown) => this.report(`recording a sample of sandbox '${id}'`, err));
  }

  /**
   * The out-of-memory kill count last reported for the container that runs
   * now, from its lifecycle log: what a server that restarted reported
   * before it. The count is the container's cgroup's, which starts at 0 with
   * each start, so a report from before the latest start does not count.
   */
  private async oomKillsRecorded(id: string): Promise<number> {
    const entries = await this.telemetry.logs(id, { limit: 200, direction: 'backward' }).catch(() => []);
    for (const e of entries) {
      if (e.fields.event === 'oom_kill') return Number(e.fields.oomKills) || 0;
      if (e.fields.event === 'created' || e.fields.event === 'resumed') return 0;
    }
    return 0;
  }

  /**
   * Takes a new sandbox's first sample a moment after its create: not on
   * the way of the create's answer (reading the cgroup, the disk and the
   * spec took ~0.6 ms of a warm create's ~5) nor of its owner's first
   * command. Not for one that left meanwhile.
   */
  private sampleSoon(id: string): void {
    setTimeout(() => {
      if (this.closed) return;
      void this.records
        .get(id)
        .then((s) => (s?.state === 'running' && !this.closed ? this.sample(id) : undefined))
        .catch((err: unknown) => this.report(`sampling sandbox '${id}'`, err));
    }, FIRST_SAMPLE_DELAY_MS).unref();
  }

  /** Samples every running sandbox now and then at the configured interval; drops old data. */
  startSampling(): void {
    const tick = async () => {
      for (const s of await this.records.running()) await this.sample(s.id);
      const before = Date.now() - this.config.retentionMs;
      await this.telemetry.purge(before);
      await this.records.purgeKilled(before);
    };
    const run = () => void tick().catch((err: unknown) => this.report('sampling sandboxes', err));
    run();
    this.samplerTimer = setInterval(run, this.config.metricsIntervalMs);
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

  async metrics(caller: Caller, id: string, start?: number, end?: number) {
    await this.requireAny(caller, id);
    if (start !== undefined && end !== undefined && start > end) throw badRequest(`start ${start} is after end ${end}`);
    const from = start === undefined ? 0 : start * 1000;
    const to = end === undefined ? Date.now() : end * 1000 + 999;
    return (await this.telemetry.samples(id, from, to)).map((m) => this.metric(m));
  }

  async latestMetrics(caller: Caller, ids: string[]) {
    const out: Record<string, ReturnType<Sandboxes['metric']>> = {};
    const scope = scopeOf(caller);
    for (const id of ids) {
      const s = isSandboxId(id) ? await this.records.get(id) : undefined;
      const m = s && inScope(scope, s.teamId) ? await this.telemetry.latest(id) : undefined;
      if (m) out[id] = this.metric(m);
    }
    return { sandboxes: out };
  }

  async logs(caller: Caller, id: string, q: { start?: number; limit?: number }) {
    await this.requireAny(caller, id);
    const entries = await this.telemetry.logs(id, { fromTs: q.start, limit: q.limit ?? 1000, direction: 'forward' });
    return {
      logs: entries.map((e) => ({ timestamp: iso(e.ts), line: e.message })),
      logEntries: entries.map((e) => ({ timestamp: iso(e.ts), message: e.message, level: e.level, fields: e.fields })),
    };
  }

  async logsV2(caller: Caller, id: string, q: { cursor?: number; limit?: number; direction?: 'forward' | 'backward'; level?: 'debug' | 'info' | 'warn' | 'error'; search?: string }) {
    await this.requireAny(caller, id);
    const order = ['debug', 'info', 'warn', 'error'];
    const levels = q.level ? order.slice(order.indexOf(q.level)) : undefined;
    const entries = await this.telemetry.logs(id, { fromTs: q.cursor, limit: q.limit ?? 1000, direction: q.direction ?? 'forward', levels, search: q.search });
    return { logs: entries.map((e) => ({ timestamp: iso(e.ts), message: e.message, level: e.level, fields: e.fields })) };
  }

  // ---------------------------------------------------------------- snapshots and forks

  /** Copies the sandbox's filesystem into a new template. */
  snapshot(caller: Caller, id: string, name: string | undefined): Promise<TemplateRecord> {
    return this.mutex.run(id, async () => {
      const s = await this.require(caller, id);
      if (name !== undefined && (!/^[a-z0-9][a-z0-9._/-]{0,127}$/i.test(name) || name.includes(':'))) {
        throw badRequest(`snapshot name '${name}' may use letters, digits, '.', '_', '-' and '/', up to 128 characters`);
      }
      // Asked before the copy, which takes long; the insert checks again.
      if (name !== undefined && (await this.templates.nameTaken(s.teamId, name))) throw conflict(`the name '${name}' is already taken`);
      const templateId = `snap${randomBytes(10).toString('hex')}`;
      const info = await this.runtime.snapshot(s.id, templateId).catch((err: unknown) => {
        throw toApiError(err);
      });
      let template: TemplateRecord;
      try {
        template = await this.templates.insert({
          id: templateId,
          teamId: s.teamId,
          kind: 'snapshot',
          public: false,
          names: name ? [name] : [],
          sourceSandboxId: s.id,
          cpuCount: info.limits.cpuCount,
          memoryMB: info.limits.memoryMB,
          diskSizeMB: info.limits.diskSizeMB,
          envdVersion,
        });
      } catch (err) {
        await this.runtime.deleteTemplate(templateId).catch(() => undefined);
        throw err;
      }
      await this.event(s.id, 'snapshot', 'info', 'snapshot taken', { snapshotID: templateId });
      return template;
    });
  }

  /**
   * Fork: a snapshot of the sandbox's filesystem, then `count` new sandboxes
   * from it. Processes and memory are not copied.
   */
  async fork(caller: Caller, id: string, count = 1, timeout?: number): Promise<Array<{ sandbox?: SandboxHandle; error?: { code: number; message: string } }>> {
    const source = await this.require(caller, id);
    this.seconds(timeout);
    const template = await this.snapshot(caller, source.id, undefined);
    const results: Array<{ sandbox?: SandboxHandle; error?: { code: number; message: string } }> = [];
    for (let i = 0; i < count; i++) {
      try {
        results.push({
          sandbox: await this.create(caller, {
            templateID: template.id,
            timeout,
            metadata: source.metadata,
            envVars: source.envVars,
            secure: source.envdAccessToken !== null,
            autoPause: source.autoPause,
            autoPauseMemory: source.autoPauseMemory,
            autoResume: { enabled: source.autoResume },
            // A fork is bound by the rules of what it copies: a locked-down sandbox's forks stay locked down.
            network: source.network,
            ...(source.allowInternetAccess !== null ? { allow_internet_access: source.allowInternetAccess } : {}),
          }, source.teamId),
        });
      } catch (err) {
        results.push({ error: errorBody(toApiError(err)) });
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
    const onHost = new Map((await this.runtime.list()).map((s) => [s.id, s.status]));
    const found = await this.records.reconcile(onHost);
    for (const id of found.lost) await this.event(id, 'lost', 'warn', 'sandbox vanished from the host while the server was down');
    for (const { id, found: status } of found.markedPaused) await this.event(id, 'marked_paused', 'warn', `sandbox found ${status} after a restart; marked paused`);
    for (const id of found.toFreeze) await this.runtime.pause(id).catch(() => undefined);
    // On the host but unknown to the store: created while the server died.
    for (const id of found.strays) await this.runtime.destroy(id).catch(() => undefined);
    await this.expireDue();
    return { adopted: found.adopted.length, lost: found.lost.length + found.markedPaused.length, removed: found.strays.length };
  }

  /**
   * From now on, a sandbox that the runtime finds ended by itself (its init
   * exited) is recorded as a restart would find it: paused, its files kept,
   * so that connect and resume start it again.
   */
  followRuntime(): void {
    this.stopFollowing ??= this.runtime.onExit((id, oomKilled) => void this.exited(id, oomKilled));
  }

  private exited(id: string, oomKilled: boolean): Promise<void> {
    return this.mutex
      .run(id, async () => {
        // Refused when it is not running (a pause or kill ended it).
        await this.records.transition(id, 'paused', { pausedWithMemory: false });
        if (oomKilled) await this.event(id, 'oom_killed', 'warn', 'sandbox stopped: its init was killed for want of memory (out of memory); marked paused, its files kept');
        else await this.event(id, 'exited', 'warn', 'sandbox stopped by itself (its init exited); marked paused, its files kept');
        this.oomSeen.delete(id);
        this.scheduleExpiry();
      })
      .catch(async (err: unknown) => {
        if (!refused(err)) await this.event(id, 'error', 'error', `recording the sandbox's end failed: ${(err as Error).message}`).catch(() => undefined);
      });
  }

  /**
   * Ends the streams that the envd of every running sandbox serves (process
   * output, watches), telling their clients `reason`: what the server does
   * before its proxy cuts the connections they flow through. The processes
   * keep running. Each call is bounded by `timeoutMs`; resolves with how many
   * streams were ended.
   */
  async endStreams(reason: string, timeoutMs: number): Promise<number> {
    const running = await this.records.running();
    const ended = await Promise.all(
      running.map(async (s) => {
        const { envd } = new SandboxShell(this.runtime.envdEndpoint(s.id), s.envdAccessToken ?? undefined);
        try {
          return await envd.endStreams(reason, { requestTimeoutMs: timeoutMs });
        } catch {
          // An envd that does not answer serves no stream to end.
          return 0;
        } finally {
          await envd.close();
        }
      }),
    );
    return ended.reduce((a, b) => a + b, 0);
  }

  close(): void {
    this.closed = true;
    this.stopFollowing?.();
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    if (this.samplerTimer) clearInterval(this.samplerTimer);
  }
}
