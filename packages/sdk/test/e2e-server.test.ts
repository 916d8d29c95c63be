// @paddock/sdk end to end: a real Paddock server (control API, proxy, runc
// runtime, envd in each sandbox), driven through the SDK only.
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { PaddockServer } from '@paddock/server';
import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotFoundError,
  Sandbox,
  SandboxNotFoundError,
  type ConnectionOpts,
  type FilesystemEvent,
} from '../src/index.js';
import { eventually } from '../../../tools/testing/poll.mjs';
import { realServer, type RealServer } from './support/real-server.js';

const MiB = 1024 * 1024;
let real: RealServer;
let server: PaddockServer;
let opts: ConnectionOpts;

beforeAll(async () => {
  real = await realServer('e2e', { metricsIntervalMs: 500 });
  ({ server, opts } = real);
});

afterAll(() => real.teardown());

describe('one sandbox', () => {
  let sbx: Sandbox;
  beforeAll(async () => {
    sbx = await Sandbox.create('base', { ...opts, metadata: { suite: 'sdk-e2e' }, envs: { FROM_CREATE: 'yes' } });
  });
  afterAll(async () => {
    await sbx.kill();
  });

  test('create returns a running sandbox with its info', async () => {
    expect(sbx.sandboxId).toMatch(/^[a-z0-9]{20}$/);
    const info = await sbx.getInfo();
    expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base', state: 'running', metadata: { suite: 'sdk-e2e' } });
    expect(await sbx.isRunning()).toBe(true);
    expect(sbx.getHost(8080)).toBe(`8080-${sbx.sandboxId}.${server.config.domain}`);
  });

  test('files: every method', async () => {
    const written = await sbx.files.write('e2e/a.txt', 'alpha');
    expect(written).toMatchObject({ name: 'a.txt', path: '/home/user/e2e/a.txt' });
    await sbx.files.write([
      { path: 'e2e/b.bin', data: new Uint8Array([1, 2, 3]) },
      { path: 'e2e/c.txt', data: new Blob(['gamma']) },
    ]);
    await sbx.files.write('e2e/meta.txt', 'm', { metadata: { owner: 'sdk' } });
    expect(await sbx.files.read('e2e/a.txt')).toBe('alpha');
    expect([...(await sbx.files.read('e2e/b.bin', { format: 'bytes' }))]).toEqual([1, 2, 3]);
    expect(await (await sbx.files.read('e2e/c.txt', { format: 'blob' })).text()).toBe('gamma');
    expect((await sbx.files.list('e2e')).map((e) => e.name)).toEqual(['a.txt', 'b.bin', 'c.txt', 'meta.txt']);
    expect(await sbx.files.exists('e2e/a.txt')).toBe(true);
    expect(await sbx.files.exists('e2e/none')).toBe(false);
    expect(await sbx.files.getInfo('e2e/meta.txt')).toMatchObject({ name: 'meta.txt', size: 1, metadata: { owner: 'sdk' } });
    expect(await sbx.files.makeDir('e2e/sub')).toBe(true);
    expect(await sbx.files.makeDir('e2e/sub')).toBe(false);
    expect((await sbx.files.list('e2e', { depth: 2 })).map((e) => e.name)).toContain('sub');
    await sbx.files.rename('e2e/a.txt', 'e2e/sub/a.txt');
    expect(await sbx.files.read('e2e/sub/a.txt')).toBe('alpha');
    await sbx.files.remove('e2e');
    expect(await sbx.files.exists('e2e')).toBe(false);
    await expect(sbx.files.read('e2e/sub/a.txt')).rejects.toBeInstanceOf(FileNotFoundError);
  });

  test('files: 50 MiB streamed up and down keep their sha256', async () => {
    const up = createHash('sha256');
    let left = 50 * MiB;
    const source = new Readable({
      read() {
        if (left === 0) return void this.push(null);
        const chunk = randomBytes(Math.min(left, MiB));
        left -= chunk.length;
        up.update(chunk);
        this.push(chunk);
      },
    });
    await sbx.files.write('big.bin', source);
    const down = createHash('sha256');
    const stream = await sbx.files.read('big.bin', { format: 'stream' });
    let size = 0;
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.length;
      down.update(chunk);
    }
    expect(size).toBe(50 * MiB);
    expect(down.digest('hex')).toBe(up.digest('hex'));
  });

  test('files: watchDir reports events until stopped', async () => {
    await sbx.files.makeDir('watched');
    const events: string[] = [];
    const handle = await sbx.files.watchDir('watched', (e: FilesystemEvent) => void events.push(`${e.type}:${e.name}`));
    await sbx.files.write('watched/w.txt', 'x');
    await sbx.files.remove('watched/w.txt');
    await eventually(() => events.includes('remove:w.txt'), `watch events, got ${events.join(' ')}`);
    await handle.stop();
    expect(events).toEqual(expect.arrayContaining(['create:w.txt', 'write:w.txt', 'remove:w.txt']));
  });

  test('commands: foreground exit codes, CommandExitError, envs that do not leak', async () => {
    const ok = await sbx.commands.run('echo "$FROM_CREATE $ONE"', { envs: { ONE: '1' } });
    expect(ok).toMatchObject({ exitCode: 0, stdout: 'yes 1\n' });
    expect((await sbx.commands.run('echo "[$ONE]"')).stdout).toBe('[]\n');
    const err = await sbx.commands.run('echo out; exit 9').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandExitError);
    expect(err).toMatchObject({ exitCode: 9, stdout: 'out\n' });
  });

  test('commands: background, connect (with the output after it), kill; stdin and closeStdin', async () => {
    const bg = await sbx.commands.run('echo started; read -r word; echo "got $word"; sleep 60', { background: true, stdin: true });
    await eventually(() => bg.stdout === 'started\n', `the first line, got ${JSON.stringify(bg.stdout)}`);
    expect((await sbx.commands.list()).some((p) => p.pid === bg.pid)).toBe(true);
    await bg.disconnect();
    const chunks: string[] = [];
    const again = await sbx.commands.connect(bg.pid, { onStdout: (d) => void chunks.push(d) });
    expect(again.pid).toBe(bg.pid);
    await sbx.commands.sendStdin(bg.pid, 'later\n');
    await eventually(() => again.stdout === 'got later\n', `output after connect, got ${JSON.stringify(again.stdout)}`);
    expect(chunks.join('')).toBe('got later\n');
    expect(bg.stdout).toBe('started\n');
    expect(await sbx.commands.kill(bg.pid)).toBe(true);
    const killed = again.wait();
    await expect(killed).rejects.toBeInstanceOf(CommandExitError);
    await expect(killed).rejects.toMatchObject({ exitCode: -1, stdout: 'got later\n' });
    await expect(bg.wait()).rejects.toThrow(/disconnected/);
    expect(await sbx.commands.kill(bg.pid)).toBe(false);

    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    await cat.sendStdin('through stdin\n');
    await cat.closeStdin();
    expect((await cat.wait()).stdout).toBe('through stdin\n');
  });

  test('pty: the size set by resize is what tput sees; exit ends it with code 0', async () => {
    let out = '';
    const decoder = new TextDecoder();
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => void (out += decoder.decode(d)) });
    await sbx.pty.resize(term.pid, { cols: 132, rows: 43 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo "tput=$(tput cols)x$(tput lines)"; exit\n'));
    await eventually(() => out.includes('tput=132x43'), `tput output, got ${JSON.stringify(out)}`);
    // A terminal's output goes to onData only; `exit` is a clean end.
    expect(await term.wait()).toEqual({ exitCode: 0, error: undefined, stdout: '', stderr: '' });
    expect(await sbx.pty.kill(term.pid)).toBe(false);
  });

  test('uploadUrl and downloadUrl through the proxy: plain fetch, no headers', async () => {
    const up = await sbx.uploadUrl('signed/up.txt');
    expect(new URL(up).origin).toBe(new URL(server.proxyUrl).origin);
    const form = new FormData();
    form.append('file', new Blob(['sent through the proxy']), 'signed/up.txt');
    expect((await fetch(up, { method: 'POST', body: form })).status).toBe(200);
    expect(await sbx.files.read('signed/up.txt')).toBe('sent through the proxy');
    const down = await sbx.downloadUrl('signed/up.txt', { useSignatureExpiration: 60 });
    const res = await fetch(down);
    expect([res.status, await res.text()]).toEqual([200, 'sent through the proxy']);
    // The signature covers the path: the same URL for another file is refused.
    const other = new URL(down);
    other.searchParams.set('path', '/etc/hostname');
    expect((await fetch(other)).status).toBe(401);
  });

  test('metrics arrive within seconds', async () => {
    await eventually(async () => (await sbx.getMetrics()).length > 0, 'a metric sample', 10_000);
    const [m] = await sbx.getMetrics();
    expect(m!.memTotal).toBe(512 * MiB);
    expect(m!.timestamp).toBeInstanceOf(Date);
  });
});

test('list with a metadata filter across pages, by nextItems and by for await', async () => {
  const tag = `page-${Date.now()}`;
  const made = await Promise.all([0, 1, 2].map(() => Sandbox.create('base', { ...opts, metadata: { tag } })));
  const paginator = Sandbox.list({ ...opts, query: { metadata: { tag } }, limit: 2 });
  const pages: number[] = [];
  const seen: string[] = [];
  while (paginator.hasNext) {
    const items = await paginator.nextItems();
    pages.push(items.length);
    seen.push(...items.map((s) => s.sandboxId));
  }
  expect(pages).toEqual([2, 1]);
  expect(seen.sort()).toEqual(made.map((s) => s.sandboxId).sort());

  // As in the README: for await goes through every page on its own.
  const iterated: string[] = [];
  for await (const info of Sandbox.list({ ...opts, query: { metadata: { tag } }, limit: 2 })) {
    expect(info).toMatchObject({ state: 'running', metadata: { tag } });
    expect(info.endAt).toBeInstanceOf(Date);
    iterated.push(info.sandboxId);
  }
  expect(iterated.sort()).toEqual(made.map((s) => s.sandboxId).sort());
  for (const s of made) await s.kill();
});

test('pause, then connect resumes it; its files are there', async () => {
  const sbx = await Sandbox.create('base', opts);
  await sbx.files.write('kept.txt', 'kept');
  expect(await sbx.pause()).toBe(true);
  expect(await sbx.isRunning()).toBe(false);
  expect(await sbx.pause()).toBe(false);
  const back = await Sandbox.connect(sbx.sandboxId, opts);
  expect(await back.isRunning()).toBe(true);
  expect(await back.files.read('kept.txt')).toBe('kept');
  await back.kill();
});

test('setTimeout: the sandbox expires and is no longer running', async () => {
  const sbx = await Sandbox.create('base', opts);
  await sbx.setTimeout(1000);
  await eventually(async () => !(await sbx.isRunning()), 'the sandbox to expire');
  await expect(Sandbox.getInfo(sbx.sandboxId, opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
});

test('kill; isRunning is false after it; kill again is false', async () => {
  const sbx = await Sandbox.create('base', opts);
  expect(await sbx.kill()).toBe(true);
  expect(await sbx.isRunning()).toBe(false);
  expect(await Sandbox.kill(sbx.sandboxId, opts)).toBe(false);
});

test('updateNetwork stores the rules; bad rules are an InvalidArgumentError', async () => {
  const sbx = await Sandbox.create('base', opts);
  await sbx.updateNetwork({ allowOut: ['pypi.org', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'] });
  expect((await sbx.getInfo()).network).toMatchObject({ allowOut: ['pypi.org', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'] });
  await expect(sbx.updateNetwork({ denyOut: ['example.com'] })).rejects.toBeInstanceOf(InvalidArgumentError);
  await sbx.kill();
});

test('errors of the right class: missing sandbox, missing template, bad input, bad API key', async () => {
  const noTemplate = await Sandbox.create('no-such-template', opts).catch((e: unknown) => e);
  expect(noTemplate).toBeInstanceOf(NotFoundError);
  expect(noTemplate).not.toBeInstanceOf(SandboxNotFoundError);
  await expect(Sandbox.create('base', { ...opts, timeoutMs: 10 * 24 * 3600 * 1000 })).rejects.toBeInstanceOf(InvalidArgumentError);
  await expect(Sandbox.connect('nosuchsandbox', opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
  await expect(Sandbox.getInfo('nosuchsandbox', opts)).rejects.toBeInstanceOf(SandboxNotFoundError);
  const bad = Sandbox.create('base', { ...opts, apiKey: 'e2b_' + '0'.repeat(40) });
  await expect(bad).rejects.toBeInstanceOf(AuthenticationError);
});
