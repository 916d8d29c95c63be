// Sandbox records. Times are unix milliseconds; JSON columns hold metadata,
// environment variables and network rules.
import { statement, type Db } from './db.js';

export type SandboxState = 'running' | 'paused' | 'killed';

export interface NetworkRules {
  allowOut?: string[];
  denyOut?: string[];
  allowPublicTraffic?: boolean;
  maskRequestHost?: string;
}

export interface SandboxRecord {
  id: string;
  templateId: string;
  alias: string | null;
  state: SandboxState;
  pausedWithMemory: boolean;
  startedAt: number;
  endAt: number;
  endedAt: number | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  envdAccessToken: string | null;
  trafficAccessToken: string | null;
  autoPause: boolean;
  autoPauseMemory: boolean;
  autoResume: boolean;
  allowInternetAccess: boolean | null;
  network: NetworkRules;
}

/** The part of a sandbox's record that routes requests to it. */
export type SandboxRoute = Pick<SandboxRecord, 'id' | 'state' | 'autoResume' | 'trafficAccessToken'>;

interface Row {
  id: string;
  template_id: string;
  alias: string | null;
  state: SandboxState;
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
}

function fromRow(r: Row): SandboxRecord {
  return {
    id: r.id,
    templateId: r.template_id,
    alias: r.alias,
    state: r.state,
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
  };
}

export interface ListFilter {
  states: Array<'running' | 'paused'>;
  metadata?: Record<string, string>;
  startedAfter?: number;
  templateIds?: string[];
  order: 'asc' | 'desc';
  limit: number;
  /** Continue after this (startedAt, id) position. */
  after?: { startedAt: number; id: string };
}

export class SandboxStore {
  /**
   * Routes of live sandboxes read so far, by id. The proxy asks on every
   * request, and an SQLite read (two fcntl locks and the query) was a tenth
   * of the relay's work on a short call. Only this class writes the table,
   * in this process, and each write that can change a route (insert,
   * setState) drops that id's entry.
   */
  private readonly routes = new Map<string, SandboxRoute>();

  constructor(private readonly db: Db) {}

  insert(s: SandboxRecord): void {
    statement(
      this.db,
      `INSERT INTO sandboxes (id, template_id, alias, state, paused_with_memory, started_at, end_at, ended_at, cpu_count, memory_mb,
           disk_size_mb, envd_version, metadata, env_vars, envd_access_token, traffic_access_token, auto_pause, auto_pause_memory,
           auto_resume, allow_internet_access, network)
         VALUES (@id, @templateId, @alias, @state, @pausedWithMemory, @startedAt, @endAt, @endedAt, @cpuCount, @memoryMB,
           @diskSizeMB, @envdVersion, @metadata, @envVars, @envdAccessToken, @trafficAccessToken, @autoPause, @autoPauseMemory,
           @autoResume, @allowInternetAccess, @network)`,
    ).run({
      ...s,
      pausedWithMemory: s.pausedWithMemory ? 1 : 0,
      metadata: JSON.stringify(s.metadata),
      envVars: JSON.stringify(s.envVars),
      autoPause: s.autoPause ? 1 : 0,
      autoPauseMemory: s.autoPauseMemory ? 1 : 0,
      autoResume: s.autoResume ? 1 : 0,
      allowInternetAccess: s.allowInternetAccess === null ? null : s.allowInternetAccess ? 1 : 0,
      network: JSON.stringify(s.network),
    });
    this.routes.delete(s.id);
  }

  get(id: string): SandboxRecord | undefined {
    const r = statement(this.db, 'SELECT * FROM sandboxes WHERE id = ?').get(id) as Row | undefined;
    return r && fromRow(r);
  }

  /** A sandbox that exists for clients: not killed. */
  live(id: string): SandboxRecord | undefined {
    const s = this.get(id);
    return s && s.state !== 'killed' ? s : undefined;
  }

  /**
   * What the proxy needs of a live sandbox to route a request to it, read
   * without the rest of the record: the proxy asks on every request, and
   * the whole row with its JSON fields took three times as long.
   */
  route(id: string): SandboxRoute | undefined {
    const known = this.routes.get(id);
    if (known) return known;
    const r = statement(
      this.db,
      "SELECT id, state, auto_resume, traffic_access_token FROM sandboxes WHERE id = ? AND state != 'killed'",
    ).get(id) as Pick<Row, 'id' | 'state' | 'auto_resume' | 'traffic_access_token'> | undefined;
    // Ids with no live sandbox are not kept: anyone may send any id.
    if (!r) return undefined;
    const route = { id: r.id, state: r.state, autoResume: r.auto_resume === 1, trafficAccessToken: r.traffic_access_token };
    this.routes.set(id, route);
    return route;
  }

  setState(id: string, state: SandboxState, pausedWithMemory = false): void {
    statement(this.db, 'UPDATE sandboxes SET state = ?, paused_with_memory = ?, ended_at = CASE WHEN ? = \'killed\' THEN ? ELSE ended_at END WHERE id = ?')
      .run(state, pausedWithMemory ? 1 : 0, state, Date.now(), id);
    this.routes.delete(id);
  }

  setEndAt(id: string, endAt: number): void {
    statement(this.db, 'UPDATE sandboxes SET end_at = ? WHERE id = ?').run(endAt, id);
  }

  setNetwork(id: string, network: NetworkRules, allowInternetAccess: boolean | null): void {
    statement(this.db, 'UPDATE sandboxes SET network = ?, allow_internet_access = ? WHERE id = ?').run(JSON.stringify(network), allowInternetAccess === null ? null : allowInternetAccess ? 1 : 0, id);
  }

  /** Running and paused sandboxes. */
  allLive(): SandboxRecord[] {
    return (statement(this.db, "SELECT * FROM sandboxes WHERE state != 'killed'").all() as Row[]).map(fromRow);
  }

  running(): SandboxRecord[] {
    return (statement(this.db, "SELECT * FROM sandboxes WHERE state = 'running'").all() as Row[]).map(fromRow);
  }

  countRunning(): number {
    return (statement(this.db, "SELECT COUNT(*) AS n FROM sandboxes WHERE state = 'running'").get() as { n: number }).n;
  }

  /** The running sandbox that expires first. */
  nextExpiry(): number | undefined {
    const r = statement(this.db, "SELECT MIN(end_at) AS t FROM sandboxes WHERE state = 'running'").get() as { t: number | null };
    return r.t ?? undefined;
  }

  expired(now: number): SandboxRecord[] {
    return (statement(this.db, "SELECT * FROM sandboxes WHERE state = 'running' AND end_at <= ?").all(now) as Row[]).map(fromRow);
  }

  /** One page of sandboxes, ordered by start time then id; metadata filtered here. */
  list(f: ListFilter): SandboxRecord[] {
    const where = [`state IN (${f.states.map(() => '?').join(', ')})`];
    const args: Array<string | number> = [...f.states];
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
      args.push(f.after.startedAt, f.after.id);
    }
    const sql = `SELECT * FROM sandboxes WHERE ${where.join(' AND ')} ORDER BY started_at ${dir}, id ${dir} LIMIT ?`;
    return (this.db.prepare(sql).all(...args, f.limit) as Row[]).map(fromRow);
  }

  /** Forgets killed sandboxes that ended before `before`. */
  purgeKilled(before: number): number {
    return statement(this.db, "DELETE FROM sandboxes WHERE state = 'killed' AND ended_at < ?").run(before).changes;
  }
}
