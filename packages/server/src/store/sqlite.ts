// The repositories on one SQLite file (better-sqlite3, WAL). Each operation
// that reads a state and changes it runs in one IMMEDIATE transaction, which
// takes the file's write lock first: another connection, in this process or
// another, waits for it (busy_timeout) and then sees the change.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import type Database from 'better-sqlite3';
import { openDb, statement, type Db } from './db.js';
import {
  API_KEY_PREFIX,
  DEFAULT_TEAM_NAME,
  inScope,
  newAdminKey,
  newApiKey,
  StoreError,
  type AdminKeyRepository,
  type TeamLimits,
  type TeamRecord,
  type TeamRepository,
  type TeamScope,
  type TeamUsage,
  type TemplateViewer,
  type ApiKeyRecord,
  type ApiKeyRepository,
  type BuildFailure,
  type BuildLogEntry,
  type BuildOutcome,
  type BuildRecord,
  type NewBuild,
  type TemplateKind,
  type HostSandboxStatus,
  type LogEntry,
  type LogLevel,
  type LogQuery,
  type MetricSample,
  type NetworkRules,
  type NewSandboxRecord,
  type NewTemplate,
  type ReconcileOutcome,
  type Repositories,
  type SandboxChange,
  type SandboxClaim,
  type SandboxListFilter,
  type SandboxRecord,
  type SandboxRecordState,
  type SandboxRepository,
  type SandboxRoute,
  type SandboxUpdate,
  type SnapshotFilter,
  type TelemetryRepository,
  type TemplateRecord,
  type TemplateRepository,
  type TemplateTagRecord,
  type TransitionOptions,
} from './repositories.js';

/** The repositories on the SQLite file `file`, created and migrated as needed. */
export function openSqliteStore(file: string): Repositories {
  const db = openDb(file);
  return {
    sandboxes: new SqliteSandboxRepository(db),
    templates: new SqliteTemplateRepository(db),
    apiKeys: new SqliteApiKeyRepository(db),
    adminKeys: new SqliteAdminKeyRepository(db),
    teams: new SqliteTeamRepository(db),
    telemetry: new SqliteTelemetryRepository(db),
    probe: async (timeoutMs) => {
      // Taking the write lock is what every change needs; another process holding it, a full or read-only disk, fail here.
      const usual = db.pragma('busy_timeout', { simple: true }) as number;
      db.pragma(`busy_timeout = ${Math.max(0, Math.floor(timeoutMs))}`);
      try {
        db.prepare('BEGIN IMMEDIATE').run();
        db.prepare('ROLLBACK').run();
      } finally {
        db.pragma(`busy_timeout = ${usual}`);
      }
    },
    close: async () => {
      db.close();
    },
  };
}

const flag = (b: boolean) => (b ? 1 : 0);
const optionalFlag = (b: boolean | null) => (b === null ? null : flag(b));

// ---------------------------------------------------------------- sandboxes

interface SandboxRow {
  id: string;
  template_id: string;
  alias: string | null;
  state: SandboxRecordState;
  pending_change: SandboxChange | null;
  paused_with_memory: number;
  started_at: number;
  end_at: number;
  ended_at: number | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  envd_version: string;
  metadata: string;
  env_vars: string;
  envd_access_token: string | null;
  traffic_access_token: string | null;
  auto_pause: number;
  auto_pause_memory: number;
  auto_resume: number;
  allow_internet_access: number | null;
  network: string;
  build_id: string | null;
  api_key_id: string | null;
  team_id: string;
}

function sandboxFromRow(r: SandboxRow): SandboxRecord {
  return {
    id: r.id,
    templateId: r.template_id,
    alias: r.alias,
    state: r.state,
    pendingChange: r.pending_change,
    pausedWithMemory: r.paused_with_memory === 1,
    startedAt: r.started_at,
    endAt: r.end_at,
    endedAt: r.ended_at,
    cpuCount: r.cpu_count,
    memoryMB: r.memory_mb,
    diskSizeMB: r.disk_size_mb,
    envdVersion: r.envd_version,
    metadata: JSON.parse(r.metadata) as Record<string, string>,
    envVars: JSON.parse(r.env_vars) as Record<string, string>,
    envdAccessToken: r.envd_access_token,
    trafficAccessToken: r.traffic_access_token,
    autoPause: r.auto_pause === 1,
    autoPauseMemory: r.auto_pause_memory === 1,
    autoResume: r.auto_resume === 1,
    allowInternetAccess: r.allow_internet_access === null ? null : r.allow_internet_access === 1,
    network: JSON.parse(r.network) as NetworkRules,
    buildId: r.build_id,
    apiKeyId: r.api_key_id,
    teamId: r.team_id,
  };
}

/** The SQL condition that a row's `team_id` is in `scope`, and its arguments. */
function teamCondition(scope: TeamScope, column = 'team_id'): { sql: string; args: string[] } {
  return scope === 'all' ? { sql: '1', args: [] } : { sql: `${column} = ?`, args: [scope.teamId] };
}

/** The states a sandbox may move to each state from. */
const MOVES_TO: Record<SandboxRecordState, SandboxRecordState[]> = {
  running: ['paused'],
  paused: ['running'],
  killed: ['running', 'paused'],
};

const CHANGE_OF: Record<'running' | 'paused', SandboxChange> = { running: 'resuming', paused: 'pausing' };
const DOING: Record<SandboxChange, string> = { pausing: 'being paused', resuming: 'being resumed' };

/** Why a move of `row` to `to` is refused, or undefined when it is allowed. */
function refusal(id: string, row: SandboxRow | undefined, to: SandboxRecordState, expiredBy: number | undefined): StoreError | undefined {
  if (!row || row.state === 'killed') return new StoreError('not_found', `sandbox '${id}' not found`);
  if (row.pending_change) return new StoreError('conflict', `sandbox '${id}' is ${DOING[row.pending_change]} by another request`);
  if (!MOVES_TO[to].includes(row.state)) return new StoreError('conflict', `sandbox '${id}' is ${row.state}, not ${MOVES_TO[to].join(' or ')}`);
  if (expiredBy !== undefined && row.end_at > expiredBy) {
    return new StoreError('conflict', `sandbox '${id}' has not expired: it ends at ${new Date(row.end_at).toISOString()}`);
  }
  return undefined;
}

export class SqliteSandboxRepository implements SandboxRepository {
  /**
   * Routes of live sandboxes read so far, by id. The proxy asks on every
   * request, and the query with its locks costs many times a map lookup.
   * A write through this connection drops the entries it changes; a write
   * by any other connection changes SQLite's data_version, which empties
   * the whole map before the next lookup.
   */
  private readonly routes = new Map<string, SandboxRoute>();
  private routesVersion = -1;
  private readonly dataVersion: Database.Statement;

  constructor(private readonly db: Db) {
    this.dataVersion = db.prepare('PRAGMA data_version').pluck();
  }

  private row(id: string): SandboxRow | undefined {
    return statement(this.db, 'SELECT * FROM sandboxes WHERE id = ?').get(id) as SandboxRow | undefined;
  }

  private rows(sql: string, ...args: unknown[]): SandboxRecord[] {
    return (statement(this.db, sql).all(...args) as SandboxRow[]).map(sandboxFromRow);
  }

  async insert(s: NewSandboxRecord): Promise<SandboxRecord> {
    statement(
      this.db,
      `INSERT INTO sandboxes (id, template_id, alias, state, paused_with_memory, started_at, end_at, cpu_count, memory_mb,
           disk_size_mb, envd_version, metadata, env_vars, envd_access_token, traffic_access_token, auto_pause, auto_pause_memory,
           auto_resume, allow_internet_access, network, build_id, api_key_id, team_id)
         VALUES (@id, @templateId, @alias, 'running', 0, @startedAt, @endAt, @cpuCount, @memoryMB,
           @diskSizeMB, @envdVersion, @metadata, @envVars, @envdAccessToken, @trafficAccessToken, @autoPause, @autoPauseMemory,
           @autoResume, @allowInternetAccess, @network, @buildId, @apiKeyId, @teamId)`,
    ).run({
      id: s.id,
      templateId: s.templateId,
      alias: s.alias,
      startedAt: s.startedAt,
      endAt: s.endAt,
      cpuCount: s.cpuCount,
      memoryMB: s.memoryMB,
      diskSizeMB: s.diskSizeMB,
      envdVersion: s.envdVersion,
      metadata: JSON.stringify(s.metadata),
      envVars: JSON.stringify(s.envVars),
      envdAccessToken: s.envdAccessToken,
      trafficAccessToken: s.trafficAccessToken,
      autoPause: flag(s.autoPause),
      autoPauseMemory: flag(s.autoPauseMemory),
      autoResume: flag(s.autoResume),
      allowInternetAccess: optionalFlag(s.allowInternetAccess),
      network: JSON.stringify(s.network),
      buildId: s.buildId ?? null,
      apiKeyId: s.apiKeyId ?? null,
      teamId: s.teamId,
    });
    this.routes.delete(s.id);
    return sandboxFromRow(this.row(s.id)!);
  }

  async get(id: string): Promise<SandboxRecord | undefined> {
    const r = this.row(id);
    return r && sandboxFromRow(r);
  }

  async live(id: string): Promise<SandboxRecord | undefined> {
    const r = this.row(id);
    return r && r.state !== 'killed' ? sandboxFromRow(r) : undefined;
  }

  async route(id: string): Promise<SandboxRoute | undefined> {
    const version = this.dataVersion.get() as number;
    if (version !== this.routesVersion) {
      this.routes.clear();
      this.routesVersion = version;
    }
    const known = this.routes.get(id);
    if (known) return known;
    const r = statement(
      this.db,
      "SELECT id, state, auto_resume, traffic_access_token, team_id, json_extract(network, '$.maskRequestHost') AS mask FROM sandboxes WHERE id = ? AND state != 'killed'",
    ).get(id) as (Pick<SandboxRow, 'id' | 'state' | 'auto_resume' | 'traffic_access_token' | 'team_id'> & { mask: string | null }) | undefined;
    // Ids with no live sandbox are not kept: anyone may send any id.
    if (!r) return undefined;
    const route: SandboxRoute = { id: r.id, state: r.state, autoResume: r.auto_resume === 1, trafficAccessToken: r.traffic_access_token, teamId: r.team_id };
    if (typeof r.mask === 'string' && r.mask) route.maskRequestHost = r.mask;
    this.routes.set(id, route);
    return route;
  }

  async allLive(): Promise<SandboxRecord[]> {
    return this.rows("SELECT * FROM sandboxes WHERE state != 'killed'");
  }

  async running(): Promise<SandboxRecord[]> {
    return this.rows("SELECT * FROM sandboxes WHERE state = 'running'");
  }

  async countRunning(scope: TeamScope): Promise<number> {
    const team = teamCondition(scope);
    return (statement(this.db, `SELECT COUNT(*) AS n FROM sandboxes WHERE state = 'running' AND ${team.sql}`).get(...team.args) as { n: number }).n;
  }

  async usage(teamId: string): Promise<TeamUsage> {
    const r = statement(
      this.db,
      "SELECT COUNT(*) AS n, COALESCE(SUM(memory_mb), 0) AS memory, COALESCE(SUM(disk_size_mb), 0) AS disk FROM sandboxes WHERE team_id = ? AND state = 'running'",
    ).get(teamId) as { n: number; memory: number; disk: number };
    return { sandboxes: r.n, memoryMB: r.memory, diskMB: r.disk };
  }

  async countRunningByKey(apiKeyId: string): Promise<number> {
    return (statement(this.db, "SELECT COUNT(*) AS n FROM sandboxes WHERE api_key_id = ? AND state = 'running'").get(apiKeyId) as { n: number }).n;
  }

  async countByState(): Promise<Array<{ state: string; template: string; count: number }>> {
    return statement(
      this.db,
      "SELECT state, COALESCE(alias, template_id) AS template, COUNT(*) AS count FROM sandboxes WHERE state != 'killed' GROUP BY state, COALESCE(alias, template_id)",
    ).all() as Array<{ state: string; template: string; count: number }>;
  }

  async list(f: SandboxListFilter): Promise<SandboxRecord[]> {
    const team = teamCondition(f.scope);
    const where = [team.sql, `state IN (${f.states.map(() => '?').join(', ')})`];
    const args: Array<string | number> = [...team.args, ...f.states];
    if (f.startedAfter !== undefined) {
      where.push('started_at >= ?');
      args.push(f.startedAfter);
    }
    if (f.templateIds) {
      where.push(`template_id IN (${f.templateIds.map(() => '?').join(', ') || "''"})`);
      args.push(...f.templateIds);
    }
    for (const [k, v] of Object.entries(f.metadata ?? {})) {
      where.push('json_extract(metadata, ?) = ?');
      args.push(`$."${k.replace(/"/g, '""')}"`, v);
    }
    const dir = f.order === 'asc' ? 'ASC' : 'DESC';
    if (f.after) {
      where.push(f.order === 'asc' ? '(started_at, id) > (?, ?)' : '(started_at, id) < (?, ?)');
      args.push(f.after.key, f.after.id);
    }
    const sql = `SELECT * FROM sandboxes WHERE ${where.join(' AND ')} ORDER BY started_at ${dir}, id ${dir} LIMIT ?`;
    return (this.db.prepare(sql).all(...args, f.limit) as SandboxRow[]).map(sandboxFromRow);
  }

  async nextExpiry(): Promise<number | undefined> {
    const r = statement(this.db, "SELECT MIN(end_at) AS t FROM sandboxes WHERE state = 'running'").get() as { t: number | null };
    return r.t ?? undefined;
  }

  async expired(now: number): Promise<SandboxRecord[]> {
    return this.rows("SELECT * FROM sandboxes WHERE state = 'running' AND end_at <= ?", now);
  }

  async update(id: string, change: (current: SandboxRecord) => SandboxUpdate): Promise<SandboxRecord> {
    return this.db
      .transaction(() => {
        const r = this.row(id);
        if (!r || r.state === 'killed') throw new StoreError('not_found', `sandbox '${id}' not found`);
        const u = change(sandboxFromRow(r));
        statement(
          this.db,
          `UPDATE sandboxes SET end_at = COALESCE(@endAt, end_at), network = COALESCE(@network, network),
             allow_internet_access = CASE WHEN @setInternet THEN @internet ELSE allow_internet_access END WHERE id = @id`,
        ).run({
          id,
          endAt: u.endAt ?? null,
          network: u.network === undefined ? null : JSON.stringify(u.network),
          setInternet: flag(u.allowInternetAccess !== undefined),
          internet: u.allowInternetAccess === undefined ? null : optionalFlag(u.allowInternetAccess),
        });
        return sandboxFromRow(this.row(id)!);
      })
      .immediate();
  }

  /** Sets the state, and the fields that go with it, of a row that was checked. */
  private setState(id: string, to: SandboxRecordState, options: TransitionOptions, claimToken: string | null): number {
    const changes = statement(
      this.db,
      `UPDATE sandboxes SET state = @to, paused_with_memory = @memory,
         ended_at = CASE WHEN @to = 'killed' THEN @now ELSE ended_at END,
         end_at = CASE WHEN @extendTo IS NULL THEN end_at ELSE MAX(end_at, @extendTo) END,
         pending_change = NULL, claim_token = NULL, claimed_at = NULL
       WHERE id = @id AND claim_token IS @claimToken`,
    ).run({
      id,
      to,
      memory: flag(to === 'paused' && options.pausedWithMemory === true),
      now: Date.now(),
      extendTo: to === 'running' ? (options.extendTo ?? null) : null,
      claimToken,
    }).changes;
    this.routes.delete(id);
    return changes;
  }

  async transition(id: string, to: SandboxRecordState, options: TransitionOptions = {}): Promise<SandboxRecord> {
    return this.db
      .transaction(() => {
        const refused = refusal(id, this.row(id), to, options.expiredBy);
        if (refused) throw refused;
        this.setState(id, to, options, null);
        return sandboxFromRow(this.row(id)!);
      })
      .immediate();
  }

  async claim(id: string, to: 'running' | 'paused', options: Pick<TransitionOptions, 'expiredBy'> = {}): Promise<SandboxClaim> {
    const token = randomUUID();
    const record = this.db
      .transaction(() => {
        const r = this.row(id);
        const refused = refusal(id, r, to, options.expiredBy);
        if (refused) throw refused;
        statement(this.db, 'UPDATE sandboxes SET pending_change = ?, claim_token = ?, claimed_at = ? WHERE id = ?').run(CHANGE_OF[to], token, Date.now(), id);
        return sandboxFromRow(r!);
      })
      .immediate();
    const lost = () => new StoreError('conflict', `the claim to move sandbox '${id}' to ${to} was given up (a restart dropped it)`);
    return {
      record,
      complete: async (done = {}) =>
        this.db
          .transaction(() => {
            if (this.setState(id, to, done, token) === 0) throw lost();
            return sandboxFromRow(this.row(id)!);
          })
          .immediate(),
      abandon: async () => {
        const n = statement(this.db, 'UPDATE sandboxes SET pending_change = NULL, claim_token = NULL, claimed_at = NULL WHERE id = ? AND claim_token = ?').run(id, token).changes;
        if (n === 0) throw lost();
      },
    };
  }

  async reconcile(onHost: ReadonlyMap<string, HostSandboxStatus>): Promise<ReconcileOutcome> {
    const outcome: ReconcileOutcome = { adopted: [], lost: [], markedPaused: [], toFreeze: [], strays: [] };
    this.db
      .transaction(() => {
        statement(this.db, 'UPDATE sandboxes SET pending_change = NULL, claim_token = NULL, claimed_at = NULL WHERE claim_token IS NOT NULL').run();
        const live = new Set<string>();
        for (const s of this.rows("SELECT * FROM sandboxes WHERE state != 'killed'")) {
          live.add(s.id);
          const found = onHost.get(s.id);
          if (found === undefined) {
            this.setState(s.id, 'killed', {}, null);
            outcome.lost.push(s.id);
          } else if (s.state === 'running' && found !== 'running') {
            // Its processes are gone (a host restart) or it is frozen: it keeps its files and can be resumed.
            this.setState(s.id, 'paused', { pausedWithMemory: found === 'paused' }, null);
            outcome.markedPaused.push({ id: s.id, found });
          } else {
            if (s.state === 'paused' && found === 'running') outcome.toFreeze.push(s.id);
            outcome.adopted.push(s.id);
          }
        }
        outcome.strays = [...onHost.keys()].filter((id) => !live.has(id));
      })
      .immediate();
    this.routes.clear();
    return outcome;
  }

  async purgeKilled(before: number): Promise<number> {
    return statement(this.db, "DELETE FROM sandboxes WHERE state = 'killed' AND ended_at < ?").run(before).changes;
  }
}

// ---------------------------------------------------------------- templates

interface TemplateRow {
  id: string;
  kind: TemplateKind;
  public: number;
  created_at: number;
  updated_at: number;
  last_spawned_at: number | null;
  spawn_count: number;
  source_sandbox_id: string | null;
  team_id: string;
}

interface BuildRow {
  id: string;
  template_id: string;
  status: BuildRecord['status'];
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  cpu_count: number;
  memory_mb: number;
  disk_size_mb: number;
  envd_version: string;
  runtime_template_id: string | null;
  start_cmd: string | null;
  ready_cmd: string | null;
  reason: string | null;
  tags: string;
}

const buildFromRow = (b: BuildRow): BuildRecord => ({
  id: b.id,
  templateId: b.template_id,
  status: b.status,
  createdAt: b.created_at,
  updatedAt: b.updated_at,
  finishedAt: b.finished_at,
  cpuCount: b.cpu_count,
  memoryMB: b.memory_mb,
  diskSizeMB: b.disk_size_mb,
  envdVersion: b.envd_version,
  runtimeTemplateId: b.runtime_template_id,
  startCmd: b.start_cmd,
  readyCmd: b.ready_cmd,
  reason: b.reason === null ? null : (JSON.parse(b.reason) as BuildFailure),
  tags: JSON.parse(b.tags) as string[],
});

interface BuildLogRow {
  ts: number;
  level: LogLevel;
  message: string;
  step: string | null;
}

const tagFromRow = (r: { tag: string; build_id: string; created_at: number }): TemplateTagRecord => ({ tag: r.tag, buildId: r.build_id, createdAt: r.created_at });

const isUniqueViolation = (err: unknown) => (err as { code?: string } | null)?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || (err as { code?: string } | null)?.code === 'SQLITE_CONSTRAINT_UNIQUE';

export class SqliteTemplateRepository implements TemplateRepository {
  constructor(private readonly db: Db) {}

  private hydrate(r: TemplateRow): TemplateRecord {
    const names = (statement(this.db, 'SELECT name FROM template_names WHERE template_id = ? ORDER BY name').all(r.id) as Array<{ name: string }>).map((n) => n.name);
    const builds = (statement(this.db, 'SELECT * FROM builds WHERE template_id = ? ORDER BY created_at DESC, id DESC').all(r.id) as BuildRow[]).map(buildFromRow);
    return {
      id: r.id,
      teamId: r.team_id,
      kind: r.kind,
      public: r.public === 1,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      lastSpawnedAt: r.last_spawned_at,
      spawnCount: r.spawn_count,
      sourceSandboxId: r.source_sandbox_id,
      names,
      builds,
    };
  }

  private byId(id: string): TemplateRecord | undefined {
    const r = statement(this.db, 'SELECT * FROM templates WHERE id = ?').get(id) as TemplateRow | undefined;
    return r && this.hydrate(r);
  }

  /** The template of the team named `name`. */
  private named(teamId: string, name: string): TemplateRecord | undefined {
    const r = statement(this.db, 'SELECT template_id FROM template_names WHERE team_id = ? AND name = ?').get(teamId, name) as { template_id: string } | undefined;
    return r && this.byId(r.template_id);
  }

  /** `name` as `viewer` sees it: its own team's first, then a public one (the oldest), or any for every team's scope. */
  private namedFor(viewer: TemplateViewer, name: string): TemplateRecord | undefined {
    const own = viewer.scope === 'all' ? undefined : this.named(viewer.scope.teamId, name);
    if (own || (!viewer.publicToo && viewer.scope !== 'all')) return own;
    const r = statement(
      this.db,
      `SELECT n.template_id FROM template_names n JOIN templates t ON t.id = n.template_id
       WHERE n.name = ? AND (t.public = 1 OR ?) ORDER BY t.created_at, t.id LIMIT 1`,
    ).get(name, flag(viewer.scope === 'all')) as { template_id: string } | undefined;
    return r && this.byId(r.template_id);
  }

  private visible(viewer: TemplateViewer, t: TemplateRecord | undefined): TemplateRecord | undefined {
    return t && (inScope(viewer.scope, t.teamId) || (viewer.publicToo && t.public)) ? t : undefined;
  }

  private tagOf(templateId: string, tag: string): TemplateTagRecord | undefined {
    const r = statement(this.db, 'SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? AND tag = ?').get(templateId, tag) as
      | { tag: string; build_id: string; created_at: number }
      | undefined;
    return r && tagFromRow(r);
  }

  async get(id: string): Promise<TemplateRecord | undefined> {
    return this.byId(id);
  }

  async byName(name: string, viewer: TemplateViewer): Promise<TemplateRecord | undefined> {
    return this.visible(viewer, this.namedFor(viewer, name));
  }

  async resolve(ref: string, viewer: TemplateViewer): Promise<TemplateRecord | undefined> {
    const find = (r: string) => this.visible(viewer, this.byId(r)) ?? this.visible(viewer, this.namedFor(viewer, r));
    const direct = find(ref);
    if (direct) return direct;
    const colon = ref.lastIndexOf(':');
    if (colon <= 0) return undefined;
    const t = find(ref.slice(0, colon));
    return t && this.tagOf(t.id, ref.slice(colon + 1)) ? t : undefined;
  }

  async list(viewer: TemplateViewer): Promise<TemplateRecord[]> {
    const team = teamCondition(viewer.scope);
    return (statement(this.db, `SELECT * FROM templates WHERE ${team.sql} OR (public = 1 AND ?) ORDER BY created_at, id`).all(...team.args, flag(viewer.publicToo)) as TemplateRow[]).map(
      (r) => this.hydrate(r),
    );
  }

  async listSnapshots(f: SnapshotFilter): Promise<TemplateRecord[]> {
    const team = teamCondition(f.scope);
    const where = ["kind = 'snapshot'", team.sql];
    const args: Array<string | number> = [...team.args];
    if (f.sourceSandboxId !== undefined) {
      where.push('source_sandbox_id = ?');
      args.push(f.sourceSandboxId);
    }
    if (f.name !== undefined) {
      where.push('id IN (SELECT template_id FROM template_names WHERE name = ? AND team_id = templates.team_id)');
      args.push(f.name);
    }
    if (f.after) {
      where.push('(created_at, id) > (?, ?)');
      args.push(f.after.key, f.after.id);
    }
    const rows = this.db.prepare(`SELECT * FROM templates WHERE ${where.join(' AND ')} ORDER BY created_at, id LIMIT ?`).all(...args, f.limit) as TemplateRow[];
    return rows.map((r) => this.hydrate(r));
  }

  async nameTaken(teamId: string, name: string): Promise<boolean> {
    return statement(this.db, 'SELECT 1 FROM template_names WHERE team_id = ? AND name = ?').get(teamId, name) !== undefined;
  }

  async countOfTeam(teamId: string): Promise<number> {
    return (statement(this.db, 'SELECT COUNT(*) AS n FROM templates WHERE team_id = ?').get(teamId) as { n: number }).n;
  }

  async insert(t: NewTemplate): Promise<TemplateRecord> {
    const now = Date.now();
    return this.db
      .transaction(() => {
        statement(this.db, 'INSERT INTO templates (id, team_id, kind, public, created_at, updated_at, source_sandbox_id) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
          t.id,
          t.teamId,
          t.kind,
          flag(t.public),
          now,
          now,
          t.sourceSandboxId ?? null,
        );
        for (const name of t.names) {
          try {
            statement(this.db, 'INSERT INTO template_names (team_id, name, template_id) VALUES (?, ?, ?)').run(t.teamId, name, t.id);
          } catch (err) {
            if (isUniqueViolation(err)) throw new StoreError('conflict', `the name '${name}' is already taken`);
            throw err;
          }
        }
        statement(
          this.db,
          `INSERT INTO builds (id, template_id, status, created_at, updated_at, finished_at, cpu_count, memory_mb, disk_size_mb, envd_version)
           VALUES (?, ?, 'ready', ?, ?, ?, ?, ?, ?, ?)`,
        ).run(randomUUID(), t.id, now, now, now, t.cpuCount, t.memoryMB, t.diskSizeMB, t.envdVersion);
        return this.byId(t.id)!;
      })
      .immediate();
  }

  async remove(id: string): Promise<void> {
    statement(this.db, 'DELETE FROM templates WHERE id = ?').run(id);
  }

  async setPublic(id: string, isPublic: boolean): Promise<void> {
    statement(this.db, 'UPDATE templates SET public = ?, updated_at = ? WHERE id = ?').run(flag(isPublic), Date.now(), id);
  }

  async recordSpawn(id: string): Promise<void> {
    statement(this.db, 'UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE id = ?').run(Date.now(), id);
  }

  async tag(templateId: string, tag: string): Promise<TemplateTagRecord | undefined> {
    return this.tagOf(templateId, tag);
  }

  async tags(templateId: string): Promise<TemplateTagRecord[]> {
    return (statement(this.db, 'SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY tag').all(templateId) as Array<{
      tag: string;
      build_id: string;
      created_at: number;
    }>).map(tagFromRow);
  }

  async assignTags(templateId: string, buildId: string, tags: string[]): Promise<void> {
    const now = Date.now();
    const upsert = statement(
      this.db,
      'INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at',
    );
    this.db
      .transaction(() => {
        for (const t of tags) upsert.run(templateId, t, buildId, now);
      })
      .immediate();
  }

  async deleteTags(templateId: string, tags: string[]): Promise<{ missing: string[] }> {
    const remove = statement(this.db, 'DELETE FROM template_tags WHERE template_id = ? AND tag = ?');
    return this.db
      .transaction(() => {
        const missing = tags.filter((t) => !this.tagOf(templateId, t));
        if (missing.length === 0) for (const t of tags) remove.run(templateId, t);
        return { missing };
      })
      .immediate();
  }

  private buildById(id: string): BuildRecord | undefined {
    const r = statement(this.db, 'SELECT * FROM builds WHERE id = ?').get(id) as BuildRow | undefined;
    return r && buildFromRow(r);
  }

  async newBuild(b: NewBuild): Promise<{ template: TemplateRecord; build: BuildRecord }> {
    const now = Date.now();
    return this.db
      .transaction(() => {
        let template = this.named(b.teamId, b.name);
        if (template && template.kind !== 'build') {
          throw new StoreError('conflict', `the name '${b.name}' is taken by template '${template.id}', which was not made by a build`);
        }
        const underWay = template?.builds.find((x) => x.status === 'building');
        if (underWay) throw new StoreError('conflict', `template '${b.name}' has a build under way (${underWay.id}); wait for it to end`);
        if (!template) {
          statement(this.db, "INSERT INTO templates (id, team_id, kind, public, created_at, updated_at) VALUES (?, ?, 'build', 0, ?, ?)").run(b.templateId, b.teamId, now, now);
          statement(this.db, 'INSERT INTO template_names (team_id, name, template_id) VALUES (?, ?, ?)').run(b.teamId, b.name, b.templateId);
        } else {
          statement(this.db, 'UPDATE templates SET updated_at = ? WHERE id = ?').run(now, template.id);
        }
        const templateId = template?.id ?? b.templateId;
        statement(
          this.db,
          `INSERT INTO builds (id, template_id, status, created_at, updated_at, cpu_count, memory_mb, disk_size_mb, envd_version, tags)
           VALUES (?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?)`,
        ).run(b.buildId, templateId, now, now, b.cpuCount, b.memoryMB, b.diskSizeMB, b.envdVersion, JSON.stringify(b.tags));
        template = this.byId(templateId)!;
        return { template, build: this.buildById(b.buildId)! };
      })
      .immediate();
  }

  async addBuild(templateId: string, b: Omit<NewBuild, 'templateId' | 'name' | 'teamId'>): Promise<BuildRecord> {
    const now = Date.now();
    return this.db
      .transaction(() => {
        const template = this.byId(templateId);
        if (!template) throw new StoreError('not_found', `template '${templateId}' not found`);
        const underWay = template.builds.find((x) => x.status === 'building' || x.status === 'waiting');
        if (underWay) throw new StoreError('conflict', `template '${templateId}' has a build under way (${underWay.id}); wait for it to end`);
        statement(
          this.db,
          `INSERT INTO builds (id, template_id, status, created_at, updated_at, cpu_count, memory_mb, disk_size_mb, envd_version, tags)
           VALUES (?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?)`,
        ).run(b.buildId, templateId, now, now, b.cpuCount, b.memoryMB, b.diskSizeMB, b.envdVersion, JSON.stringify(b.tags));
        return this.buildById(b.buildId)!;
      })
      .immediate();
  }

  async startBuild(buildId: string): Promise<BuildRecord> {
    return this.db
      .transaction(() => {
        const b = this.buildById(buildId);
        if (!b) throw new StoreError('not_found', `build '${buildId}' not found`);
        if (b.status !== 'waiting') throw new StoreError('conflict', `build '${buildId}' is ${b.status}; only a waiting build can be started`);
        const other = this.byId(b.templateId)!.builds.find((x) => x.status === 'building');
        if (other) throw new StoreError('conflict', `template '${b.templateId}' has a build under way (${other.id}); wait for it to end`);
        statement(this.db, "UPDATE builds SET status = 'building', updated_at = ? WHERE id = ?").run(Date.now(), buildId);
        return this.buildById(buildId)!;
      })
      .immediate();
  }

  async finishBuild(buildId: string, outcome: BuildOutcome): Promise<BuildRecord> {
    const now = Date.now();
    return this.db
      .transaction(() => {
        const b = this.buildById(buildId);
        if (!b) throw new StoreError('not_found', `build '${buildId}' not found`);
        if (outcome.status === 'ready') {
          statement(
            this.db,
            "UPDATE builds SET status = 'ready', updated_at = ?, finished_at = ?, runtime_template_id = ?, start_cmd = ?, ready_cmd = ?, reason = NULL WHERE id = ?",
          ).run(now, now, outcome.runtimeTemplateId, outcome.startCmd, outcome.readyCmd, buildId);
          const upsert = statement(
            this.db,
            'INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at',
          );
          for (const tag of b.tags) upsert.run(b.templateId, tag, buildId, now);
        } else {
          statement(this.db, "UPDATE builds SET status = 'error', updated_at = ?, finished_at = ?, reason = ? WHERE id = ?").run(now, now, JSON.stringify(outcome.reason), buildId);
        }
        statement(this.db, 'UPDATE templates SET updated_at = ? WHERE id = ?').run(now, b.templateId);
        return this.buildById(buildId)!;
      })
      .immediate();
  }

  async failUnfinishedBuilds(reason: BuildFailure): Promise<string[]> {
    const now = Date.now();
    return this.db
      .transaction(() => {
        const ids = (statement(this.db, "SELECT id FROM builds WHERE status = 'building'").all() as Array<{ id: string }>).map((r) => r.id);
        const fail = statement(this.db, "UPDATE builds SET status = 'error', updated_at = ?, finished_at = ?, reason = ? WHERE id = ?");
        for (const id of ids) fail.run(now, now, JSON.stringify(reason), id);
        return ids;
      })
      .immediate();
  }

  async addBuildLogs(buildId: string, entries: BuildLogEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const insert = statement(this.db, 'INSERT INTO build_logs (build_id, seq, ts, level, message, step) VALUES (?, ?, ?, ?, ?, ?)');
    this.db
      .transaction(() => {
        const last = statement(this.db, 'SELECT MAX(seq) AS seq FROM build_logs WHERE build_id = ?').get(buildId) as { seq: number | null };
        let seq = last.seq ?? -1;
        for (const e of entries) insert.run(buildId, ++seq, e.ts, e.level, e.message, e.step ?? null);
      })
      .immediate();
  }

  async buildLogs(buildId: string, q: { offset: number; limit: number; levels?: LogLevel[] }): Promise<BuildLogEntry[]> {
    const levels = q.levels?.length ? q.levels : undefined;
    const rows = this.db
      .prepare(
        `SELECT ts, level, message, step FROM build_logs WHERE build_id = ?${levels ? ` AND level IN (${levels.map(() => '?').join(', ')})` : ''} ORDER BY seq LIMIT ? OFFSET ?`,
      )
      .all(buildId, ...(levels ?? []), q.limit, q.offset) as BuildLogRow[];
    return rows.map((r) => ({ ts: r.ts, level: r.level, message: r.message, ...(r.step === null ? {} : { step: r.step }) }));
  }
}

// ---------------------------------------------------------------- API keys

const hashOf = (key: string) => createHash('sha256').update(key).digest('hex');

/** How often a key's last use is written: at most once a minute, not on every request. */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * The length after the prefix of keys stored before it was recorded: every
 * key then had `newApiKey`'s form, but for one given to the first start.
 */
const LENGTH_BEFORE_RECORDED = 40;

interface ApiKeyRow {
  id: string;
  name: string;
  team_id: string;
  mask: string;
  value_length: number | null;
  created_at: number;
  last_used_at: number | null;
}

function apiKeyFromRow(r: ApiKeyRow): ApiKeyRecord {
  const prefix = r.mask.startsWith(API_KEY_PREFIX) ? API_KEY_PREFIX : '';
  const cut = r.mask.indexOf('…');
  return {
    id: r.id,
    name: r.name,
    teamId: r.team_id,
    mask: r.mask,
    maskParts: {
      prefix,
      valueLength: r.value_length ?? LENGTH_BEFORE_RECORDED,
      maskedValuePrefix: r.mask.slice(prefix.length, cut),
      maskedValueSuffix: r.mask.slice(cut + 1),
    },
    createdAt: r.created_at,
    lastUsedAt: r.last_used_at,
  };
}

export class SqliteApiKeyRepository implements ApiKeyRepository {
  private readonly touched = new Map<string, number>();

  constructor(private readonly db: Db) {}

  private byId(id: string, scope: TeamScope = 'all'): ApiKeyRecord | undefined {
    const r = statement(this.db, 'SELECT id, name, team_id, mask, value_length, created_at, last_used_at FROM api_keys WHERE id = ?').get(id) as ApiKeyRow | undefined;
    return r && inScope(scope, r.team_id) ? apiKeyFromRow(r) : undefined;
  }

  private countNow(): number {
    return (statement(this.db, 'SELECT COUNT(*) AS n FROM api_keys').get() as { n: number }).n;
  }

  private insert(teamId: string, name: string, key: string): { record: ApiKeyRecord; key: string } {
    if (!statement(this.db, 'SELECT 1 FROM teams WHERE id = ?').get(teamId)) throw new StoreError('not_found', `team '${teamId}' not found`);
    const id = randomUUID();
    const mask = `${key.slice(0, 8)}…${key.slice(-4)}`;
    const valueLength = key.length - (key.startsWith(API_KEY_PREFIX) ? API_KEY_PREFIX.length : 0);
    statement(this.db, 'INSERT INTO api_keys (id, name, team_id, hash, mask, value_length, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)').run(
      id,
      name,
      teamId,
      hashOf(key),
      mask,
      valueLength,
      Date.now(),
    );
    return { record: this.byId(id)!, key };
  }

  async count(): Promise<number> {
    return this.countNow();
  }

  async create(teamId: string, name: string, key = newApiKey()): Promise<{ record: ApiKeyRecord; key: string }> {
    return this.db.transaction(() => this.insert(teamId, name, key)).immediate();
  }

  async createFirst(name: string, key = newApiKey()): Promise<{ record: ApiKeyRecord; key: string } | undefined> {
    return this.db
      .transaction(() => {
        if (this.countNow() > 0) return undefined;
        const team = statement(this.db, 'SELECT id FROM teams WHERE name = ?').get(DEFAULT_TEAM_NAME) as { id: string } | undefined;
        if (!team) throw new StoreError('not_found', `the team '${DEFAULT_TEAM_NAME}' that the first key joins was deleted`);
        return this.insert(team.id, name, key);
      })
      .immediate();
  }

  async verify(key: string | undefined): Promise<{ id: string; teamId: string } | undefined> {
    if (!key) return undefined;
    const hash = hashOf(key);
    const row = statement(this.db, 'SELECT id, team_id, hash FROM api_keys WHERE hash = ?').get(hash) as { id: string; team_id: string; hash: string } | undefined;
    // Found by its hash; the compare that decides is constant-time.
    if (!row || !timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined;
    return { id: row.id, teamId: row.team_id };
  }

  async touch(id: string): Promise<void> {
    const now = Date.now();
    if (now - (this.touched.get(id) ?? 0) < TOUCH_INTERVAL_MS) return;
    this.touched.set(id, now);
    statement(this.db, 'UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now, id);
  }

  async list(scope: TeamScope): Promise<ApiKeyRecord[]> {
    const team = teamCondition(scope);
    return (
      statement(this.db, `SELECT id, name, team_id, mask, value_length, created_at, last_used_at FROM api_keys WHERE ${team.sql} ORDER BY created_at, id`).all(
        ...team.args,
      ) as ApiKeyRow[]
    ).map(apiKeyFromRow);
  }

  async rename(scope: TeamScope, id: string, name: string): Promise<ApiKeyRecord> {
    return this.db
      .transaction(() => {
        if (!this.byId(id, scope)) throw new StoreError('not_found', `no API key has id '${id}'`);
        statement(this.db, 'UPDATE api_keys SET name = ? WHERE id = ?').run(name, id);
        return this.byId(id)!;
      })
      .immediate();
  }

  async remove(scope: TeamScope, id: string): Promise<void> {
    this.db
      .transaction(() => {
        if (!this.byId(id, scope)) throw new StoreError('not_found', `no API key has id '${id}'`);
        if (this.countNow() === 1) throw new StoreError('conflict', `API key '${id}' is the last one; create another before deleting it`);
        statement(this.db, 'DELETE FROM api_keys WHERE id = ?').run(id);
      })
      .immediate();
    this.touched.delete(id);
  }
}

// ---------------------------------------------------------------- the admin credential

export class SqliteAdminKeyRepository implements AdminKeyRepository {
  constructor(private readonly db: Db) {}

  async createFirst(key = newAdminKey()): Promise<{ id: string; key: string } | undefined> {
    return this.db
      .transaction(() => {
        if (statement(this.db, 'SELECT 1 FROM admin_keys LIMIT 1').get()) return undefined;
        const id = randomUUID();
        statement(this.db, 'INSERT INTO admin_keys (id, hash, created_at) VALUES (?, ?, ?)').run(id, hashOf(key), Date.now());
        return { id, key };
      })
      .immediate();
  }

  async verify(key: string | undefined): Promise<string | undefined> {
    if (!key) return undefined;
    const hash = hashOf(key);
    const row = statement(this.db, 'SELECT id, hash FROM admin_keys WHERE hash = ?').get(hash) as { id: string; hash: string } | undefined;
    if (!row || !timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined;
    return row.id;
  }
}

// ---------------------------------------------------------------- teams

interface TeamRow {
  id: string;
  name: string;
  created_at: number;
  max_sandboxes: number | null;
  max_memory_mb: number | null;
  max_disk_mb: number | null;
}

const teamFromRow = (r: TeamRow): TeamRecord => ({
  id: r.id,
  name: r.name,
  createdAt: r.created_at,
  limits: { maxSandboxes: r.max_sandboxes, maxMemoryMB: r.max_memory_mb, maxDiskMB: r.max_disk_mb },
});

export class SqliteTeamRepository implements TeamRepository {
  constructor(private readonly db: Db) {}

  private byId(id: string): TeamRecord | undefined {
    const r = statement(this.db, 'SELECT * FROM teams WHERE id = ?').get(id) as TeamRow | undefined;
    return r && teamFromRow(r);
  }

  async create(name: string, limits: Partial<TeamLimits> = {}): Promise<TeamRecord> {
    const id = randomUUID();
    try {
      statement(this.db, 'INSERT INTO teams (id, name, created_at, max_sandboxes, max_memory_mb, max_disk_mb) VALUES (?, ?, ?, ?, ?, ?)').run(
        id,
        name,
        Date.now(),
        limits.maxSandboxes ?? null,
        limits.maxMemoryMB ?? null,
        limits.maxDiskMB ?? null,
      );
    } catch (err) {
      if (isUniqueViolation(err)) throw new StoreError('conflict', `a team is already named '${name}'`);
      throw err;
    }
    return this.byId(id)!;
  }

  async get(id: string): Promise<TeamRecord | undefined> {
    return this.byId(id);
  }

  async byName(name: string): Promise<TeamRecord | undefined> {
    const r = statement(this.db, 'SELECT * FROM teams WHERE name = ?').get(name) as TeamRow | undefined;
    return r && teamFromRow(r);
  }

  async list(): Promise<TeamRecord[]> {
    return (statement(this.db, 'SELECT * FROM teams ORDER BY created_at, id').all() as TeamRow[]).map(teamFromRow);
  }

  async setLimits(id: string, limits: Partial<TeamLimits>): Promise<TeamRecord> {
    const set = (v: number | null | undefined) => (v === undefined ? 0 : 1);
    const changed = statement(
      this.db,
      `UPDATE teams SET
         max_sandboxes = CASE WHEN @setSandboxes THEN @sandboxes ELSE max_sandboxes END,
         max_memory_mb = CASE WHEN @setMemory THEN @memory ELSE max_memory_mb END,
         max_disk_mb = CASE WHEN @setDisk THEN @disk ELSE max_disk_mb END
       WHERE id = @id`,
    ).run({
      id,
      setSandboxes: set(limits.maxSandboxes),
      sandboxes: limits.maxSandboxes ?? null,
      setMemory: set(limits.maxMemoryMB),
      memory: limits.maxMemoryMB ?? null,
      setDisk: set(limits.maxDiskMB),
      disk: limits.maxDiskMB ?? null,
    }).changes;
    if (changed === 0) throw new StoreError('not_found', `team '${id}' not found`);
    return this.byId(id)!;
  }

  async remove(id: string): Promise<void> {
    this.db
      .transaction(() => {
        const team = this.byId(id);
        if (!team) throw new StoreError('not_found', `team '${id}' not found`);
        const live = (statement(this.db, "SELECT COUNT(*) AS n FROM sandboxes WHERE team_id = ? AND state != 'killed'").get(id) as { n: number }).n;
        if (live > 0) throw new StoreError('conflict', `team '${team.name}' has ${live} sandbox${live === 1 ? '' : 'es'} running or paused; kill them first`);
        const templates = (statement(this.db, 'SELECT COUNT(*) AS n FROM templates WHERE team_id = ?').get(id) as { n: number }).n;
        if (templates > 0) throw new StoreError('conflict', `team '${team.name}' has ${templates} template${templates === 1 ? '' : 's'} (snapshots and builds included); delete them first`);
        const others = (statement(this.db, 'SELECT COUNT(*) AS n FROM api_keys WHERE team_id != ?').get(id) as { n: number }).n;
        const own = (statement(this.db, 'SELECT COUNT(*) AS n FROM api_keys WHERE team_id = ?').get(id) as { n: number }).n;
        if (own > 0 && others === 0) throw new StoreError('conflict', `team '${team.name}' holds the server's last API keys; create a key in another team first`);
        statement(this.db, 'DELETE FROM teams WHERE id = ?').run(id);
      })
      .immediate();
  }
}

// ---------------------------------------------------------------- telemetry

interface SampleRow {
  ts: number;
  cpu_count: number;
  cpu_used_pct: number;
  mem_used: number;
  mem_total: number;
  mem_cache: number;
  disk_used: number;
  disk_total: number;
}

const sampleFromRow = (r: SampleRow): MetricSample => ({
  ts: r.ts,
  cpuCount: r.cpu_count,
  cpuUsedPct: r.cpu_used_pct,
  memUsed: r.mem_used,
  memTotal: r.mem_total,
  memCache: r.mem_cache,
  diskUsed: r.disk_used,
  diskTotal: r.disk_total,
});

export class SqliteTelemetryRepository implements TelemetryRepository {
  constructor(private readonly db: Db) {}

  async addSample(sandboxId: string, s: MetricSample): Promise<void> {
    statement(
      this.db,
      `INSERT OR REPLACE INTO metric_samples (sandbox_id, ts, cpu_count, cpu_used_pct, mem_used, mem_total, mem_cache, disk_used, disk_total)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(sandboxId, s.ts, s.cpuCount, s.cpuUsedPct, s.memUsed, s.memTotal, s.memCache, s.diskUsed, s.diskTotal);
  }

  async samples(sandboxId: string, from: number, to: number): Promise<MetricSample[]> {
    return (statement(this.db, 'SELECT * FROM metric_samples WHERE sandbox_id = ? AND ts >= ? AND ts <= ? ORDER BY ts').all(sandboxId, from, to) as SampleRow[]).map(
      sampleFromRow,
    );
  }

  async latestDiskUsed(): Promise<number> {
    const r = statement(
      this.db,
      `SELECT COALESCE(SUM(m.disk_used), 0) AS used FROM metric_samples m
       JOIN sandboxes s ON s.id = m.sandbox_id AND s.state = 'running'
       WHERE m.ts = (SELECT MAX(ts) FROM metric_samples WHERE sandbox_id = m.sandbox_id)`,
    ).get() as { used: number };
    return r.used;
  }

  async latest(sandboxId: string): Promise<MetricSample | undefined> {
    const r = statement(this.db, 'SELECT * FROM metric_samples WHERE sandbox_id = ? ORDER BY ts DESC LIMIT 1').get(sandboxId) as SampleRow | undefined;
    return r && sampleFromRow(r);
  }

  async log(sandboxId: string, level: LogLevel, message: string, fields: Record<string, string> = {}): Promise<void> {
    statement(this.db, 'INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES (?, ?, ?, ?, ?)').run(sandboxId, Date.now(), level, message, JSON.stringify(fields));
  }

  async logs(sandboxId: string, q: LogQuery): Promise<LogEntry[]> {
    const where = ['sandbox_id = ?'];
    const args: Array<string | number> = [sandboxId];
    if (q.fromTs !== undefined) {
      where.push(q.direction === 'forward' ? 'ts >= ?' : 'ts <= ?');
      args.push(q.fromTs);
    }
    if (q.levels) {
      where.push(`level IN (${q.levels.map(() => '?').join(', ')})`);
      args.push(...q.levels);
    }
    if (q.search) {
      where.push('instr(lower(message), lower(?)) > 0');
      args.push(q.search);
    }
    const order = q.direction === 'forward' ? 'ASC' : 'DESC';
    const rows = this.db.prepare(`SELECT * FROM sandbox_logs WHERE ${where.join(' AND ')} ORDER BY id ${order} LIMIT ?`).all(...args, q.limit) as Array<{
      id: number;
      ts: number;
      level: LogLevel;
      message: string;
      fields: string;
    }>;
    return rows.map((r) => ({ id: r.id, ts: r.ts, level: r.level, message: r.message, fields: JSON.parse(r.fields) as Record<string, string> }));
  }

  async purge(before: number): Promise<void> {
    this.db
      .transaction(() => {
        statement(this.db, 'DELETE FROM metric_samples WHERE ts < ?').run(before);
        statement(this.db, 'DELETE FROM sandbox_logs WHERE ts < ?').run(before);
      })
      .immediate();
  }
}
