// The official e2b SDK, in its debug mode (envd at localhost:49983, no
// control plane), drives this envd unchanged.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Sandbox as E2bSandbox } from 'e2b';
import { startEnvd, type RunningEnvd } from './harness.js';

let envd: RunningEnvd;
let Sandbox: typeof E2bSandbox;

beforeAll(async () => {
  envd = await startEnvd({ token: null, port: 49983 });
  process.env.E2B_DEBUG = 'true';
  ({ Sandbox } = await import('e2b'));
});
afterAll(async () => {
  delete process.env.E2B_DEBUG;
  await envd.stop();
});

test('files: write, read, list, exists, rename, remove', async () => {
  const sbx = await Sandbox.create();
  const info = await sbx.files.write('sdk/hello.txt', 'hello from e2b');
  expect(info).toMatchObject({ name: 'hello.txt', path: join(envd.home.user, 'sdk/hello.txt') });
  expect(await sbx.files.read('sdk/hello.txt')).toBe('hello from e2b');
  expect(Buffer.from(await sbx.files.read('sdk/hello.txt', { format: 'bytes' })).toString()).toBe('hello from e2b');
  await sbx.files.write([
    { path: 'sdk/many/a.txt', data: 'A' },
    { path: 'sdk/many/b.txt', data: 'B' },
  ]);
  const listing = await sbx.files.list('sdk', { depth: 2 });
  expect(listing.map((e) => `${e.type}:${e.name}`)).toEqual(['file:hello.txt', 'dir:many', 'file:a.txt', 'file:b.txt']);
  expect(await sbx.files.exists('sdk/many/a.txt')).toBe(true);
  expect(await sbx.files.exists('sdk/nothing')).toBe(false);
  expect(await sbx.files.makeDir('sdk/many')).toBe(false);
  await sbx.files.rename('sdk/many/a.txt', 'sdk/many/c.txt');
  expect(await sbx.files.read('sdk/many/c.txt')).toBe('A');
  await sbx.files.remove('sdk');
  expect(await sbx.files.exists('sdk')).toBe(false);
});

test('commands: run with output, exit codes and environment', async () => {
  const sbx = await Sandbox.create();
  const chunks: string[] = [];
  const ok = await sbx.commands.run('echo out; echo err >&2; echo "$GREETING"', { envs: { GREETING: 'hi' }, onStdout: (d) => void chunks.push(d) });
  expect(ok).toMatchObject({ exitCode: 0, stdout: 'out\nhi\n', stderr: 'err\n' });
  expect(chunks.join('')).toBe('out\nhi\n');
  await expect(sbx.commands.run('exit 4')).rejects.toMatchObject({ exitCode: 4 });
  expect((await sbx.commands.run('id -u')).stdout).toBe('1000\n');
  expect((await sbx.commands.run('id -u', { user: 'root' })).stdout).toBe('0\n');
});

test('watchDir reports writes', async () => {
  const sbx = await Sandbox.create();
  const dir = join(envd.dir, 'work/e2b-watch');
  mkdirSync(dir, { recursive: true });
  const seen: string[] = [];
  const handle = await sbx.files.watchDir(dir, (e) => void seen.push(`${e.type}:${e.name}`));
  await sbx.files.write(join(dir, 'w.txt'), 'data');
  for (let i = 0; i < 100 && !seen.includes('write:w.txt'); i++) await new Promise((r) => setTimeout(r, 20));
  await handle.stop();
  expect(seen).toEqual(expect.arrayContaining(['create:w.txt', 'write:w.txt']));
});
