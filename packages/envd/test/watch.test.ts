// Directory watching: the WatchDir stream and the polled watchers.
import { Code, ConnectError } from '@connectrpc/connect';
import { appendFileSync, chmodSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EventType, type WatchDirResponse } from '@paddock/models';
import { filesystem, startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd();
});
afterAll(() => envd.stop());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Opens a WatchDir stream; resolves once `start` arrived. */
async function watch(path: string, opts: { recursive?: boolean; includeEntry?: boolean; keepaliveSec?: number; on?: RunningEnvd } = {}) {
  const abort = new AbortController();
  const headers: Record<string, string> = {};
  if (opts.keepaliveSec) headers['Keepalive-Ping-Interval'] = String(opts.keepaliveSec);
  const stream = filesystem(opts.on ?? envd, { headers }).watchDir(
    { path, recursive: opts.recursive ?? false, includeEntry: opts.includeEntry ?? false },
    { signal: abort.signal },
  );
  const it = stream[Symbol.asyncIterator]();
  const first = await it.next();
  expect(first.value?.event.case).toBe('start');
  const received: WatchDirResponse[] = [];
  const pump = (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        received.push(r.value);
      }
    } catch {
      // aborted
    }
  })();
  const events = () =>
    received.flatMap((r) => (r.event.case === 'filesystem' ? [{ name: r.event.value.name, type: r.event.value.type, entry: r.event.value.entry }] : []));
  return {
    received,
    events,
    async waitFor(pred: (e: { name: string; type: EventType }) => boolean, ms = 5000) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        if (events().some(pred)) return;
        await sleep(20);
      }
      throw new Error(`event not seen; got ${JSON.stringify(events().map((e) => [e.name, EventType[e.type]]))}`);
    },
    async stop() {
      abort.abort();
      await pump;
    },
  };
}

test('reports create, write, chmod, rename and remove, with start first', async () => {
  const dir = join(envd.dir, 'work/w1');
  mkdirSync(dir);
  const w = await watch(dir);
  writeFileSync(join(dir, 'a.txt'), 'one');
  await w.waitFor((e) => e.name === 'a.txt' && e.type === EventType.CREATE);
  appendFileSync(join(dir, 'a.txt'), 'two');
  await w.waitFor((e) => e.name === 'a.txt' && e.type === EventType.WRITE);
  chmodSync(join(dir, 'a.txt'), 0o600);
  await w.waitFor((e) => e.name === 'a.txt' && e.type === EventType.CHMOD);
  renameSync(join(dir, 'a.txt'), join(dir, 'b.txt'));
  await w.waitFor((e) => e.name === 'a.txt' && e.type === EventType.RENAME);
  await w.waitFor((e) => e.name === 'b.txt' && e.type === EventType.CREATE);
  rmSync(join(dir, 'b.txt'));
  await w.waitFor((e) => e.name === 'b.txt' && e.type === EventType.REMOVE);
  await w.stop();
});

test('rewriting a file through the files API is a WRITE of the same name', async () => {
  const dir = join(envd.dir, 'work/w-rewrite');
  mkdirSync(dir);
  writeFileSync(join(dir, 'f'), 'old');
  const w = await watch(dir);
  const res = await fetch(`${envd.url}/files?path=${encodeURIComponent(join(dir, 'f'))}`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-access-token': envd.token! },
    body: 'new contents',
  });
  expect(res.status).toBe(200);
  await w.waitFor((e) => e.name === 'f' && e.type === EventType.WRITE);
  expect(w.events().some((e) => e.type === EventType.REMOVE || e.type === EventType.RENAME)).toBe(false);
  await w.stop();
});

test('non-recursive watches ignore subdirectories; recursive ones follow new ones', async () => {
  const dir = join(envd.dir, 'work/w2');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  const flat = await watch(dir);
  const deep = await watch(dir, { recursive: true });
  writeFileSync(join(dir, 'sub/inner.txt'), 'x');
  await deep.waitFor((e) => e.name === 'sub/inner.txt' && e.type === EventType.CREATE);
  mkdirSync(join(dir, 'new/nested'), { recursive: true });
  await deep.waitFor((e) => e.name === 'new' && e.type === EventType.CREATE);
  await deep.waitFor((e) => e.name === 'new/nested' && e.type === EventType.CREATE);
  writeFileSync(join(dir, 'new/nested/leaf'), 'y');
  await deep.waitFor((e) => e.name === 'new/nested/leaf' && e.type === EventType.CREATE);
  await flat.waitFor((e) => e.name === 'new' && e.type === EventType.CREATE);
  expect(flat.events().some((e) => e.name.includes('/'))).toBe(false);
  await flat.stop();
  await deep.stop();
});

test('include_entry attaches the entry when it still exists', async () => {
  const dir = join(envd.dir, 'work/w3');
  mkdirSync(dir);
  const w = await watch(dir, { includeEntry: true });
  writeFileSync(join(dir, 'e.txt'), 'hello');
  await w.waitFor((e) => e.name === 'e.txt' && e.type === EventType.WRITE);
  const ev = w.events().find((e) => e.name === 'e.txt' && e.type === EventType.WRITE);
  expect(ev?.entry).toMatchObject({ name: 'e.txt', path: join(dir, 'e.txt') });
  await w.stop();
});

test('keepalives arrive at the interval the client asked for', async () => {
  const dir = join(envd.dir, 'work/w4');
  mkdirSync(dir);
  const w = await watch(dir, { keepaliveSec: 0.2 });
  await sleep(1100);
  const keepalives = w.received.filter((r) => r.event.case === 'keepalive').length;
  // About five in 1.1 s at 0.2 s; timers on a busy machine may slip one or two.
  expect(keepalives).toBeGreaterThanOrEqual(3);
  expect(keepalives).toBeLessThanOrEqual(6);
  await w.stop();
});

test('watching a missing directory is not_found, a file invalid_argument', async () => {
  const fs = filesystem(envd);
  const file = join(envd.dir, 'work/not-a-dir');
  writeFileSync(file, '');
  const first = async (path: string) => {
    try {
      for await (const _ of fs.watchDir({ path })) return 'no error';
    } catch (err) {
      return ConnectError.from(err).code;
    }
    return 'ended';
  };
  expect(await first(join(envd.dir, 'nope'))).toBe(Code.NotFound);
  expect(await first(file)).toBe(Code.InvalidArgument);
});

test('a watch whose directory is removed ends', async () => {
  const dir = join(envd.dir, 'work/w-gone');
  mkdirSync(dir);
  const stream = filesystem(envd).watchDir({ path: dir });
  const seen: string[] = [];
  const done = (async () => {
    for await (const r of stream) seen.push(r.event.case ?? '');
  })();
  await sleep(200);
  rmSync(dir, { recursive: true });
  await done;
  expect(seen[0]).toBe('start');
});

test('polled watchers collect events until removed', async () => {
  const dir = join(envd.dir, 'work/w5');
  mkdirSync(dir);
  const fs = filesystem(envd);
  const { watcherId } = await fs.createWatcher({ path: dir, recursive: true });
  writeFileSync(join(dir, 'p1'), '1');
  mkdirSync(join(dir, 'd'));
  writeFileSync(join(dir, 'd/p2'), '2');
  let names: string[] = [];
  for (let i = 0; i < 100 && !names.includes('d/p2'); i++) {
    await sleep(20);
    names = names.concat((await fs.getWatcherEvents({ watcherId })).events.map((e) => e.name));
  }
  expect(names).toEqual(expect.arrayContaining(['p1', 'd', 'd/p2']));
  expect((await fs.getWatcherEvents({ watcherId })).events).toEqual([]);
  await fs.removeWatcher({ watcherId });
  await expect(fs.getWatcherEvents({ watcherId })).rejects.toMatchObject({ code: Code.NotFound });
  await expect(fs.removeWatcher({ watcherId: 'unknown' })).rejects.toMatchObject({ code: Code.NotFound });
});

/** The inotify watches a process holds: `inotify wd:` lines in the fdinfo of its descriptors. */
function inotifyWatches(pid: number): number {
  let n = 0;
  for (const fd of readdirSync(`/proc/${pid}/fdinfo`)) {
    let info: string;
    try {
      info = readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
    } catch {
      continue; // closed meanwhile
    }
    n += info.split('\n').filter((line) => line.startsWith('inotify wd:')).length;
  }
  return n;
}

test('the kernel watches behind a WatchDir stream are released when the client cancels it, and by RemoveWatcher', async () => {
  // An envd of its own, so that no other test's watches come and go meanwhile.
  const own = await startEnvd();
  try {
    const dir = join(own.dir, 'work/w-release');
    mkdirSync(join(dir, 'a/b'), { recursive: true });
    const before = inotifyWatches(own.pid);
    const settlesAt = async (n: number) => {
      for (let i = 0; i < 250 && inotifyWatches(own.pid) !== n; i++) await sleep(20);
      return inotifyWatches(own.pid);
    };

    // Recursive: the directory, a and a/b.
    const w = await watch(dir, { recursive: true, on: own });
    expect(inotifyWatches(own.pid)).toBe(before + 3);
    await w.stop();
    expect(await settlesAt(before)).toBe(before);

    const fs = filesystem(own);
    const { watcherId } = await fs.createWatcher({ path: dir, recursive: true });
    expect(inotifyWatches(own.pid)).toBe(before + 3);
    await fs.removeWatcher({ watcherId });
    expect(inotifyWatches(own.pid)).toBe(before);
  } finally {
    await own.stop();
  }
});
