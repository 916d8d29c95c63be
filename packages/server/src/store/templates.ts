// Template records: the built-in base template and snapshots, their names
// (aliases), builds and tags. Each template has one build: Paddock makes
// templates from the host or from sandboxes, not from build steps (yet).
import { randomUUID } from 'node:crypto';
import type { Db } from './db.js';

export interface BuildRecord {
  id: string;
  templateId: string;
  status: 'building' | 'waiting' | 'ready' | 'error';
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
}

export interface TemplateRecord {
  id: string;
  kind: 'base' | 'snapshot';
  public: boolean;
  createdAt: number;
  updatedAt: number;
  lastSpawnedAt: number | null;
  spawnCount: number;
  sourceSandboxId: string | null;
  names: string[];
  builds: BuildRecord[];
}

interface TemplateRow {
  id: string;
  kind: 'base' | 'snapshot';
  public: number;
  created_at: number;
  updated_at: number;
  last_spawned_at: number | null;
  spawn_count: number;
  source_sandbox_id: string | null;
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
});

export interface NewTemplate {
  id: string;
  kind: 'base' | 'snapshot';
  public: boolean;
  names: string[];
  sourceSandboxId?: string;
  cpuCount: number;
  memoryMB: number;
  diskSizeMB: number;
  envdVersion: string;
}

export class TemplateStore {
  constructor(private readonly db: Db) {}

  private hydrate(r: TemplateRow): TemplateRecord {
    const names = (this.db.prepare('SELECT name FROM template_names WHERE template_id = ? ORDER BY name').all(r.id) as Array<{ name: string }>).map((n) => n.name);
    const builds = (this.db.prepare('SELECT * FROM builds WHERE template_id = ? ORDER BY created_at DESC, id').all(r.id) as BuildRow[]).map(buildFromRow);
    return {
      id: r.id,
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

  get(id: string): TemplateRecord | undefined {
    const r = this.db.prepare('SELECT * FROM templates WHERE id = ?').get(id) as TemplateRow | undefined;
    return r && this.hydrate(r);
  }

  byName(name: string): TemplateRecord | undefined {
    const r = this.db.prepare('SELECT template_id FROM template_names WHERE name = ?').get(name) as { template_id: string } | undefined;
    return r && this.get(r.template_id);
  }

  /** By id, by name, or `name:tag` (a tag must exist on the template). */
  resolve(ref: string): TemplateRecord | undefined {
    const direct = this.get(ref) ?? this.byName(ref);
    if (direct) return direct;
    const colon = ref.lastIndexOf(':');
    if (colon <= 0) return undefined;
    const t = this.get(ref.slice(0, colon)) ?? this.byName(ref.slice(0, colon));
    return t && this.tag(t.id, ref.slice(colon + 1)) ? t : undefined;
  }

  list(kind?: 'snapshot'): TemplateRecord[] {
    const rows = (kind
      ? this.db.prepare('SELECT * FROM templates WHERE kind = ? ORDER BY created_at, id').all(kind)
      : this.db.prepare('SELECT * FROM templates ORDER BY created_at, id').all()) as TemplateRow[];
    return rows.map((r) => this.hydrate(r));
  }

  insert(t: NewTemplate): TemplateRecord {
    const now = Date.now();
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO templates (id, kind, public, created_at, updated_at, source_sandbox_id) VALUES (?, ?, ?, ?, ?, ?)')
        .run(t.id, t.kind, t.public ? 1 : 0, now, now, t.sourceSandboxId ?? null);
      for (const name of t.names) this.db.prepare('INSERT INTO template_names (name, template_id) VALUES (?, ?)').run(name, t.id);
      this.db
        .prepare(
          `INSERT INTO builds (id, template_id, status, created_at, updated_at, finished_at, cpu_count, memory_mb, disk_size_mb, envd_version)
           VALUES (?, ?, 'ready', ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(randomUUID(), t.id, now, now, now, t.cpuCount, t.memoryMB, t.diskSizeMB, t.envdVersion);
    })();
    return this.get(t.id)!;
  }

  nameTaken(name: string): boolean {
    return this.db.prepare('SELECT 1 FROM template_names WHERE name = ?').get(name) !== undefined;
  }

  remove(id: string): void {
    this.db.prepare('DELETE FROM templates WHERE id = ?').run(id);
  }

  setPublic(id: string, isPublic: boolean): void {
    this.db.prepare('UPDATE templates SET public = ?, updated_at = ? WHERE id = ?').run(isPublic ? 1 : 0, Date.now(), id);
  }

  spawned(id: string): void {
    this.db.prepare('UPDATE templates SET spawn_count = spawn_count + 1, last_spawned_at = ? WHERE id = ?').run(Date.now(), id);
  }

  tag(templateId: string, tag: string): { tag: string; buildId: string; createdAt: number } | undefined {
    const r = this.db.prepare('SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? AND tag = ?').get(templateId, tag) as
      | { tag: string; build_id: string; created_at: number }
      | undefined;
    return r && { tag: r.tag, buildId: r.build_id, createdAt: r.created_at };
  }

  tags(templateId: string): Array<{ tag: string; buildId: string; createdAt: number }> {
    return (this.db.prepare('SELECT tag, build_id, created_at FROM template_tags WHERE template_id = ? ORDER BY tag').all(templateId) as Array<{
      tag: string;
      build_id: string;
      created_at: number;
    }>).map((r) => ({ tag: r.tag, buildId: r.build_id, createdAt: r.created_at }));
  }

  assignTags(templateId: string, buildId: string, tags: string[]): void {
    const now = Date.now();
    const stmt = this.db.prepare(
      'INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (template_id, tag) DO UPDATE SET build_id = excluded.build_id, created_at = excluded.created_at',
    );
    this.db.transaction(() => {
      for (const t of tags) stmt.run(templateId, t, buildId, now);
    })();
  }

  deleteTags(templateId: string, tags: string[]): number {
    const stmt = this.db.prepare('DELETE FROM template_tags WHERE template_id = ? AND tag = ?');
    let n = 0;
    this.db.transaction(() => {
      for (const t of tags) n += stmt.run(templateId, t).changes;
    })();
    return n;
  }
}
