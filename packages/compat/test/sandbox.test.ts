// Sandbox lifecycle with the official e2b SDK: create, info, timeout, list,
// kill, isRunning, pause and connect, metrics.
import { Sandbox } from 'e2b';
import { eventually, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
beforeAll(async () => {
  c = await startForE2b();
});
afterAll(() => c.teardown());

test("Sandbox.create('base', {metadata, envs, timeoutMs}) and getInfo", async () => {
  const sbx = await Sandbox.create('base', { metadata: { owner: 'compat' }, envs: { FROM_CREATE: 'yes' }, timeoutMs: 120_000 });
  const info = await sbx.getInfo();
  expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base', metadata: { owner: 'compat' }, state: 'running', cpuCount: 2, memoryMB: 512 });
  const lifetime = info.endAt.getTime() - info.startedAt.getTime();
  expect(lifetime).toBeGreaterThan(110_000);
  expect(lifetime).toBeLessThanOrEqual(125_000);
  expect((await sbx.commands.run('echo $FROM_CREATE')).stdout).toBe('yes\n');
  expect(sbx.getHost(8080)).toBe(`8080-${sbx.sandboxId}.${c.server.config.domain}`);
  await sbx.kill();
});

test('setTimeout moves the expiry', async () => {
  const sbx = await Sandbox.create('base');
  await sbx.setTimeout(30_000);
  const info = await sbx.getInfo();
  expect(info.endAt.getTime() - Date.now()).toBeLessThan(31_000);
  expect(info.endAt.getTime() - Date.now()).toBeGreaterThan(25_000);
  await Sandbox.setTimeout(sbx.sandboxId, 600_000);
  expect((await Sandbox.getInfo(sbx.sandboxId)).endAt.getTime() - Date.now()).toBeGreaterThan(590_000);
  await sbx.kill();
});

test('Sandbox.list filters by metadata and pages', async () => {
  const run = `list-${Date.now()}`;
  const made = [];
  for (let i = 0; i < 3; i++) made.push(await Sandbox.create('base', { metadata: { run, 'with space': 'a&b=c' } }));
  const paginator = Sandbox.list({ query: { metadata: { run, 'with space': 'a&b=c' } }, limit: 2 });
  const pages: string[][] = [];
  while (paginator.hasNext) pages.push((await paginator.nextItems()).map((s) => s.sandboxId));
  expect(pages.map((p) => p.length)).toEqual([2, 1]);
  expect(pages.flat().sort()).toEqual(made.map((s) => s.sandboxId).sort());
  const none = Sandbox.list({ query: { metadata: { run: 'other' } } });
  expect(await none.nextItems()).toEqual([]);
  for (const s of made) await s.kill();
});

test('kill is true, then false for a missing sandbox; isRunning is false after kill', async () => {
  const sbx = await Sandbox.create('base');
  expect(await sbx.isRunning()).toBe(true);
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(true);
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(false);
  expect(await sbx.isRunning()).toBe(false);
});

test('pause, then Sandbox.connect resumes it with its files', async () => {
  const sbx = await Sandbox.create('base');
  await sbx.files.write('/home/user/kept.txt', 'across the pause');
  expect(await sbx.pause()).toBe(true);
  expect(await sbx.isRunning()).toBe(false);
  expect((await Sandbox.getInfo(sbx.sandboxId)).state).toBe('paused');
  const again = await Sandbox.connect(sbx.sandboxId);
  expect(again.sandboxId).toBe(sbx.sandboxId);
  expect(await again.isRunning()).toBe(true);
  expect(await again.files.read('/home/user/kept.txt')).toBe('across the pause');
  await again.kill();
});

test('getMetrics returns samples', async () => {
  const sbx = await Sandbox.create('base');
  await eventually(async () => (await sbx.getMetrics()).length > 0, 'metrics', 10_000);
  const [m] = await sbx.getMetrics();
  expect(m).toMatchObject({ cpuCount: 2, memTotal: 512 * 1024 * 1024 });
  expect(m!.timestamp).toBeInstanceOf(Date);
  expect(m!.memUsed).toBeGreaterThan(0);
  await sbx.kill();
});
