// Old Python SDKs (User-Agent `connect-python`) get the filesystem messages
// of their time on the Connect JSON wire: entries of {name, type, path},
// events of {name, type}, enum values as numbers (a symlink's type is 3, a
// name they do not know would fail their parse), and `x-e2b-legacy-sdk`.
// Other clients get the full messages.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
beforeAll(async () => {
  envd = await startEnvd();
  const dir = join(envd.home.user, 'legacy');
  mkdirSync(dir);
  writeFileSync(join(dir, 'file.txt'), 'x');
  symlinkSync('file.txt', join(dir, 'link'));
});
afterAll(() => envd.stop());

async function rpc(method: string, body: unknown, userAgent?: string): Promise<{ legacy: string | null; json: Record<string, unknown> }> {
  const res = await fetch(`${envd.url}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'connect-protocol-version': '1', 'x-access-token': envd.token!, ...(userAgent ? { 'user-agent': userAgent } : {}) },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return { legacy: res.headers.get('x-e2b-legacy-sdk'), json: (await res.json()) as Record<string, unknown> };
}

test('Stat and ListDir answer an old Python client with the fields it knows, a symlink as type 3', async () => {
  const dir = join(envd.home.user, 'legacy');
  const stat = await rpc('Stat', { path: join(dir, 'link') }, 'connect-python');
  expect(stat).toEqual({ legacy: 'true', json: { entry: { name: 'link', type: 3, path: join(dir, 'link') } } });
  const list = await rpc('ListDir', { path: dir, depth: 1 }, 'connect-python');
  expect(list.json).toEqual({
    entries: expect.arrayContaining([
      { name: 'file.txt', type: 1, path: join(dir, 'file.txt') },
      { name: 'link', type: 3, path: join(dir, 'link') },
    ]),
  });
  expect((list.json.entries as unknown[]).length).toBe(2);
});

test('watcher events of an old Python client are {name, type}', async () => {
  const dir = join(envd.home.user, 'legacy');
  const { json } = await rpc('CreateWatcher', { path: dir, includeEntry: true }, 'connect-python');
  const watcherId = json.watcherId as string;
  writeFileSync(join(dir, 'new.txt'), 'y');
  const events = (await rpc('GetWatcherEvents', { watcherId }, 'connect-python')).json.events as unknown[];
  expect(events).toEqual(expect.arrayContaining([{ name: 'new.txt', type: 1 }, { name: 'new.txt', type: 2 }]));
  await rpc('RemoveWatcher', { watcherId }, 'connect-python');
});

test('other clients, newer Python SDKs included, get the full messages', async () => {
  const link = join(envd.home.user, 'legacy', 'link');
  for (const userAgent of [undefined, 'connect-python/0.4 e2b-python-sdk/2.40']) {
    const { legacy, json } = await rpc('Stat', { path: link }, userAgent);
    expect(legacy).toBeNull();
    expect(json.entry).toMatchObject({ name: 'link', type: 'FILE_TYPE_SYMLINK', path: link, symlinkTarget: join(envd.home.user, 'legacy', 'file.txt') });
  }
});
