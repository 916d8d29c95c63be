// The copy tool in worker threads (src/copy-worker.ts), on envd's built
// tools bundle as the runtime runs it: copies placed, failures named, a
// cancelled or failed copy not taking the next one down.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envdSandboxDir, envdToolsScript } from '@paddock/envd';
import { CopyFailed, CopyWorkers } from '../src/copy-worker.js';
import { tarOf } from './registry.js';

let dir: string;
let workers: CopyWorkers;

beforeAll(() => {
  const script = envdToolsScript(envdSandboxDir);
  if (!existsSync(script)) throw new Error('envd is not built: run the envd build');
  dir = mkdtempSync(join(tmpdir(), 'paddock-copy-worker-'));
  // An image with root's account and a /tmp, as the copy needs.
  mkdirSync(join(dir, 'image/etc'), { recursive: true });
  mkdirSync(join(dir, 'image/tmp'), { mode: 0o1777 });
  writeFileSync(join(dir, 'image/etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  writeFileSync(join(dir, 'image/etc/group'), 'root:x:0:\n');
  writeFileSync(join(dir, 'ctx.tar'), tarOf([{ path: 'a.txt', body: 'hello\n' }]));
  workers = new CopyWorkers(script);
});

afterAll(async () => {
  await workers.close();
  rmSync(dir, { recursive: true, force: true });
});

const args = (dest: string, more: string[] = []) => ['--archive', join(dir, 'ctx.tar'), '--source', 'a.txt', '--dest', dest, '--root', join(dir, 'image'), '--id-shift', '0', ...more];

test('copies place the files, one after another and at the same time', async () => {
  await workers.copy(args('/opt/one.txt'), { timeoutMs: 60_000 });
  await Promise.all([workers.copy(args('/opt/two.txt'), { timeoutMs: 60_000 }), workers.copy(args('/opt/three.txt'), { timeoutMs: 60_000 })]);
  for (const f of ['one', 'two', 'three']) expect(readFileSync(join(dir, `image/opt/${f}.txt`), 'utf8')).toBe('hello\n');
  expect(lstatSync(join(dir, 'image/opt/one.txt')).uid).toBe(0);
});

test("a copy that fails is CopyFailed with the tool's reason, and the next one works", async () => {
  const failed = workers.copy(args('/opt/x.txt', ['--owner', 'carol']), { timeoutMs: 60_000 });
  await expect(failed).rejects.toBeInstanceOf(CopyFailed);
  await expect(failed).rejects.toThrow("user 'carol' is not in /etc/passwd");
  await workers.copy(args('/opt/after-failure.txt'), { timeoutMs: 60_000 });
  expect(existsSync(join(dir, 'image/opt/after-failure.txt'))).toBe(true);
});

test('a cancelled copy rejects with the reason; the next one works', async () => {
  const abort = new AbortController();
  abort.abort(new Error('stop now'));
  await expect(workers.copy(args('/opt/never.txt'), { timeoutMs: 60_000, signal: abort.signal })).rejects.toThrow('stop now');
  const late = new AbortController();
  const copying = workers.copy(args('/opt/maybe.txt'), { timeoutMs: 60_000, signal: late.signal });
  late.abort(new Error('stopped midway'));
  await expect(copying).rejects.toThrow('stopped midway');
  await workers.copy(args('/opt/after-cancel.txt'), { timeoutMs: 60_000 });
  expect(existsSync(join(dir, 'image/opt/after-cancel.txt'))).toBe(true);
});

test('after close, a copy is refused', async () => {
  const closing = new CopyWorkers(envdToolsScript(envdSandboxDir));
  closing.warm();
  await closing.close();
  await expect(closing.copy(args('/opt/closed.txt'), { timeoutMs: 60_000 })).rejects.toThrow('closed');
});
