// The SQLite file the embedded store keeps the server's state in. Migrations
// run in order inside a transaction each; the applied version is SQLite's
// user_version. A migration only adds: a file of an older version opens.
import Database from 'better-sqlite3';
import { chmodSync, existsSync } from 'node:fs';

export type Db = Database.Database;

/**
 * A migration: its SQL, and whether it rebuilds a table that others refer to,
 * which SQLite allows only with foreign keys off (a dropped table's rows
 * would otherwise be deleted, and their dependents with them).
 */
type Migration = string | { sql: string; rebuildsTables: true };

const MIGRATIONS: Migration[] = [
  // 1: everything the control API keeps
  `
  CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    mask TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER
  );

  CREATE TABLE templates (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('base', 'snapshot')),
    public INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_spawned_at INTEGER,
    spawn_count INTEGER NOT NULL DEFAULT 0,
    source_sandbox_id TEXT
  );

  CREATE TABLE template_names (
    name TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE
  );

  CREATE TABLE builds (
    id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER,
    cpu_count INTEGER NOT NULL,
    memory_mb INTEGER NOT NULL,
    disk_size_mb INTEGER NOT NULL,
    envd_version TEXT NOT NULL
  );
  CREATE INDEX builds_template ON builds(template_id, created_at);

  CREATE TABLE template_tags (
    template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    build_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (template_id, tag)
  );

  CREATE TABLE sandboxes (
    id TEXT PRIMARY KEY,
    template_id TEXT NOT NULL,
    alias TEXT,
    state TEXT NOT NULL CHECK (state IN ('running', 'paused', 'killed')),
    paused_with_memory INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    end_at INTEGER NOT NULL,
    ended_at INTEGER,
    cpu_count INTEGER NOT NULL,
    memory_mb INTEGER NOT NULL,
    disk_size_mb INTEGER NOT NULL,
    envd_version TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    env_vars TEXT NOT NULL DEFAULT '{}',
    envd_access_token TEXT,
    traffic_access_token TEXT,
    auto_pause INTEGER NOT NULL DEFAULT 0,
    auto_pause_memory INTEGER NOT NULL DEFAULT 1,
    auto_resume INTEGER NOT NULL DEFAULT 0,
    allow_internet_access INTEGER,
    network TEXT NOT NULL DEFAULT '{}'
  );
  CREATE INDEX sandboxes_listing ON sandboxes(state, started_at, id);

  CREATE TABLE metric_samples (
    sandbox_id TEXT NOT NULL,
    ts INTEGER NOT NULL,
    cpu_count INTEGER NOT NULL,
    cpu_used_pct REAL NOT NULL,
    mem_used INTEGER NOT NULL,
    mem_total INTEGER NOT NULL,
    mem_cache INTEGER NOT NULL,
    disk_used INTEGER NOT NULL,
    disk_total INTEGER NOT NULL,
    PRIMARY KEY (sandbox_id, ts)
  );

  CREATE TABLE sandbox_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id TEXT NOT NULL,
    ts INTEGER NOT NULL,
    level TEXT NOT NULL,
    message TEXT NOT NULL,
    fields TEXT NOT NULL DEFAULT '{}'
  );
  CREATE INDEX sandbox_logs_sandbox ON sandbox_logs(sandbox_id, id);
  `,
  // 2: a change of a sandbox's state claimed by a server process while the
  // runtime does it; the length of each API key after its prefix (for its mask)
  `
  ALTER TABLE sandboxes ADD COLUMN pending_change TEXT CHECK (pending_change IN ('pausing', 'resuming'));
  ALTER TABLE sandboxes ADD COLUMN claim_token TEXT;
  ALTER TABLE sandboxes ADD COLUMN claimed_at INTEGER;
  ALTER TABLE api_keys ADD COLUMN value_length INTEGER;
  `,
  // 3: templates built by the build API: their kind, what each build made
  // and how it ended, and the builds' logs
  {
    rebuildsTables: true,
    sql: `
    CREATE TABLE templates_new (
      id TEXT PRIMARY KEY,
      kind TEXT NOT NULL CHECK (kind IN ('base', 'snapshot', 'build')),
      public INTEGER NOT NULL DEFAULT 0,
      created_at INTEGER NOT NULL,
      updated_at INTEGER NOT NULL,
      last_spawned_at INTEGER,
      spawn_count INTEGER NOT NULL DEFAULT 0,
      source_sandbox_id TEXT
    );
    INSERT INTO templates_new SELECT id, kind, public, created_at, updated_at, last_spawned_at, spawn_count, source_sandbox_id FROM templates;
    DROP TABLE templates;
    ALTER TABLE templates_new RENAME TO templates;

    ALTER TABLE builds ADD COLUMN runtime_template_id TEXT;
    ALTER TABLE builds ADD COLUMN start_cmd TEXT;
    ALTER TABLE builds ADD COLUMN ready_cmd TEXT;
    ALTER TABLE builds ADD COLUMN reason TEXT;
    ALTER TABLE builds ADD COLUMN tags TEXT NOT NULL DEFAULT '[]';

    CREATE TABLE build_logs (
      build_id TEXT NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      ts INTEGER NOT NULL,
      level TEXT NOT NULL,
      message TEXT NOT NULL,
      step TEXT,
      PRIMARY KEY (build_id, seq)
    );
    `,
  },
  // 4: the build a sandbox was made from (its start command runs again at a reboot)
  `
  ALTER TABLE sandboxes ADD COLUMN build_id TEXT;
  `,
  // 5: the API key that made a sandbox (per-key limits); null for older records and for forks of those
  `
  ALTER TABLE sandboxes ADD COLUMN api_key_id TEXT;
  CREATE INDEX sandboxes_key_state ON sandboxes(api_key_id, state);
  `,
  // 6: teams. Every key, sandbox and template belongs to one; what there was
  // goes to the team 'default', so every key still reaches what it made.
  // Template names are unique within a team. The admin credential manages
  // teams and keys.
  `
  CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    max_sandboxes INTEGER,
    max_memory_mb INTEGER,
    max_disk_mb INTEGER
  );
  INSERT INTO teams (id, name, created_at) VALUES (
    lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
      substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    'default',
    CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
  );

  ALTER TABLE api_keys ADD COLUMN team_id TEXT REFERENCES teams(id) ON DELETE CASCADE;
  UPDATE api_keys SET team_id = (SELECT id FROM teams WHERE name = 'default');
  CREATE INDEX api_keys_team ON api_keys(team_id);

  ALTER TABLE sandboxes ADD COLUMN team_id TEXT;
  UPDATE sandboxes SET team_id = (SELECT id FROM teams WHERE name = 'default');
  CREATE INDEX sandboxes_team_state ON sandboxes(team_id, state);

  ALTER TABLE templates ADD COLUMN team_id TEXT;
  UPDATE templates SET team_id = (SELECT id FROM teams WHERE name = 'default');

  CREATE TABLE template_names_new (
    team_id TEXT NOT NULL,
    name TEXT NOT NULL,
    template_id TEXT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
    PRIMARY KEY (team_id, name)
  );
  INSERT INTO template_names_new (team_id, name, template_id)
    SELECT t.team_id, n.name, n.template_id FROM template_names n JOIN templates t ON t.id = n.template_id;
  DROP TABLE template_names;
  ALTER TABLE template_names_new RENAME TO template_names;
  CREATE INDEX template_names_template ON template_names(template_id);
  CREATE INDEX template_names_name ON template_names(name);

  CREATE TABLE admin_keys (
    id TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
  );
  `,
];

/** The schema version this code writes. */
export const SCHEMA_VERSION = MIGRATIONS.length;

const prepared = new WeakMap<Db, Map<string, Database.Statement>>();

/**
 * The statement for `sql`, prepared once per database. Preparing parses and
 * plans the SQL, which costs more than running a lookup by key; the proxy
 * looks a sandbox up on every request.
 */
export function statement(db: Db, sql: string): Database.Statement {
  let byText = prepared.get(db);
  if (!byText) prepared.set(db, (byText = new Map()));
  let stmt = byText.get(sql);
  if (!stmt) byText.set(sql, (stmt = db.prepare(sql)));
  return stmt;
}

/** How long a statement waits for another process's lock on the file. */
const BUSY_TIMEOUT_MS = 5000;

/**
 * Switches the file to write-ahead logging. Two processes doing so on one
 * new file at the same moment can each hold a lock the other needs; SQLite
 * then answers SQLITE_BUSY at once, without waiting (its busy handler is
 * not called). The switch is asked again, 10 ms apart, for as long as a
 * statement would wait.
 */
function useWal(db: Db): void {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (;;) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

export function openDb(file: string): Db {
  const fresh = !existsSync(file);
  const db = new Database(file);
  if (fresh) chmodSync(file, 0o600); // API key hashes and sandbox tokens
  // First: another process migrating the file holds its lock, and switching to WAL waits for it too.
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  useWal(db);
  // Every state change is in the write-ahead log before it is answered, so a
  // crash of the server (or a kill -9) loses none. It is not flushed to the
  // device at each commit (FULL did: an fsync of about a millisecond here,
  // several per create, each stalling the event loop and every request the
  // proxy relays): a crash of the machine may lose the last changes, never
  // the database, and the sandboxes' own files and processes do not outlive
  // such a crash either.
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  try {
    migrate(db);
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}

/**
 * Applies the migrations up to `target` (all of them unless told); the
 * version reached. Each step re-reads the version under the write lock, so
 * that two processes opening the file at once apply each migration once.
 */
export function migrate(db: Db, target = MIGRATIONS.length): number {
  const version = () => db.pragma('user_version', { simple: true }) as number;
  const step = db.transaction(() => {
    const v = version();
    if (v > MIGRATIONS.length) {
      throw new Error(`the database is at schema version ${v}, newer than this server knows (${MIGRATIONS.length}); upgrade Paddock`);
    }
    if (v >= target) return false;
    const m = MIGRATIONS[v]!;
    db.exec(typeof m === 'string' ? m : m.sql);
    if (typeof m !== 'string' && (db.pragma('foreign_key_check') as unknown[]).length > 0) {
      throw new Error(`migration ${v + 1} left rows whose references do not resolve`);
    }
    db.pragma(`user_version = ${v + 1}`);
    return true;
  });
  for (;;) {
    // The pragma is a no-op inside a transaction: it is set around it.
    const rebuilds = typeof MIGRATIONS[version()] === 'object';
    if (rebuilds) db.pragma('foreign_keys = OFF');
    try {
      if (!step.immediate()) break;
    } finally {
      if (rebuilds) db.pragma('foreign_keys = ON');
    }
  }
  return version();
}
