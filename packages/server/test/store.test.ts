// The repositories on a real SQLite file: each operation, the changes of a
// sandbox's state they refuse, and processes on one file racing a change.
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { migrate, SCHEMA_VERSION } from '../src/store/db.js';
import { newApiKey, StoreError, type NewSandboxRecord, type Repositories, type SandboxRecord, type TemplateViewer } from '../src/store/repositories.js';
import { openSqliteStore } from '../src/store/sqlite.js';

let dir: string;
let file: string;
let store: Repositories;
const opened: Repositories[] = [];
/** The default team, which a new store has. */
let team: string;
/** Every team's templates. */
const ALL: TemplateViewer = { scope: 'all', publicToo: true };

/** Removes the database file (closed first), its WAL and shared memory. */
const removeFile = () => {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
};

/** Another connection to the same file, as another server process would have. */
function another(): Repositories {
  const s = openSqliteStore(file);
  opened.push(s);
  return s;
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-store-'));
  file = join(dir, 'paddock.db');
  store = another();
  team = (await store.teams.byName('default'))!.id;
});

afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

function sandbox(id: string, over: Partial<NewSandboxRecord> = {}): NewSandboxRecord {
  const now = Date.now();
  return {
    id,
    templateId: 'base',
    alias: 'base',
    startedAt: now,
    endAt: now + 60_000,
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    envdVersion: '0.5.7',
    metadata: { team: 'a' },
    envVars: { A: '1' },
    envdAccessToken: 'envd-token',
    trafficAccessToken: null,
    autoPause: false,
    autoPauseMemory: false,
    autoResume: false,
    allowInternetAccess: null,
    network: {},
    teamId: team,
    ...over,
  };
}

/** The refusal a promise ends with. */
async function refusal(p: Promise<unknown>): Promise<{ kind: string; message: string }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof StoreError)) throw new Error(`expected a refusal, got ${String(err)}`);
  return { kind: err.kind, message: err.message };
}

describe('sandboxes', () => {
  test('insert records a running sandbox with every field as given', async () => {
    const given = sandbox('new1', { metadata: { k: 'v' }, network: { allowOut: ['10.0.0.0/8'] }, allowInternetAccess: false, autoResume: true, buildId: 'build-1', apiKeyId: 'key-1' });
    const r = await store.sandboxes.insert(given);
    expect(r).toEqual({ ...given, state: 'running', pendingChange: null, pausedWithMemory: false, endedAt: null });
    expect(await store.sandboxes.countRunningByKey('key-1')).toBe(1);
    expect(await store.sandboxes.countRunningByKey('key-2')).toBe(0);
    expect((await store.sandboxes.insert(sandbox('new2'))).apiKeyId).toBeNull();
    expect(await store.sandboxes.get('new1')).toEqual(r);
    expect(await store.sandboxes.live('new1')).toEqual(r);
    expect(await store.sandboxes.get('nosuch')).toBeUndefined();
  });

  test('running → paused → running → killed, each field that goes with the state set', async () => {
    const s = store.sandboxes;
    const { endAt } = await s.insert(sandbox('life1'));
    const paused = await s.transition('life1', 'paused', { pausedWithMemory: true });
    expect([paused.state, paused.pausedWithMemory]).toEqual(['paused', true]);
    // Resuming keeps a later expiry and takes a later one.
    expect((await s.transition('life1', 'running', { extendTo: endAt - 1000 })).endAt).toBe(endAt);
    await s.transition('life1', 'paused');
    const resumed = await s.transition('life1', 'running', { extendTo: endAt + 5000 });
    expect([resumed.state, resumed.pausedWithMemory, resumed.endAt]).toEqual(['running', false, endAt + 5000]);
    const before = Date.now();
    const killed = await s.transition('life1', 'killed');
    expect(killed.state).toBe('killed');
    expect(killed.endedAt).toBeGreaterThanOrEqual(before);
    expect(await s.live('life1')).toBeUndefined();
    expect((await s.get('life1'))?.state).toBe('killed');
  });

  test('a change the state does not allow is refused and changes nothing', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('run1'));
    expect(await refusal(s.transition('run1', 'running'))).toEqual({ kind: 'conflict', message: "sandbox 'run1' is running, not paused" });
    await s.transition('run1', 'paused');
    expect(await refusal(s.transition('run1', 'paused'))).toEqual({ kind: 'conflict', message: "sandbox 'run1' is paused, not running" });
    expect(await refusal(s.claim('run1', 'paused'))).toEqual({ kind: 'conflict', message: "sandbox 'run1' is paused, not running" });
    await s.transition('run1', 'killed');
    for (const to of ['running', 'paused', 'killed'] as const) {
      expect(await refusal(s.transition('run1', to))).toEqual({ kind: 'not_found', message: "sandbox 'run1' not found" });
    }
    expect(await refusal(s.transition('nosuch', 'killed'))).toEqual({ kind: 'not_found', message: "sandbox 'nosuch' not found" });
    expect(await refusal(s.claim('nosuch', 'running'))).toMatchObject({ kind: 'not_found' });
    expect((await s.get('run1'))?.state).toBe('killed');
  });

  test('expiry changes only a sandbox that has expired by the time given', async () => {
    const s = store.sandboxes;
    const { endAt } = await s.insert(sandbox('exp1'));
    expect(await refusal(s.transition('exp1', 'killed', { expiredBy: endAt - 1 }))).toEqual({
      kind: 'conflict',
      message: `sandbox 'exp1' has not expired: it ends at ${new Date(endAt).toISOString()}`,
    });
    expect(await refusal(s.claim('exp1', 'paused', { expiredBy: endAt - 1 }))).toMatchObject({ kind: 'conflict' });
    expect((await s.get('exp1'))?.state).toBe('running');
    expect((await s.transition('exp1', 'killed', { expiredBy: endAt })).state).toBe('killed');
  });

  test('a claim holds off every other change until it is completed or abandoned', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('clm1'));
    const claim = await s.claim('clm1', 'paused');
    expect(claim.record).toMatchObject({ id: 'clm1', state: 'running', pendingChange: null });
    expect((await s.get('clm1'))?.pendingChange).toBe('pausing');
    const busy = { kind: 'conflict', message: "sandbox 'clm1' is being paused by another request" };
    expect(await refusal(s.claim('clm1', 'paused'))).toEqual(busy);
    expect(await refusal(s.transition('clm1', 'killed'))).toEqual(busy);
    expect(await refusal(another().sandboxes.transition('clm1', 'paused'))).toEqual(busy);
    // Fields other than the state may still change.
    expect((await s.update('clm1', () => ({ endAt: 1 }))).endAt).toBe(1);

    const done = await claim.complete({ pausedWithMemory: true });
    expect(done).toMatchObject({ state: 'paused', pausedWithMemory: true, pendingChange: null });
    expect(await refusal(claim.complete())).toMatchObject({ kind: 'conflict' });

    const failed = await s.claim('clm1', 'running');
    expect((await s.get('clm1'))?.pendingChange).toBe('resuming');
    await failed.abandon();
    expect(await s.get('clm1')).toMatchObject({ state: 'paused', pendingChange: null });
    expect((await s.transition('clm1', 'killed')).state).toBe('killed');
  });

  test('update sets fields from what they are now, and refuses a killed or unknown sandbox', async () => {
    const s = store.sandboxes;
    const { endAt } = await s.insert(sandbox('upd1', { allowInternetAccess: true, network: { denyOut: ['0.0.0.0/0'] } }));
    const later = await s.update('upd1', (now) => ({ endAt: now.endAt + 1000 }));
    expect(later).toMatchObject({ endAt: endAt + 1000, allowInternetAccess: true, network: { denyOut: ['0.0.0.0/0'] } });
    const cleared = await s.update('upd1', () => ({ network: { allowOut: ['example.com'] }, allowInternetAccess: null }));
    expect(cleared).toMatchObject({ endAt: endAt + 1000, allowInternetAccess: null, network: { allowOut: ['example.com'] } });
    await s.transition('upd1', 'killed');
    expect(await refusal(s.update('upd1', () => ({ endAt: 5 })))).toEqual({ kind: 'not_found', message: "sandbox 'upd1' not found" });
    expect(await refusal(s.update('nosuch', () => ({ endAt: 5 })))).toMatchObject({ kind: 'not_found' });
  });

  test('list: states, metadata, template and start filters; pages in either order', async () => {
    const s = store.sandboxes;
    const t0 = 1_700_000_000_000;
    for (let i = 0; i < 5; i++) await s.insert(sandbox(`l${i}`, { startedAt: t0 + i, metadata: { n: String(i % 2) }, templateId: i < 4 ? 'base' : 'other' }));
    await s.transition('l1', 'paused');
    const ids = (rs: SandboxRecord[]) => rs.map((r) => r.id);
    const all = { scope: 'all' as const, states: ['running', 'paused'] as Array<'running' | 'paused'>, order: 'asc' as const, limit: 10 };
    expect(ids(await s.list(all))).toEqual(['l0', 'l1', 'l2', 'l3', 'l4']);
    expect(ids(await s.list({ ...all, order: 'desc' }))).toEqual(['l4', 'l3', 'l2', 'l1', 'l0']);
    expect(ids(await s.list({ ...all, states: ['paused'] }))).toEqual(['l1']);
    expect(ids(await s.list({ ...all, metadata: { n: '1' } }))).toEqual(['l1', 'l3']);
    expect(ids(await s.list({ ...all, templateIds: ['other'] }))).toEqual(['l4']);
    expect(ids(await s.list({ ...all, templateIds: [] }))).toEqual([]);
    expect(ids(await s.list({ ...all, startedAfter: t0 + 3 }))).toEqual(['l3', 'l4']);
    expect(ids(await s.list({ ...all, limit: 2, after: { key: t0 + 1, id: 'l1' } }))).toEqual(['l2', 'l3']);
    expect(ids(await s.list({ ...all, order: 'desc', limit: 2, after: { key: t0 + 3, id: 'l3' } }))).toEqual(['l2', 'l1']);
    expect(await s.countRunning('all')).toBe(4);
    expect(ids(await s.running())).toEqual(['l0', 'l2', 'l3', 'l4']);
    expect(ids(await s.allLive()).sort()).toEqual(['l0', 'l1', 'l2', 'l3', 'l4']);
  });

  test('nextExpiry and expired look at running sandboxes only', async () => {
    const s = store.sandboxes;
    expect(await s.nextExpiry()).toBeUndefined();
    await s.insert(sandbox('e1', { endAt: 1000 }));
    await s.insert(sandbox('e2', { endAt: 2000 }));
    await s.insert(sandbox('e3', { endAt: 500 }));
    await s.transition('e3', 'paused');
    expect(await s.nextExpiry()).toBe(1000);
    expect((await s.expired(1500)).map((r) => r.id)).toEqual(['e1']);
    expect((await s.expired(2000)).map((r) => r.id).sort()).toEqual(['e1', 'e2']);
  });

  test('reconcile: lost ones killed, stopped ones paused, claims dropped, and what the runtime must do reported', async () => {
    const s = store.sandboxes;
    for (const id of ['ok1', 'gone1', 'stopped1', 'frozen1', 'thawed1', 'claimed1']) await s.insert(sandbox(id));
    await s.transition('thawed1', 'paused', { pausedWithMemory: true });
    const claim = await s.claim('claimed1', 'paused');
    const onHost = new Map([
      ['ok1', 'running'],
      ['stopped1', 'stopped'],
      ['frozen1', 'paused'],
      ['thawed1', 'running'],
      ['claimed1', 'running'],
      ['stray1', 'running'],
    ] as const);
    const outcome = await s.reconcile(onHost);
    expect(outcome).toEqual({
      adopted: ['ok1', 'thawed1', 'claimed1'],
      lost: ['gone1'],
      markedPaused: [
        { id: 'stopped1', found: 'stopped' },
        { id: 'frozen1', found: 'paused' },
      ],
      toFreeze: ['thawed1'],
      strays: ['stray1'],
    });
    expect((await s.get('gone1'))?.state).toBe('killed');
    expect(await s.get('stopped1')).toMatchObject({ state: 'paused', pausedWithMemory: false });
    expect(await s.get('frozen1')).toMatchObject({ state: 'paused', pausedWithMemory: true });
    expect(await s.get('claimed1')).toMatchObject({ state: 'running', pendingChange: null });
    // The claim of a process that died is gone: its holder can no longer complete it.
    expect(await refusal(claim.complete())).toMatchObject({ kind: 'conflict' });
    expect((await s.claim('claimed1', 'paused')).record.id).toBe('claimed1');
  });

  test('purgeKilled forgets killed sandboxes that ended before the time given', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('p1'));
    await s.insert(sandbox('p2'));
    await s.transition('p1', 'killed');
    expect(await s.purgeKilled(Date.now() + 1)).toBe(1);
    expect(await s.get('p1')).toBeUndefined();
    expect(await s.get('p2')).toBeDefined();
  });
});

describe('routes, read on every proxied request', () => {
  test('route gives the routing fields of a live sandbox, the same as its whole record has them', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('run1'));
    await s.insert(sandbox('paused1', { autoResume: true, trafficAccessToken: 'traffic' }));
    await s.transition('paused1', 'paused');
    for (const id of ['run1', 'paused1']) {
      const whole = (await s.live(id))!;
      expect(await s.route(id)).toEqual({ id, state: whole.state, autoResume: whole.autoResume, trafficAccessToken: whole.trafficAccessToken, teamId: whole.teamId });
    }
    expect(await s.route('paused1')).toEqual({ id: 'paused1', state: 'paused', autoResume: true, trafficAccessToken: 'traffic', teamId: team });
  });

  test('route finds no sandbox that was killed or never existed', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('gone1'));
    await s.transition('gone1', 'killed');
    expect(await s.route('gone1')).toBeUndefined();
    expect(await s.route('nosuch')).toBeUndefined();
  });

  test('route is kept between reads, and never outlives a write through this connection', async () => {
    const s = store.sandboxes;
    await s.insert(sandbox('kept1', { trafficAccessToken: 'traffic' }));
    const first = await s.route('kept1');
    expect(await s.route('kept1')).toBe(first);
    await s.transition('kept1', 'paused');
    expect((await s.route('kept1'))?.state).toBe('paused');
    await s.transition('kept1', 'killed');
    expect(await s.route('kept1')).toBeUndefined();
    // Unknown when asked, inserted afterwards: found.
    expect(await s.route('late1')).toBeUndefined();
    await s.insert(sandbox('late1'));
    expect((await s.route('late1'))?.state).toBe('running');
  });

  test('route sees at once a change written by another connection to the file', async () => {
    await store.sandboxes.insert(sandbox('shared1'));
    expect((await store.sandboxes.route('shared1'))?.state).toBe('running');
    const other = another();
    await other.sandboxes.transition('shared1', 'paused');
    expect((await store.sandboxes.route('shared1'))?.state).toBe('paused');
    await other.sandboxes.transition('shared1', 'killed');
    expect(await store.sandboxes.route('shared1')).toBeUndefined();
  });
});

describe('processes racing on one file', () => {
  const sqlite = pathToFileURL(join(import.meta.dirname, '../dist/store/sqlite.js')).href;
  /**
   * Each process opens the file, waits for the same moment, makes the change,
   * holds a claim a little while the runtime would work, and prints whether
   * its change was made.
   */
  const racer = `
    const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
    const [file, id, op, at] = process.argv.slice(1);
    const store = openSqliteStore(file);
    while (Date.now() < Number(at));
    let result;
    try {
      if (op === 'resume') {
        const claim = await store.sandboxes.claim(id, 'running');
        await new Promise((r) => setTimeout(r, 200));
        await claim.complete({ extendTo: Date.now() + 60000 });
      } else {
        await store.sandboxes.transition(id, op);
      }
      result = { ok: true };
    } catch (err) {
      result = { ok: false, kind: err.kind, message: err.message };
    }
    await store.close();
    process.stdout.write(JSON.stringify(result));
  `;

  async function race(id: string, ops: string[]): Promise<Array<{ ok: boolean; kind?: string; message?: string }>> {
    // Late enough that every process has loaded and opened the file.
    const at = Date.now() + 2500;
    return Promise.all(
      ops.map(
        (op) =>
          new Promise<{ ok: boolean; kind?: string; message?: string }>((resolve, reject) => {
            const child = spawn(process.execPath, ['--input-type=module', '-e', racer, file, id, op, String(at)], { stdio: ['ignore', 'pipe', 'inherit'] });
            let out = '';
            child.stdout.on('data', (d: Buffer) => (out += d));
            child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as { ok: boolean }) : reject(new Error(`racer exited with ${code}: ${out}`))));
          }),
      ),
    );
  }

  test('four processes resuming one paused sandbox: one resumes it, the others are refused', async () => {
    await store.sandboxes.insert(sandbox('race1'));
    await store.sandboxes.transition('race1', 'paused');
    const results = await race('race1', ['resume', 'resume', 'resume', 'resume']);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    for (const r of results.filter((x) => !x.ok)) {
      expect(r.kind).toBe('conflict');
      expect(["sandbox 'race1' is being resumed by another request", "sandbox 'race1' is running, not paused"]).toContain(r.message);
    }
    expect(await store.sandboxes.get('race1')).toMatchObject({ state: 'running', pendingChange: null });
  }, 30_000);

  test('processes pausing and killing one running sandbox: each change is made at most once, and they agree', async () => {
    await store.sandboxes.insert(sandbox('race2'));
    const results = await race('race2', ['paused', 'paused', 'killed', 'killed']);
    const made = results.map((r, i) => (r.ok ? ['paused', 'paused', 'killed', 'killed'][i] : undefined)).filter(Boolean);
    // A pause may come before the kill; no change is made twice, and the kill is made.
    expect(made.filter((m) => m === 'killed')).toEqual(['killed']);
    expect(made.filter((m) => m === 'paused').length).toBeLessThanOrEqual(1);
    expect((await store.sandboxes.get('race2'))?.state).toBe('killed');
  }, 30_000);

  test('two processes opening a new file at once both find it migrated, each migration applied once', async () => {
    await store.close();
    opened.length = 0;
    removeFile();
    const opener = `
      const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
      const [file, at] = process.argv.slice(1);
      while (Date.now() < Number(at));
      const store = openSqliteStore(file);
      process.stdout.write(String(await store.apiKeys.count()));
      await store.close();
    `;
    const at = String(Date.now() + 2000);
    const outs = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<string>((resolve, reject) => {
            const child = spawn(process.execPath, ['--input-type=module', '-e', opener, file, at], { stdio: ['ignore', 'pipe', 'inherit'] });
            let out = '';
            child.stdout.on('data', (d: Buffer) => (out += d));
            child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`opener exited with ${code}`))));
          }),
      ),
    );
    expect(outs).toEqual(['0', '0']);
    store = another();
  }, 30_000);
});

describe('an existing database of the first schema', () => {
  test('opens, keeps what it had, and works', async () => {
    await store.close();
    opened.length = 0;
    removeFile();
    const old = new Database(file);
    expect(migrate(old, 1)).toBe(1);
    old
      .prepare(
        `INSERT INTO sandboxes (id, template_id, alias, state, paused_with_memory, started_at, end_at, cpu_count, memory_mb, disk_size_mb, envd_version, metadata)
         VALUES ('old1', 'base', 'base', 'paused', 1, 1000, 2000, 2, 512, 1024, '0.5.7', '{"a":"b"}')`,
      )
      .run();
    old.prepare("INSERT INTO api_keys (id, name, hash, mask, created_at) VALUES ('k1', 'default', 'h', 'e2b_1234…abcd', 5)").run();
    old.close();

    store = another();
    expect(await store.sandboxes.get('old1')).toMatchObject({ state: 'paused', pausedWithMemory: true, pendingChange: null, metadata: { a: 'b' } });
    expect((await store.sandboxes.transition('old1', 'running')).state).toBe('running');
    expect(await store.apiKeys.list('all')).toEqual([
      {
        id: 'k1',
        name: 'default',
        teamId: (await store.teams.byName('default'))!.id,
        mask: 'e2b_1234…abcd',
        maskParts: { prefix: 'e2b_', valueLength: 40, maskedValuePrefix: '1234', maskedValueSuffix: 'abcd' },
        createdAt: 5,
        lastUsedAt: null,
      },
    ]);
    const v = new Database(file, { readonly: true });
    expect(v.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    v.close();
  });

  test('templates of the second schema keep their names, builds and tags through the rebuild of their table', async () => {
    await store.close();
    opened.length = 0;
    removeFile();
    const old = new Database(file);
    expect(migrate(old, 2)).toBe(2);
    old.exec(`
      INSERT INTO templates (id, kind, public, created_at, updated_at, spawn_count) VALUES ('snap1', 'snapshot', 1, 10, 20, 3);
      INSERT INTO template_names (name, template_id) VALUES ('my-snap', 'snap1');
      INSERT INTO builds (id, template_id, status, created_at, updated_at, finished_at, cpu_count, memory_mb, disk_size_mb, envd_version)
        VALUES ('b1', 'snap1', 'ready', 10, 10, 10, 2, 512, 1024, '0.5.7');
      INSERT INTO template_tags (template_id, tag, build_id, created_at) VALUES ('snap1', 'v1', 'b1', 11);
    `);
    old.close();

    store = another();
    expect(await store.templates.resolve('my-snap:v1', ALL)).toMatchObject({
      id: 'snap1',
      kind: 'snapshot',
      public: true,
      spawnCount: 3,
      names: ['my-snap'],
      builds: [{ id: 'b1', status: 'ready', runtimeTemplateId: null, startCmd: null, reason: null, tags: [] }],
    });
    // Foreign keys still hold: a template's removal takes its names, builds and tags with it.
    await store.templates.remove('snap1');
    expect(await store.templates.byName('my-snap', ALL)).toBeUndefined();
    const v = new Database(file, { readonly: true });
    expect(v.prepare('SELECT COUNT(*) AS n FROM builds').get()).toEqual({ n: 0 });
    v.close();
  });

  test('a store of schema 5 moves into the default team: its keys still reach their sandboxes, templates keep their names', async () => {
    await store.close();
    opened.length = 0;
    removeFile();
    const old = new Database(file);
    expect(migrate(old, 5)).toBe(5);
    old.exec(`
      INSERT INTO api_keys (id, name, hash, mask, value_length, created_at) VALUES ('k1', 'default', 'h1', 'e2b_1234…abcd', 40, 5);
      INSERT INTO sandboxes (id, template_id, alias, state, started_at, end_at, cpu_count, memory_mb, disk_size_mb, envd_version, api_key_id)
        VALUES ('old-run', 'base', 'base', 'running', 1000, 2000, 2, 512, 1024, '0.5.7', 'k1'),
               ('old-paused', 'snap1', NULL, 'paused', 1001, 2000, 1, 256, 512, '0.5.7', NULL);
      INSERT INTO templates (id, kind, public, created_at, updated_at) VALUES ('base', 'base', 1, 1, 1), ('snap1', 'snapshot', 0, 2, 2);
      INSERT INTO template_names (name, template_id) VALUES ('base', 'base'), ('my-snap', 'snap1');
      INSERT INTO builds (id, template_id, status, created_at, updated_at, cpu_count, memory_mb, disk_size_mb, envd_version)
        VALUES ('b0', 'base', 'ready', 1, 1, 2, 512, 1024, '0.5.7'), ('b1', 'snap1', 'ready', 2, 2, 1, 256, 512, '0.5.7');
    `);
    old.close();

    store = another();
    const teams = await store.teams.list();
    expect(teams.map((t) => t.name)).toEqual(['default']);
    const own = { teamId: teams[0]!.id };
    expect(teams[0]!.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect((await store.apiKeys.list(own)).map((k) => k.id)).toEqual(['k1']);
    for (const id of ['old-run', 'old-paused']) expect(await store.sandboxes.live(id)).toMatchObject({ id, teamId: own.teamId });
    expect((await store.sandboxes.list({ scope: own, states: ['running', 'paused'], order: 'asc', limit: 10 })).map((x) => x.id)).toEqual(['old-run', 'old-paused']);
    expect(await store.sandboxes.usage(own.teamId)).toEqual({ sandboxes: 1, memoryMB: 512, diskMB: 1024 });
    expect(await store.templates.resolve('my-snap', { scope: own, publicToo: false })).toMatchObject({ id: 'snap1', teamId: own.teamId, names: ['my-snap'] });
    expect((await store.templates.listSnapshots({ scope: own, limit: 10 })).map((t) => t.id)).toEqual(['snap1']);
    // A new team sees none of it but the public base template.
    const other = await store.teams.create('other');
    const theirs = { scope: { teamId: other.id }, publicToo: true };
    expect(await store.templates.resolve('my-snap', theirs)).toBeUndefined();
    expect(await store.templates.resolve('snap1', theirs)).toBeUndefined();
    expect((await store.templates.resolve('base', theirs))?.id).toBe('base');
    expect(await store.sandboxes.list({ scope: { teamId: other.id }, states: ['running', 'paused'], order: 'asc', limit: 10 })).toEqual([]);
  });

  test('a file newer than this server is refused, naming both versions', async () => {
    await store.close();
    opened.length = 0;
    const db = new Database(file);
    db.pragma('user_version = 99');
    db.close();
    expect(() => openSqliteStore(file)).toThrow(`the database is at schema version 99, newer than this server knows (${SCHEMA_VERSION}); upgrade Paddock`);
    removeFile();
    store = another();
  });
});

describe('templates', () => {
  const base = { kind: 'snapshot' as const, public: false, cpuCount: 2, memoryMB: 512, diskSizeMB: 1024, envdVersion: '0.5.7' };

  test('insert, get, by name, resolve by id, name and name:tag; one ready build', async () => {
    const t = store.templates;
    const made = await t.insert({ ...base, teamId: team, id: 'tpl1', names: ['app'], sourceSandboxId: 'sbx1' });
    expect(made).toMatchObject({ id: 'tpl1', kind: 'snapshot', names: ['app'], sourceSandboxId: 'sbx1', spawnCount: 0, lastSpawnedAt: null });
    expect(made.builds).toEqual([expect.objectContaining({ templateId: 'tpl1', status: 'ready', cpuCount: 2, memoryMB: 512 })]);
    expect(await t.get('tpl1')).toEqual(made);
    expect(await t.byName('app', ALL)).toEqual(made);
    expect(await t.resolve('tpl1', ALL)).toEqual(made);
    expect(await t.resolve('app', ALL)).toEqual(made);
    expect(await t.resolve('app:v1', ALL)).toBeUndefined();
    await t.assignTags('tpl1', made.builds[0]!.id, ['v1']);
    expect((await t.resolve('app:v1', ALL))?.id).toBe('tpl1');
    expect(await t.nameTaken(team, 'app')).toBe(true);
    expect(await t.nameTaken(team, 'other')).toBe(false);
  });

  test('a taken name refuses the whole insert', async () => {
    const t = store.templates;
    await t.insert({ ...base, teamId: team, id: 'tpl1', names: ['app'] });
    expect(await refusal(t.insert({ ...base, teamId: team, id: 'tpl2', names: ['app'] }))).toEqual({ kind: 'conflict', message: "the name 'app' is already taken" });
    expect(await t.get('tpl2')).toBeUndefined();
  });

  test('snapshots are listed oldest first, filtered, one window at a time', async () => {
    const t = store.templates;
    await t.insert({ ...base, teamId: team, kind: 'base', id: 'base', names: ['base'] });
    for (let i = 0; i < 4; i++) await t.insert({ ...base, teamId: team, id: `s${i}`, names: i === 2 ? ['named'] : [], sourceSandboxId: i % 2 ? 'sbxB' : 'sbxA' });
    const ids = async (f: Parameters<typeof t.listSnapshots>[0]) => (await t.listSnapshots(f)).map((x) => x.id);
    expect(await ids({ scope: 'all', limit: 10 })).toEqual(['s0', 's1', 's2', 's3']);
    expect(await ids({ scope: 'all', limit: 10, sourceSandboxId: 'sbxB' })).toEqual(['s1', 's3']);
    expect(await ids({ scope: 'all', limit: 10, name: 'named' })).toEqual(['s2']);
    const first = (await t.listSnapshots({ scope: 'all', limit: 2 })).at(-1)!;
    expect(await ids({ scope: 'all', limit: 2, after: { key: first.createdAt, id: first.id } })).toEqual(['s2', 's3']);
  });

  test('tags: assign, move, list; delete is all or none', async () => {
    const t = store.templates;
    const { builds } = await t.insert({ ...base, teamId: team, id: 'tpl1', names: ['app'] });
    await t.assignTags('tpl1', builds[0]!.id, ['b', 'a']);
    await t.assignTags('tpl1', 'other-build', ['b']);
    expect((await t.tags('tpl1')).map((x) => [x.tag, x.buildId])).toEqual([
      ['a', builds[0]!.id],
      ['b', 'other-build'],
    ]);
    expect(await t.deleteTags('tpl1', ['a', 'missing'])).toEqual({ missing: ['missing'] });
    expect((await t.tags('tpl1')).map((x) => x.tag)).toEqual(['a', 'b']);
    expect(await t.deleteTags('tpl1', ['a', 'b'])).toEqual({ missing: [] });
    expect(await t.tags('tpl1')).toEqual([]);
  });

  test('spawns are counted; visibility changes; removal takes names, builds and tags with it', async () => {
    const t = store.templates;
    const { builds } = await t.insert({ ...base, teamId: team, id: 'tpl1', names: ['app'] });
    await t.assignTags('tpl1', builds[0]!.id, ['v1']);
    await t.recordSpawn('tpl1');
    await t.recordSpawn('tpl1');
    await t.setPublic('tpl1', true);
    expect(await t.get('tpl1')).toMatchObject({ spawnCount: 2, public: true, lastSpawnedAt: expect.any(Number) });
    await t.remove('tpl1');
    expect(await t.get('tpl1')).toBeUndefined();
    expect(await t.nameTaken(team, 'app')).toBe(false);
    expect(await t.tags('tpl1')).toEqual([]);
    expect(await t.list(ALL)).toEqual([]);
  });
});

describe('builds', () => {
  const build = { cpuCount: 1, memoryMB: 512, diskSizeMB: 2048, envdVersion: '0.7.0' };

  test('a build of a new name makes a template; the next of that name is another build of it; one at a time', async () => {
    const t = store.templates;
    const first = await t.newBuild({ ...build, teamId: team, templateId: 'built1', buildId: 'b-1', name: 'web', tags: ['v1'] });
    expect(first.template).toMatchObject({ id: 'built1', kind: 'build', names: ['web'] });
    expect(first.build).toMatchObject({ id: 'b-1', status: 'waiting', tags: ['v1'], runtimeTemplateId: null });
    await expect(t.newBuild({ ...build, teamId: team, templateId: 'other', buildId: 'b-x', name: 'app', tags: [] })).resolves.toBeDefined();
    // A name of a template not made by builds is not taken over.
    await t.insert({ teamId: team, kind: 'snapshot', public: false, cpuCount: 2, memoryMB: 512, diskSizeMB: 1024, envdVersion: '0.5.7', id: 'snapX', names: ['snapped'] });
    await expect(t.newBuild({ ...build, teamId: team, templateId: 'z', buildId: 'b-z', name: 'snapped', tags: [] })).rejects.toMatchObject({ kind: 'conflict' });

    expect(await t.startBuild('b-1')).toMatchObject({ status: 'building' });
    await expect(t.startBuild('b-1')).rejects.toMatchObject({ kind: 'conflict', message: "build 'b-1' is building; only a waiting build can be started" });
    await expect(t.newBuild({ ...build, teamId: team, templateId: 'ignored', buildId: 'b-2', name: 'web', tags: [] })).rejects.toMatchObject({ kind: 'conflict' });
    await expect(t.startBuild('nope')).rejects.toMatchObject({ kind: 'not_found' });

    await t.addBuildLogs('b-1', [
      { ts: 1, level: 'info', message: 'one', step: 'base' },
      { ts: 2, level: 'error', message: 'two' },
    ]);
    await t.addBuildLogs('b-1', [{ ts: 3, level: 'debug', message: 'three', step: '1' }]);
    expect(await t.buildLogs('b-1', { offset: 1, limit: 10 })).toEqual([
      { ts: 2, level: 'error', message: 'two' },
      { ts: 3, level: 'debug', message: 'three', step: '1' },
    ]);
    expect((await t.buildLogs('b-1', { offset: 0, limit: 10, levels: ['error'] })).map((e) => e.message)).toEqual(['two']);

    const ready = await t.finishBuild('b-1', { status: 'ready', runtimeTemplateId: 'c-abc', startCmd: 'serve', readyCmd: null });
    expect(ready).toMatchObject({ status: 'ready', runtimeTemplateId: 'c-abc', startCmd: 'serve', finishedAt: expect.any(Number) });
    // The build's tags point at it once it is ready.
    expect(await t.tag('built1', 'v1')).toMatchObject({ buildId: 'b-1' });
    expect(await t.resolve('web:v1', ALL)).toMatchObject({ id: 'built1' });

    const second = await t.newBuild({ ...build, teamId: team, templateId: 'ignored', buildId: 'b-2', name: 'web', tags: ['v1'] });
    expect(second.template.id).toBe('built1');
    await t.startBuild('b-2');
    await t.finishBuild('b-2', { status: 'error', reason: { message: 'broke', step: '2', logEntries: [{ ts: 5, level: 'info', message: 'last words' }] } });
    expect((await t.get('built1'))!.builds.map((b) => [b.id, b.status])).toEqual([
      ['b-2', 'error'],
      ['b-1', 'ready'],
    ]);
    expect((await t.get('built1'))!.builds[0]!.reason).toEqual({ message: 'broke', step: '2', logEntries: [{ ts: 5, level: 'info', message: 'last words' }] });
    // A failed build moves no tag.
    expect(await t.tag('built1', 'v1')).toMatchObject({ buildId: 'b-1' });
  });

  test('builds left building by a stopped server end in error; waiting ones stay', async () => {
    const t = store.templates;
    await t.newBuild({ ...build, teamId: team, templateId: 'r1', buildId: 'r-1', name: 'restart-a', tags: [] });
    await t.newBuild({ ...build, teamId: team, templateId: 'r2', buildId: 'r-2', name: 'restart-b', tags: [] });
    await t.startBuild('r-1');
    expect(await t.failUnfinishedBuilds({ message: 'stopped' })).toEqual(['r-1']);
    expect((await t.get('r1'))!.builds[0]).toMatchObject({ status: 'error', reason: { message: 'stopped' } });
    expect((await t.get('r2'))!.builds[0]).toMatchObject({ status: 'waiting' });
  });
});

describe('API keys', () => {
  test('a created key is returned once, stored as its hash, and verified', async () => {
    const k = store.apiKeys;
    const { record, key } = await k.create(team, 'ci');
    expect(key).toMatch(/^e2b_[0-9a-f]{40}$/);
    expect(record).toMatchObject({
      name: 'ci',
      mask: `${key.slice(0, 8)}…${key.slice(-4)}`,
      maskParts: { prefix: 'e2b_', valueLength: 40, maskedValuePrefix: key.slice(4, 8), maskedValueSuffix: key.slice(-4) },
      lastUsedAt: null,
    });
    expect(await k.verify(key)).toEqual({ id: record.id, teamId: team });
    expect(await k.verify(newApiKey())).toBeUndefined();
    expect(await k.verify(undefined)).toBeUndefined();
    expect(readFileSync(file).includes(key)).toBe(false);
  });

  test('a key of another form keeps its length in the mask', async () => {
    const { record } = await store.apiKeys.create(team, 'custom', 'my-own-secret-key-0123');
    expect(record.maskParts).toEqual({ prefix: '', valueLength: 22, maskedValuePrefix: 'my-own-s', maskedValueSuffix: '0123' });
  });

  test('createFirst makes a key only when there is none', async () => {
    const k = store.apiKeys;
    const first = await k.createFirst('default', 'e2b_00000000000000000000000000000000000000aa');
    expect(first?.key).toBe('e2b_00000000000000000000000000000000000000aa');
    expect(await k.createFirst('default')).toBeUndefined();
    expect(await another().apiKeys.createFirst('default')).toBeUndefined();
    expect(await k.count()).toBe(1);
  });

  test('touch records the last use, at most once a minute', async () => {
    const k = store.apiKeys;
    const { record } = await k.create(team, 'a');
    await k.touch(record.id);
    const used = (await k.list('all'))[0]!.lastUsedAt;
    expect(used).toEqual(expect.any(Number));
    await k.touch(record.id);
    expect((await k.list('all'))[0]!.lastUsedAt).toBe(used);
  });

  test('rename and remove; unknown ids and the last key are refused', async () => {
    const k = store.apiKeys;
    const a = await k.create(team, 'a');
    const b = await k.create(team, 'b');
    expect((await k.rename('all', a.record.id, 'renamed')).name).toBe('renamed');
    expect(await refusal(k.rename('all', 'nosuch', 'x'))).toEqual({ kind: 'not_found', message: "no API key has id 'nosuch'" });
    expect(await refusal(k.remove('all', 'nosuch'))).toMatchObject({ kind: 'not_found' });
    await k.remove('all', a.record.id);
    expect(await k.verify(a.key)).toBeUndefined();
    expect(await refusal(k.remove('all', b.record.id))).toEqual({ kind: 'conflict', message: `API key '${b.record.id}' is the last one; create another before deleting it` });
    expect((await k.list('all')).map((x) => x.name)).toEqual(['b']);
  });
});

describe('teams', () => {
  test('create, list, limits; names are unique; a team with sandboxes, templates or the last keys is not deleted', async () => {
    const a = await store.teams.create('a', { maxSandboxes: 2 });
    expect(a).toMatchObject({ name: 'a', limits: { maxSandboxes: 2, maxMemoryMB: null, maxDiskMB: null } });
    expect(await refusal(store.teams.create('a'))).toEqual({ kind: 'conflict', message: "a team is already named 'a'" });
    expect((await store.teams.setLimits(a.id, { maxMemoryMB: 1024, maxSandboxes: null })).limits).toEqual({ maxSandboxes: null, maxMemoryMB: 1024, maxDiskMB: null });
    expect(await refusal(store.teams.setLimits('nosuch', {}))).toEqual({ kind: 'not_found', message: "team 'nosuch' not found" });
    expect((await store.teams.list()).map((t) => t.name)).toEqual(['default', 'a']);

    const key = await store.apiKeys.create(a.id, 'ka');
    expect(await refusal(store.teams.remove(a.id))).toEqual({ kind: 'conflict', message: "team 'a' holds the server's last API keys; create a key in another team first" });
    await store.apiKeys.create(team, 'kd');
    await store.sandboxes.insert(sandbox('a-sbx', { teamId: a.id }));
    expect(await refusal(store.teams.remove(a.id))).toEqual({ kind: 'conflict', message: "team 'a' has 1 sandbox running or paused; kill them first" });
    await store.sandboxes.transition('a-sbx', 'killed');
    await store.templates.insert({ id: 'a-tpl', teamId: a.id, kind: 'snapshot', public: false, names: [], cpuCount: 1, memoryMB: 1, diskSizeMB: 1, envdVersion: '0.5.7' });
    expect(await refusal(store.teams.remove(a.id))).toMatchObject({ kind: 'conflict', message: expect.stringMatching(/has 1 template/) });
    await store.templates.remove('a-tpl');
    await store.teams.remove(a.id);
    // Its keys went with it.
    expect(await store.apiKeys.verify(key.key)).toBeUndefined();
    expect(await store.teams.get(a.id)).toBeUndefined();
  });

  test("a key is seen and changed only within its team's scope", async () => {
    const b = await store.teams.create('b');
    const mine = await store.apiKeys.create(team, 'mine');
    const theirs = await store.apiKeys.create(b.id, 'theirs');
    expect((await store.apiKeys.list({ teamId: team })).map((k) => k.name)).toEqual(['mine']);
    expect(await refusal(store.apiKeys.rename({ teamId: team }, theirs.record.id, 'x'))).toEqual({ kind: 'not_found', message: `no API key has id '${theirs.record.id}'` });
    expect(await refusal(store.apiKeys.remove({ teamId: team }, theirs.record.id))).toMatchObject({ kind: 'not_found' });
    expect(await store.apiKeys.verify(theirs.key)).toEqual({ id: theirs.record.id, teamId: b.id });
    expect(await refusal(store.apiKeys.create('nosuch', 'x'))).toEqual({ kind: 'not_found', message: "team 'nosuch' not found" });
    expect(mine.record.teamId).toBe(team);
  });

  test('template names are per team: a name is its own team\'s first, then a public one', async () => {
    const b = await store.teams.create('b');
    const t = store.templates;
    const tpl = { kind: 'snapshot' as const, cpuCount: 1, memoryMB: 1, diskSizeMB: 1, envdVersion: '0.5.7' };
    await t.insert({ ...tpl, id: 'pub', teamId: team, public: true, names: ['shared'] });
    await t.insert({ ...tpl, id: 'priv', teamId: team, public: false, names: ['secret'] });
    const asB = { scope: { teamId: b.id }, publicToo: true };
    expect((await t.resolve('shared', asB))?.id).toBe('pub');
    expect(await t.resolve('secret', asB)).toBeUndefined();
    expect(await t.resolve('priv', asB)).toBeUndefined();
    expect(await t.resolve('pub', { ...asB, publicToo: false })).toBeUndefined();
    // B may use the names A uses; its own come first for it.
    await t.insert({ ...tpl, id: 'b-secret', teamId: b.id, public: false, names: ['secret', 'shared'] });
    expect((await t.resolve('secret', asB))?.id).toBe('b-secret');
    expect((await t.resolve('shared', asB))?.id).toBe('b-secret');
    expect((await t.resolve('shared', { scope: { teamId: team }, publicToo: true }))?.id).toBe('pub');
    expect((await t.list(asB)).map((x) => x.id).sort()).toEqual(['b-secret', 'pub']);
  });
});

describe('the admin credential', () => {
  test('made once, stored as its hash, verified', async () => {
    const made = await store.adminKeys.createFirst();
    expect(made?.key).toMatch(/^paddock_admin_[0-9a-f]{40}$/);
    expect(await store.adminKeys.createFirst()).toBeUndefined();
    expect(await store.adminKeys.verify(made!.key)).toBe(made!.id);
    expect(await store.adminKeys.verify(`${made!.key.slice(0, -1)}${made!.key.endsWith('0') ? '1' : '0'}`)).toBeUndefined();
    expect(readFileSync(file).includes(made!.key)).toBe(false);
  });
});

describe('telemetry', () => {
  const sample = (ts: number) => ({ ts, cpuCount: 2, cpuUsedPct: 10, memUsed: 1, memTotal: 2, memCache: 0, diskUsed: 3, diskTotal: 4 });

  test('samples by time range, the latest, and purge', async () => {
    const t = store.telemetry;
    for (const ts of [1000, 2000, 3000]) await t.addSample('s1', sample(ts));
    await t.addSample('s2', sample(5000));
    expect((await t.samples('s1', 1500, 3000)).map((s) => s.ts)).toEqual([2000, 3000]);
    expect((await t.latest('s1'))?.ts).toBe(3000);
    expect(await t.latest('none')).toBeUndefined();
    await t.purge(2500);
    expect((await t.samples('s1', 0, 10_000)).map((s) => s.ts)).toEqual([3000]);
  });

  test('logs in either direction, by level and search', async () => {
    const t = store.telemetry;
    await t.log('s1', 'info', 'sandbox created', { templateID: 'base' });
    await t.log('s1', 'warn', 'Something Odd');
    await t.log('s1', 'error', 'it broke');
    await t.log('s2', 'info', 'other');
    const messages = async (q: Parameters<typeof t.logs>[1]) => (await t.logs('s1', q)).map((e) => e.message);
    expect(await messages({ limit: 10, direction: 'forward' })).toEqual(['sandbox created', 'Something Odd', 'it broke']);
    expect(await messages({ limit: 2, direction: 'backward' })).toEqual(['it broke', 'Something Odd']);
    expect(await messages({ limit: 10, direction: 'forward', levels: ['warn', 'error'] })).toEqual(['Something Odd', 'it broke']);
    expect(await messages({ limit: 10, direction: 'forward', search: 'odd' })).toEqual(['Something Odd']);
    expect((await t.logs('s1', { limit: 1, direction: 'forward' }))[0]).toMatchObject({ level: 'info', fields: { templateID: 'base' } });
  });
});
