// The warm pool of a template with a start command: its sandboxes wait in
// the pool with the command running and the ready command passed, a create
// takes one without starting the command again, and a restarted server
// pools them again as they are.
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuncRuntime } from '@paddock/runtime';
import { api as callApi, finishedBuild, run, testServer, type TestServer } from './harness.js';

const home = mkdtempSync(join(tmpdir(), 'paddock-srv-pool-'));
const options = { home, warmPoolSize: 1, warmPoolTemplates: ['pool-app'] };
const STEPS = [{ type: 'RUN', args: ['echo built > /tmp/built'] }];

/** Builds `name` from base with STEPS and these commands. */
async function build(name: string, startCmd: string, readyCmd: string): Promise<void> {
  const req = await callApi(t.server, 'POST', '/v3/templates', { name });
  const { templateID, buildID } = req.body as { templateID: string; buildID: string };
  await callApi(t.server, 'POST', `/v2/templates/${templateID}/builds/${buildID}`, { fromTemplate: 'base', steps: STEPS, startCmd, readyCmd });
  expect(await finishedBuild(t.server, templateID, buildID)).toMatchObject({ status: 'ready' });
}
let t: TestServer;

beforeAll(async () => {
  t = await testServer(options);
  // Each start leaves a line; the ready command passes once there is one.
  await build('pool-app', 'date +%s%N >> /tmp/starts; exec sleep 3600', 'test -s /tmp/starts');
}, 180_000);

afterAll(() => t.teardown());

const runtime = () => t.server.runtime as RuncRuntime;
const poolOf = () => Object.entries(runtime().pooled()).filter(([, ids]) => ids.length > 0);

test('a built template of the list gets a pool whose sandboxes run its start command; the base template, not listed, gets none', async () => {
  await runtime().poolReady();
  const pools = poolOf();
  expect(pools).toHaveLength(1);
  expect(pools[0]![0]).not.toBe('base');
  expect(pools[0]![1]).toHaveLength(1);
});

test('a create takes the pooled sandbox: the start command ran once, before, and is still running', async () => {
  await runtime().poolReady();
  const [[, [pooledId]]] = poolOf() as [[string, string[]]];
  const s = await t.control.createSandbox({ templateID: 'pool-app' });
  expect(s.sandboxID).toBe(pooledId);
  const r = await run(t.server, s.sandboxID, s.envdAccessToken, 'cat /tmp/built; wc -l < /tmp/starts; pgrep -x sleep >/dev/null && echo running');
  expect(r.stdout).toBe('built\n1\nrunning\n');
  await t.control.killSandbox(s.sandboxID);
});

test('after a restart the pooled sandbox is pooled again as it was, its command not started again', async () => {
  await runtime().poolReady();
  const [[, [pooledId]]] = poolOf() as [[string, string[]]];
  // Sandboxes keep running while the server is away.
  await t.server.close();
  t = await testServer(options);
  await runtime().poolReady();
  expect(poolOf().map(([, ids]) => ids)).toEqual([[pooledId]]);
  const s = await t.control.createSandbox({ templateID: 'pool-app' });
  expect(s.sandboxID).toBe(pooledId);
  const r = await run(t.server, s.sandboxID, s.envdAccessToken, 'wc -l < /tmp/starts');
  expect(r.stdout).toBe('1\n');
  await t.control.killSandbox(s.sandboxID);
});

test('two templates of the same steps but other start commands have pools of their own: each create runs its own command', async () => {
  await build('pool-other', 'echo other >> /tmp/starts; exec sleep 3600', 'test -s /tmp/starts');
  // The same server, pooling both.
  await t.server.close();
  t = await testServer({ ...options, warmPoolTemplates: ['pool-app', 'pool-other'] });
  await runtime().poolReady();
  expect(poolOf()).toHaveLength(2);
  for (const [name, expected] of [['pool-other', /^other\n$/], ['pool-app', /^\d+\n$/]] as const) {
    const pooled = Object.values(runtime().pooled()).flat();
    const s = await t.control.createSandbox({ templateID: name });
    expect(pooled).toContain(s.sandboxID);
    const r = await run(t.server, s.sandboxID, s.envdAccessToken, 'cat /tmp/starts');
    expect(r.stdout).toMatch(expected);
    await t.control.killSandbox(s.sandboxID);
  }
});

test('a template that leaves the list loses its pool', async () => {
  await runtime().poolReady();
  const [[templateId, [pooledId]]] = poolOf() as [[string, string[]]];
  await runtime().setPooledTemplates([]);
  expect(runtime().pooled()[templateId] ?? []).toEqual([]);
  expect(existsSync(join(home, 'runtime', 'sandboxes', pooledId))).toBe(false);
});
