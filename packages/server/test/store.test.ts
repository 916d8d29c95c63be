// The sandbox store against a real SQLite file: what the proxy reads of a
// sandbox on every request.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDb, type Db } from '../src/store/db.js';
import { SandboxStore, type SandboxRecord } from '../src/store/sandboxes.js';

let dir: string;
let db: Db;
let store: SandboxStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-store-'));
  db = openDb(join(dir, 'paddock.db'));
  store = new SandboxStore(db);
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

function record(id: string, over: Partial<SandboxRecord> = {}): SandboxRecord {
  const now = Date.now();
  return {
    id,
    templateId: 'base',
    alias: 'base',
    state: 'running',
    pausedWithMemory: false,
    startedAt: now,
    endAt: now + 60_000,
    endedAt: null,
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
    ...over,
  };
}

test('route gives the routing fields of a live sandbox, the same as its whole record has them', () => {
  store.insert(record('run1'));
  store.insert(record('paused1', { state: 'paused', autoResume: true, trafficAccessToken: 'traffic' }));
  for (const id of ['run1', 'paused1']) {
    const whole = store.live(id)!;
    expect(store.route(id)).toEqual({ id, state: whole.state, autoResume: whole.autoResume, trafficAccessToken: whole.trafficAccessToken });
  }
  expect(store.route('paused1')).toEqual({ id: 'paused1', state: 'paused', autoResume: true, trafficAccessToken: 'traffic' });
});

test('route finds no sandbox that was killed or never existed, as live does', () => {
  store.insert(record('gone1'));
  store.setState('gone1', 'killed');
  expect(store.live('gone1')).toBeUndefined();
  expect(store.route('gone1')).toBeUndefined();
  expect(store.route('nosuch')).toBeUndefined();
});

test('route sees a change of state at once', () => {
  store.insert(record('flip1'));
  expect(store.route('flip1')?.state).toBe('running');
  store.setState('flip1', 'paused', true);
  expect(store.route('flip1')?.state).toBe('paused');
});

test('route is kept between reads, and never outlives a write that changes it', () => {
  store.insert(record('kept1', { trafficAccessToken: 'traffic' }));
  const first = store.route('kept1');
  expect(store.route('kept1')).toBe(first);
  // Killed after it was read: gone, not served from what was read before.
  store.setState('kept1', 'killed');
  expect(store.route('kept1')).toBeUndefined();
  // Unknown when asked, inserted afterwards: found.
  expect(store.route('late1')).toBeUndefined();
  store.insert(record('late1', { state: 'paused', autoResume: true }));
  expect(store.route('late1')).toEqual({ id: 'late1', state: 'paused', autoResume: true, trafficAccessToken: null });
  store.setState('late1', 'running');
  expect(store.route('late1')?.state).toBe('running');
});
