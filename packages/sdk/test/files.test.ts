// sandbox.files against a real envd, through the SDK only.
import { Readable } from 'node:stream';
import { join } from 'node:path';
import {
  AuthenticationError,
  FileNotFoundError,
  FileType,
  FilesystemEventType,
  InvalidArgumentError,
  NotFoundError,
  SandboxError,
  type FilesystemEvent,
  type Sandbox,
} from '../src/index.js';
import { generatedBytes, sha256Of } from '../../../tools/testing/bytes.mjs';
import { eventually } from '../../../tools/testing/poll.mjs';
import { startEnvdWithSandbox, type LocalEnvd } from './support/envd.js';

let envd: LocalEnvd;
let sbx: Sandbox;
beforeAll(async () => ({ envd, sbx } = await startEnvdWithSandbox()));
afterAll(() => envd.stop());

describe('read and write', () => {
  test('text written is read back as text, bytes, blob and stream; relative paths are in the home', async () => {
    const info = await sbx.files.write('rw/hello.txt', 'héllo, sandbox');
    expect(info).toEqual({ name: 'hello.txt', path: join(envd.home.user, 'rw/hello.txt'), type: FileType.FILE });
    expect(await sbx.files.read('rw/hello.txt')).toBe('héllo, sandbox');
    const bytes = await sbx.files.read('rw/hello.txt', { format: 'bytes' });
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(bytes).toString()).toBe('héllo, sandbox');
    const blob = await sbx.files.read(info.path, { format: 'blob' });
    expect(await blob.text()).toBe('héllo, sandbox');
    const stream = await sbx.files.read(info.path, { format: 'stream', gzip: true });
    expect(await new Response(stream).text()).toBe('héllo, sandbox');
  });

  test('an empty file reads as empty', async () => {
    await sbx.files.write('rw/empty', new Uint8Array());
    expect(await sbx.files.read('rw/empty')).toBe('');
    expect((await sbx.files.read('rw/empty', { format: 'bytes' })).byteLength).toBe(0);
  });

  test('several files in one write, with metadata that getInfo and list report', async () => {
    const written = await sbx.files.write(
      [
        { path: 'many/a.txt', data: 'A' },
        { path: 'many/sub/b.bin', data: new Uint8Array([1, 2, 3]) },
        { path: 'many/c.txt', data: new Blob(['C']) },
      ],
      { metadata: { owner: 'team-a', Stage: 'test' } },
    );
    expect(written.map((w) => w.name)).toEqual(['a.txt', 'b.bin', 'c.txt']);
    for (const w of written) expect(w.metadata).toEqual({ owner: 'team-a', stage: 'test' });
    const info = await sbx.files.getInfo('many/sub/b.bin');
    expect(info).toMatchObject({ name: 'b.bin', type: 'file', size: 3, owner: 'user', group: 'user', permissions: '-rw-r--r--' });
    expect(info.metadata).toEqual({ owner: 'team-a', stage: 'test' });
    expect(info.modifiedTime).toBeInstanceOf(Date);
    expect(Math.abs(Date.now() - info.modifiedTime!.getTime())).toBeLessThan(60_000);
  });

  test('gzip and octet-stream uploads, and a write as another user', async () => {
    await sbx.files.write('enc/gz.txt', 'compressed on the way', { gzip: true });
    await sbx.files.write('enc/raw.txt', 'raw body', { useOctetStream: true });
    expect(await sbx.files.read('enc/gz.txt')).toBe('compressed on the way');
    expect(await sbx.files.read('enc/raw.txt')).toBe('raw body');
    const rootFile = await sbx.files.write('/tmp/sdk-root-owned.txt', 'x', { user: 'root' });
    expect((await sbx.files.getInfo(rootFile.path)).owner).toBe('root');
    await sbx.files.remove(rootFile.path, { user: 'root' });
  });

  test('bad metadata is refused before sending', async () => {
    await expect(sbx.files.write('meta/bad.txt', 'x', { metadata: { 'has space': 'v' } })).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(await sbx.files.exists('meta/bad.txt')).toBe(false);
  });

  test('50 MiB streamed up and down keeps its sha256', async () => {
    const size = 50 * 1024 * 1024;
    const sent = await sha256Of(generatedBytes(size, 256 * 1024, 7));
    const path = join(envd.dir, 'work/big.bin');
    await sbx.files.write(path, Readable.from(generatedBytes(size, 256 * 1024, 7)));
    expect((await sbx.files.getInfo(path)).size).toBe(size);
    const stream = await sbx.files.read(path, { format: 'stream' });
    expect(await sha256Of(stream)).toEqual(sent);
    // A Web ReadableStream as the source, in one raw request.
    await sbx.files.write(path, ReadableStream.from(generatedBytes(size, 256 * 1024, 9)), { useOctetStream: true });
    const again = await sbx.files.read(path, { format: 'stream' });
    expect(await sha256Of(again)).toEqual(await sha256Of(generatedBytes(size, 256 * 1024, 9)));
    await sbx.files.remove(path);
  }, 120_000);
});

describe('entries', () => {
  test('list descends depth levels, depth-first in name order; depth below 1 is refused', async () => {
    await sbx.files.write([
      { path: 'tree/b.txt', data: 'b' },
      { path: 'tree/a/inner.txt', data: 'i' },
      { path: 'tree/a/deeper/x.txt', data: 'x' },
    ]);
    const one = await sbx.files.list('tree');
    expect(one.map((e) => `${e.type}:${e.name}`)).toEqual(['dir:a', 'file:b.txt']);
    const two = await sbx.files.list('tree', { depth: 2 });
    expect(two.map((e) => e.path.slice(join(envd.home.user, 'tree').length))).toEqual(['/a', '/a/deeper', '/a/inner.txt', '/b.txt']);
    await expect(sbx.files.list('tree', { depth: 0 })).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  test('exists, makeDir (false when present), rename, remove (a missing path is fine)', async () => {
    expect(await sbx.files.exists('ops')).toBe(false);
    expect(await sbx.files.makeDir('ops/nested/dir')).toBe(true);
    expect(await sbx.files.makeDir('ops/nested/dir')).toBe(false);
    expect(await sbx.files.exists('ops/nested/dir')).toBe(true);
    expect((await sbx.files.getInfo('ops/nested/dir')).type).toBe(FileType.DIR);
    await sbx.files.write('ops/from.txt', 'moving');
    const moved = await sbx.files.rename('ops/from.txt', 'ops/nested/to.txt');
    expect(moved).toMatchObject({ name: 'to.txt', path: join(envd.home.user, 'ops/nested/to.txt'), type: 'file' });
    expect(await sbx.files.exists('ops/from.txt')).toBe(false);
    expect(await sbx.files.read('ops/nested/to.txt')).toBe('moving');
    await sbx.files.remove('ops');
    expect(await sbx.files.exists('ops')).toBe(false);
    await expect(sbx.files.remove('ops')).resolves.toBeUndefined();
  });

  test('a symlink is reported with its absolute target', async () => {
    await sbx.commands.run('mkdir -p links && echo t > links/target && ln -sfn target links/link');
    const info = await sbx.files.getInfo('links/link');
    expect(info.type).toBe(FileType.SYMLINK);
    expect(info.symlinkTarget).toBe(join(envd.home.user, 'links/target'));
  });
});

describe('errors', () => {
  test('a missing file is a FileNotFoundError, over HTTP and over RPC', async () => {
    const read = sbx.files.read('no/such/file.txt');
    await expect(read).rejects.toBeInstanceOf(FileNotFoundError);
    await expect(read).rejects.toBeInstanceOf(NotFoundError);
    await expect(read).rejects.toBeInstanceOf(SandboxError);
    await expect(read).rejects.toMatchObject({ statusCode: 404, name: 'FileNotFoundError' });
    const stat = sbx.files.getInfo('no/such/file.txt');
    await expect(stat).rejects.toBeInstanceOf(FileNotFoundError);
    await expect(stat).rejects.toHaveProperty('cause.code'); // the ConnectError it came from
    await expect(sbx.files.list('no/such/dir')).rejects.toBeInstanceOf(FileNotFoundError);
  });

  test('reading a directory is an InvalidArgumentError', async () => {
    await sbx.files.makeDir('a-dir');
    await expect(sbx.files.read('a-dir')).rejects.toBeInstanceOf(InvalidArgumentError);
  });

  test('a wrong access token is an AuthenticationError on every path', async () => {
    const intruder = envd.sandbox({ token: 'wrong-token' });
    await expect(intruder.files.read('rw/hello.txt')).rejects.toBeInstanceOf(AuthenticationError);
    await expect(intruder.files.exists('rw/hello.txt')).rejects.toBeInstanceOf(AuthenticationError);
    await expect(intruder.commands.run('true')).rejects.toBeInstanceOf(AuthenticationError);
  });
});

describe('signed URLs', () => {
  test('downloadUrl and uploadUrl work with no headers at all', async () => {
    await sbx.files.write('urls/file name.txt', 'via signed url');
    const path = join(envd.home.user, 'urls/file name.txt');
    const down = await sbx.downloadUrl(path);
    expect(new URL(down).origin).toBe(envd.url);
    const res = await fetch(down);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('via signed url');

    const target = join(envd.home.user, 'urls/uploaded.txt');
    const up = await sbx.uploadUrl(target, { useSignatureExpiration: 60 });
    expect(new URL(up).searchParams.get('signature_expiration')).toMatch(/^\d+$/);
    const form = new FormData();
    form.append('file', new Blob(['sent by a form']), target);
    expect((await fetch(up, { method: 'POST', body: form })).status).toBe(200);
    expect(await sbx.files.read(target)).toBe('sent by a form');

    // A URL for one file does not open another.
    const other = new URL(down);
    other.searchParams.set('path', target);
    expect((await fetch(other)).status).toBe(401);
  });
});

describe('watchDir', () => {
  test('reports create, write, rename and remove, then stops and calls onExit once', async () => {
    const dir = join(envd.dir, 'work/watched');
    await sbx.files.makeDir(dir);
    const events: FilesystemEvent[] = [];
    const exits: (Error | undefined)[] = [];
    const handle = await sbx.files.watchDir(dir, (e) => void events.push(e), { onExit: (err) => void exits.push(err) });
    const seen = (type: string, name: string) => events.some((e) => e.type === type && e.name === name);

    await sbx.files.write(join(dir, 'w.txt'), 'one');
    await eventually(() => seen(FilesystemEventType.WRITE, 'w.txt'), 'write of w.txt');
    expect(seen('create', 'w.txt')).toBe(true);
    await sbx.files.rename(join(dir, 'w.txt'), join(dir, 'renamed.txt'));
    await eventually(() => seen('rename', 'w.txt') || seen('create', 'renamed.txt'), 'rename');
    await sbx.files.remove(join(dir, 'renamed.txt'));
    await eventually(() => seen('remove', 'renamed.txt'), 'remove of renamed.txt');

    await handle.stop();
    expect(exits).toEqual([undefined]);
    const count = events.length;
    await sbx.files.write(join(dir, 'after-stop.txt'), 'x');
    await new Promise((r) => setTimeout(r, 300));
    expect(events.length).toBe(count);
  });

  test('recursive with entries, and a timeout ends the watch through onExit', async () => {
    const dir = join(envd.dir, 'work/watched-deep');
    await sbx.files.makeDir(join(dir, 'sub'));
    const events: FilesystemEvent[] = [];
    let exit: Error | undefined | 'running' = 'running';
    const handle = await sbx.files.watchDir(dir, (e) => void events.push(e), {
      recursive: true,
      includeEntry: true,
      timeoutMs: 1500,
      onExit: (err) => {
        exit = err;
      },
    });
    await sbx.files.write(join(dir, 'sub/deep.txt'), 'deep');
    await eventually(() => events.some((e) => e.name === 'sub/deep.txt' && e.type === 'write'), 'write of sub/deep.txt');
    const withEntry = events.find((e) => e.name === 'sub/deep.txt' && e.entry);
    expect(withEntry?.entry).toMatchObject({ name: 'deep.txt', type: 'file' });
    await eventually(() => exit !== 'running', 'the watch to time out', 10_000);
    expect((exit as unknown as Error).name).toBe('TimeoutError');
    await handle.stop();
  });

  test('watching a missing directory fails at once', async () => {
    await expect(sbx.files.watchDir(join(envd.dir, 'work/not-there'), () => undefined)).rejects.toBeInstanceOf(FileNotFoundError);
  });
});
