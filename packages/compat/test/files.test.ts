// sandbox.files with the official e2b SDK, through Paddock's proxy.
import type { FilesystemEvent, Sandbox } from 'e2b';
import { createHash, randomBytes } from 'node:crypto';
import { eventually, startWithSandbox } from './harness.js';

let sbx: Sandbox;
let teardown: () => Promise<void>;
beforeAll(async () => ({ sbx, teardown } = await startWithSandbox()));
afterAll(() => teardown());

const streamOf = (chunks: Uint8Array[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const ch of chunks) controller.enqueue(ch);
      controller.close();
    },
  });

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(parts);
    parts.push(value);
  }
}

test('write a string, bytes, a stream and several files; read them as text, bytes, stream and with gzip', async () => {
  const text = await sbx.files.write('w/text.txt', 'plain text');
  expect(text).toMatchObject({ name: 'text.txt', path: '/home/user/w/text.txt', type: 'file' });
  const bytes = randomBytes(64 * 1024);
  await sbx.files.write('/home/user/w/bytes.bin', bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  const big = randomBytes(3 * 1024 * 1024);
  await sbx.files.write('w/stream.bin', streamOf([big.subarray(0, 1_000_000), big.subarray(1_000_000)]));
  const many = await sbx.files.write([
    { path: 'w/many/a.txt', data: 'A' },
    { path: '/home/user/w/many/b.txt', data: 'B' },
  ]);
  expect(many.map((e) => e.path)).toEqual(['/home/user/w/many/a.txt', '/home/user/w/many/b.txt']);

  expect(await sbx.files.read('w/text.txt')).toBe('plain text');
  expect(Buffer.from(await sbx.files.read('w/bytes.bin', { format: 'bytes' })).equals(bytes)).toBe(true);
  const streamed = await readAll(await sbx.files.read('w/stream.bin', { format: 'stream' }));
  expect(createHash('sha256').update(streamed).digest('hex')).toBe(createHash('sha256').update(big).digest('hex'));
  const blob = await sbx.files.read('w/many/b.txt', { format: 'blob' });
  expect(await blob.text()).toBe('B');
  const compressible = 'repeat '.repeat(50_000);
  await sbx.files.write('w/gz.txt', compressible, { gzip: true });
  expect(await sbx.files.read('w/gz.txt', { gzip: true })).toBe(compressible);
  await sbx.files.write('w/empty.txt', '');
  expect(await sbx.files.read('w/empty.txt')).toBe('');
});

test('files of /proc in the sandbox read with their text (they report a size of 0)', async () => {
  const version = await sbx.files.read('/proc/version');
  expect(version).toMatch(/^Linux version /);
  // The sandbox's own pid namespace: its init is envd.
  expect(await sbx.files.read('/proc/1/cmdline')).toMatch(/node/);
});

test('metadata written with a file comes back in getInfo; a write without metadata clears it', async () => {
  await sbx.files.write('meta.txt', 'm', { metadata: { owner: 'alice', purpose: 'demo' } });
  expect((await sbx.files.getInfo('meta.txt')).metadata).toEqual({ owner: 'alice', purpose: 'demo' });
  await sbx.files.write('meta.txt', 'n', { metadata: { owner: 'bob' } });
  expect((await sbx.files.getInfo('meta.txt')).metadata).toEqual({ owner: 'bob' });
  await sbx.files.write('meta.txt', 'o');
  expect((await sbx.files.getInfo('meta.txt')).metadata ?? {}).toEqual({});
});

test('list with depth, exists, getInfo (of a symlink too), makeDir, rename, remove', async () => {
  await sbx.files.write('tree/a/deep.txt', 'x');
  await sbx.files.write('tree/b.txt', 'y');
  const one = await sbx.files.list('tree');
  expect(one.map((e) => `${e.type}:${e.name}`)).toEqual(['dir:a', 'file:b.txt']);
  const two = await sbx.files.list('tree', { depth: 2 });
  expect(two.map((e) => e.path)).toEqual(['/home/user/tree/a', '/home/user/tree/a/deep.txt', '/home/user/tree/b.txt']);
  expect(await sbx.files.exists('tree/b.txt')).toBe(true);
  expect(await sbx.files.exists('tree/nope')).toBe(false);
  const info = await sbx.files.getInfo('tree/b.txt');
  expect(info).toMatchObject({ name: 'b.txt', type: 'file', size: 1, owner: 'user', group: 'user', permissions: '-rw-r--r--' });
  expect(info.modifiedTime).toBeInstanceOf(Date);
  await sbx.commands.run('ln -s b.txt tree/link');
  const link = await sbx.files.getInfo('tree/link');
  expect(link).toMatchObject({ name: 'link', type: 'symlink', permissions: 'lrwxrwxrwx', symlinkTarget: '/home/user/tree/b.txt' });
  expect((await sbx.files.list('tree')).find((e) => e.name === 'link')).toMatchObject({ type: 'symlink', permissions: 'lrwxrwxrwx' });
  expect(await sbx.files.read('tree/link')).toBe('y');
  await sbx.files.remove('tree/link');
  expect(await sbx.files.makeDir('tree/new')).toBe(true);
  expect(await sbx.files.makeDir('tree/new')).toBe(false);
  const moved = await sbx.files.rename('tree/b.txt', 'tree/new/c.txt');
  expect(moved.path).toBe('/home/user/tree/new/c.txt');
  await sbx.files.remove('tree');
  expect(await sbx.files.exists('tree')).toBe(false);
  await expect(sbx.files.read('tree/new/c.txt')).rejects.toMatchObject({ name: 'FileNotFoundError' });
});

test('watchDir reports create, write, chmod, rename and remove, recursively', async () => {
  await sbx.files.makeDir('watched/sub');
  const events: string[] = [];
  const handle = await sbx.files.watchDir('watched', (e: FilesystemEvent) => void events.push(`${e.type}:${e.name}`), { recursive: true });
  await sbx.files.write('watched/sub/f.txt', 'one');
  await sbx.files.write('watched/sub/f.txt', 'two');
  await sbx.commands.run('chmod 600 watched/sub/f.txt');
  await sbx.files.rename('watched/sub/f.txt', 'watched/sub/g.txt');
  await sbx.files.remove('watched/sub/g.txt');
  await eventually(() => events.includes('remove:sub/g.txt'), `events, got ${events.join(' ')}`);
  await handle.stop();
  expect(events).toEqual(expect.arrayContaining(['create:sub/f.txt', 'write:sub/f.txt', 'chmod:sub/f.txt', 'rename:sub/f.txt', 'create:sub/g.txt', 'remove:sub/g.txt']));
  expect(events.indexOf('chmod:sub/f.txt')).toBeLessThan(events.indexOf('rename:sub/f.txt'));
});

test('a recursive watch reports the write of a file made in a new directory at once, and no event twice', async () => {
  await sbx.files.makeDir('deepwatch');
  const events: string[] = [];
  const handle = await sbx.files.watchDir('deepwatch', (e: FilesystemEvent) => void events.push(`${e.type}:${e.name}`), { recursive: true });
  // The file is written before envd can have watched its new directory: its scan announces both.
  await sbx.commands.run('mkdir -p deepwatch/new/sub && echo hello > deepwatch/new/sub/f.txt && echo more > deepwatch/new/g.txt');
  await eventually(() => events.includes('write:new/sub/f.txt') && events.includes('write:new/g.txt'), `the writes, got ${events.join(' ')}`);
  await sbx.files.write('deepwatch/new/g.txt', 'again');
  await eventually(() => events.filter((e) => e === 'write:new/g.txt').length >= 2, `the second write, got ${events.join(' ')}`);
  await handle.stop();
  for (const e of ['create:new', 'create:new/sub', 'create:new/sub/f.txt', 'create:new/g.txt']) expect([e, events.filter((x) => x === e).length]).toEqual([e, 1]);
});

/** A Connect unary call to the sandbox's envd in JSON through the proxy, as the Python SDK makes it. */
async function envdRpc(method: string, body: unknown, userAgent?: string): Promise<{ legacy: string | null; json: Record<string, unknown> }> {
  const info = (await (await fetch(`${process.env.E2B_API_URL}/sandboxes/${sbx.sandboxId}`, { headers: { 'x-api-key': process.env.E2B_API_KEY! } })).json()) as { envdAccessToken?: string };
  const res = await fetch(`${process.env.E2B_SANDBOX_URL}/filesystem.Filesystem/${method}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'connect-protocol-version': '1',
      'e2b-sandbox-id': sbx.sandboxId,
      'e2b-sandbox-port': '49983',
      ...(info.envdAccessToken ? { 'x-access-token': info.envdAccessToken } : {}),
      ...(userAgent ? { 'user-agent': userAgent } : {}),
    },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return { legacy: res.headers.get('x-e2b-legacy-sdk'), json: (await res.json()) as Record<string, unknown> };
}

test('GetWatcherEvents on the Connect wire, as the Python SDK polls it, has the events of every write that returned before it', async () => {
  await sbx.files.makeDir('polled');
  const watcherId = (await envdRpc('CreateWatcher', { path: '/home/user/polled', recursive: false })).json.watcherId as string;
  for (let round = 0; round < 10; round++) {
    await sbx.files.write(`polled/f${round}.txt`, 'x');
    const events = ((await envdRpc('GetWatcherEvents', { watcherId })).json.events ?? []) as Array<{ name: string; type: string }>;
    expect(events.map((e) => `${e.type}:${e.name}`)).toEqual(expect.arrayContaining([`EVENT_TYPE_CREATE:f${round}.txt`, `EVENT_TYPE_WRITE:f${round}.txt`]));
  }
  await envdRpc('RemoveWatcher', { watcherId });
});

test("an old Python SDK (User-Agent connect-python) gets the entries it parses: a symlink's Stat and a listing with one", async () => {
  await sbx.commands.run('mkdir -p ~/old-py && echo x > ~/old-py/file.txt && ln -sf file.txt ~/old-py/link');
  const stat = await envdRpc('Stat', { path: '/home/user/old-py/link' }, 'connect-python');
  expect(stat).toEqual({ legacy: 'true', json: { entry: { name: 'link', type: 3, path: '/home/user/old-py/link' } } });
  const list = await envdRpc('ListDir', { path: '/home/user/old-py', depth: 1 }, 'connect-python');
  expect(list.json.entries).toEqual(expect.arrayContaining([{ name: 'file.txt', type: 1, path: '/home/user/old-py/file.txt' }, { name: 'link', type: 3, path: '/home/user/old-py/link' }]));
  // The SDK of today gets everything.
  expect((await sbx.files.getInfo('old-py/link')).symlinkTarget).toBe('/home/user/old-py/file.txt');
});

test('uploadUrl and downloadUrl work with plain fetch and no headers, a part without a filename too; an expired one is refused', async () => {
  const up = await sbx.uploadUrl('signed/upload.txt');
  const form = new FormData();
  form.append('file', new Blob(['via signed url']), 'signed/upload.txt');
  const res = await fetch(up, { method: 'POST', body: form });
  expect(res.status).toBe(200);
  const down = await sbx.downloadUrl('signed/upload.txt');
  const got = await fetch(down);
  expect([got.status, await got.text()]).toEqual([200, 'via signed url']);
  // A part named 'file' without a filename is the file too (busboy calls it a field).
  const plain = new FormData();
  plain.append('file', 'file content');
  const posted = await fetch(await sbx.uploadUrl('hello.txt'), { method: 'POST', body: plain });
  expect([posted.status, await posted.json()]).toEqual([200, [{ name: 'hello.txt', path: '/home/user/hello.txt', type: 'file' }]]);
  expect(await sbx.files.read('hello.txt')).toBe('file content');
  const expiring = await sbx.downloadUrl('signed/upload.txt', { useSignatureExpiration: 1 });
  await new Promise((r) => setTimeout(r, 2100));
  const expired = await fetch(expiring);
  expect([expired.status, await expired.json()]).toEqual([401, { code: 401, message: 'signature is already expired' }]);
});
