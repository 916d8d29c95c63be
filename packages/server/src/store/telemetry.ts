// Metric samples and lifecycle logs of sandboxes.
import type { Db } from './db.js';

export interface MetricSample {
  ts: number;
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  memCache: number;
  diskUsed: number;
  diskTotal: number;
}

export interface LogEntry {
  id: number;
  ts: number;
  level: 'debug' | 'info' | 'warn' | 'error';
  message: string;
  fields: Record<string, string>;
}

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

export class Telemetry {
  constructor(private readonly db: Db) {}

  addSample(sandboxId: string, s: MetricSample): void {
    this.db
      .prepare(
        `INSERT OR REPLACE INTO metric_samples (sandbox_id, ts, cpu_count, cpu_used_pct, mem_used, mem_total, mem_cache, disk_used, disk_total)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(sandboxId, s.ts, s.cpuCount, s.cpuUsedPct, s.memUsed, s.memTotal, s.memCache, s.diskUsed, s.diskTotal);
  }

  /** Samples with `from <= ts <= to` (milliseconds), oldest first. */
  samples(sandboxId: string, from: number, to: number): MetricSample[] {
    return (this.db.prepare('SELECT * FROM metric_samples WHERE sandbox_id = ? AND ts >= ? AND ts <= ? ORDER BY ts').all(sandboxId, from, to) as SampleRow[]).map(sampleFromRow);
  }

  latest(sandboxId: string): MetricSample | undefined {
    const r = this.db.prepare('SELECT * FROM metric_samples WHERE sandbox_id = ? ORDER BY ts DESC LIMIT 1').get(sandboxId) as SampleRow | undefined;
    return r && sampleFromRow(r);
  }

  log(sandboxId: string, level: LogEntry['level'], message: string, fields: Record<string, string> = {}): void {
    this.db.prepare('INSERT INTO sandbox_logs (sandbox_id, ts, level, message, fields) VALUES (?, ?, ?, ?, ?)').run(sandboxId, Date.now(), level, message, JSON.stringify(fields));
  }

  logs(
    sandboxId: string,
    q: { fromTs?: number; limit: number; direction: 'forward' | 'backward'; levels?: string[]; search?: string },
  ): LogEntry[] {
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
      where.push("instr(lower(message), lower(?)) > 0");
      args.push(q.search);
    }
    const order = q.direction === 'forward' ? 'ASC' : 'DESC';
    const rows = this.db.prepare(`SELECT * FROM sandbox_logs WHERE ${where.join(' AND ')} ORDER BY id ${order} LIMIT ?`).all(...args, q.limit) as Array<{
      id: number;
      ts: number;
      level: LogEntry['level'];
      message: string;
      fields: string;
    }>;
    return rows.map((r) => ({ id: r.id, ts: r.ts, level: r.level, message: r.message, fields: JSON.parse(r.fields) as Record<string, string> }));
  }

  /** Drops samples and logs older than `before`. */
  purge(before: number): void {
    this.db.prepare('DELETE FROM metric_samples WHERE ts < ?').run(before);
    this.db.prepare('DELETE FROM sandbox_logs WHERE ts < ?').run(before);
  }
}
