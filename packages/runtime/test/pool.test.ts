// The warm pool: ready sandboxes handed out on create, refilled behind.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runTrue, WARM_UP_ROUNDS, warmUpEnvd } from '../src/envd-link.js';
import { RuncRuntime } from '../src/index.js';
import { warningsOnly } from '../src/log.js';
import { exec, ociCall, sandboxLeftovers, sharedImages, testRuntime, TOKEN, type TestRuntime } from './harness.js';

let t: TestRuntime;
/** What the runtime said of each boot. */
const poolBoots: Record<string, unknown>[] = [];
const log = { ...warningsOnly, info: (fields: Record<string, unknown>) => void (fields.pooled !== undefined && poolBoots.push(fields)) };
beforeAll(async () => {
  t = await testRuntime({ warmPoolSize: 2, log });
  await t.runtime.poolReady();
});
afterAll(() => t.teardown());

test('create takes a pooled sandbox, initialised with the caller\'s token and variables, and the pool refills', async () => {
  const pooled = t.runtime.pooled().base!;
  expect(pooled).toHaveLength(2);
  expect(await t.runtime.list()).toEqual([]);
  const s = await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN, envVars: { FROM_INIT: 'yes' } } });
  expect(s.fromPool).toBe(true);
  expect(pooled).toContain(s.id);
  expect((await exec(t.runtime, s.id, 'echo $FROM_INIT; hostname')).stdout).toBe(`yes\n${s.id}\n`);
  expect((await t.runtime.list()).map((x) => x.id)).toEqual([s.id]);
  // The refill starts a moment after the claim, on its own.
  while (t.runtime.pooled().base!.length < 2) await new Promise((r) => setTimeout(r, 50));
  expect(t.runtime.pooled().base).not.toContain(s.id);
  await t.runtime.destroy(s.id);
});

test('pooled sandboxes have run commands through envd before their claim, so that their owner\'s first ones run warm', async () => {
  const booted = poolBoots.filter((b) => b.pooled);
  expect(booted.length).toBeGreaterThanOrEqual(2);
  for (const b of booted) expect(b.warmUpCommands).toBe(2 * WARM_UP_ROUNDS);
  const id = t.runtime.pooled().base![0]!;
  const endpoint = t.runtime.envdEndpoint(id);
  if (!('socketPath' in endpoint)) throw new Error('expected a unix socket endpoint');
  // What the pool runs after a boot, in both formats: a login shell, then /bin/true.
  await expect(warmUpEnvd(endpoint.socketPath, 2)).resolves.toBe(4);
  await expect(runTrue(endpoint.socketPath, 'binary')).resolves.toBeUndefined();
  await expect(runTrue(endpoint.socketPath, 'json', { cmd: '/no/such/shell' })).rejects.toThrow(/could not run a command/);
  // Where nothing runs, it stops after its first round.
  const gone = join(t.dataDir, 'no-such.sock');
  await expect(runTrue(gone, 'binary')).rejects.toThrow(/ENOENT/);
  await expect(warmUpEnvd(gone)).resolves.toBe(0);
});

test('other limits, or cold: true, skip the pool', async () => {
  const cold = await t.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } });
  const small = await t.runtime.create({ templateId: 'base', limits: { memoryMB: 256 }, init: { accessToken: TOKEN } });
  expect(cold.fromPool).toBeUndefined();
  expect(small.fromPool).toBeUndefined();
  await t.runtime.destroy(cold.id);
  await t.runtime.destroy(small.id);
});

test('a burst of creates that empties the pool boots only its callers\' sandboxes; the pool refills after it', async () => {
  await t.runtime.poolReady();
  const dir = join(t.dataDir, 'sandboxes');
  const before = new Set(readdirSync(dir));
  // Six at once: two take the pooled sandboxes (which arms the refill), and
  // four boot their own, on two cores for longer than the refill's delay.
  const made = await Promise.all(Array.from({ length: 6 }, () => t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })));
  const burstEnded = Date.now();
  expect(made.filter((s) => s.fromPool)).toHaveLength(2);
  await t.runtime.poolReady();
  const refills = readdirSync(dir).filter((id) => !before.has(id) && !made.some((s) => s.id === id));
  expect([...t.runtime.pooled().base!].sort()).toEqual(refills.sort());
  expect(refills).toHaveLength(2);
  // A sandbox's createdAt is when its boot began.
  for (const id of refills) {
    const spec = JSON.parse(readFileSync(join(dir, id, 'spec.json'), 'utf8')) as { createdAt: string };
    expect(Date.parse(spec.createdAt)).toBeGreaterThanOrEqual(burstEnded);
  }
  for (const s of made) await t.runtime.destroy(s.id);
});

test('a pooled sandbox whose container died is not handed out, with or without init', async () => {
  for (const init of [{ accessToken: TOKEN }, undefined]) {
    await t.runtime.poolReady();
    const [dead, alive] = t.runtime.pooled().base!;
    ociCall(t.dataDir, ['kill', dead!, 'KILL']);
    while (!/"status": "stopped"/.test(ociCall(t.dataDir, ['state', dead!]))) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const s = await t.runtime.create({ templateId: 'base', ...(init ? { init } : {}) });
    expect(s.id).toBe(alive);
    expect((await exec(t.runtime, s.id, 'echo ok')).stdout).toBe('ok\n');
    expect(t.runtime.pooled().base).not.toContain(dead);
    await t.runtime.destroy(s.id);
  }
});

test('a restarted runtime puts running pool sandboxes back in its pool', async () => {
  await t.runtime.poolReady();
  const before = [...t.runtime.pooled().base!].sort();
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir, warmPoolSize: 2 });
  await other.prepare();
  expect([...other.pooled().base!].sort()).toEqual(before);
  expect(await other.list()).toEqual([]);
  await other.close();
});

test("a template's preparation runs on each sandbox before it is pooled; one whose preparation fails is removed", async () => {
  await t.runtime.poolReady();
  const claimed = [];
  for (let i = 0; i < 2; i++) claimed.push(await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } }));
  const seen: string[] = [];
  let failures = 1;
  await t.runtime.setPooledTemplates([
    {
      templateId: 'base',
      prepare: async (id) => {
        seen.push(id);
        await exec(t.runtime, id, 'echo prepared > /tmp/prepared');
        if (failures-- > 0) throw new Error('not ready yet');
      },
    },
  ]);
  // The failed fill is tried again a few seconds later.
  for (let i = 0; i < 300 && t.runtime.pooled().base!.length < 2; i++) await new Promise((r) => setTimeout(r, 100));
  const pooled = t.runtime.pooled().base!;
  expect(pooled).toHaveLength(2);
  expect(seen).toHaveLength(3);
  expect(pooled.sort()).toEqual(seen.slice(1).sort());
  expect(readdirSync(join(t.dataDir, 'sandboxes'))).not.toContain(seen[0]);
  for (const id of pooled) expect((await exec(t.runtime, id, 'cat /tmp/prepared')).stdout).toBe('prepared\n');
  await t.runtime.setPooledTemplates([{ templateId: 'base' }]);
  for (const s of claimed) await t.runtime.destroy(s.id);
}, 60_000);

test('a pooled template whose boots keep failing waits longer between tries and does not hold up the pool of another', async () => {
  await t.runtime.poolReady();
  const base = (await t.runtime.getTemplate('base'))!;
  await t.runtime.deriveTemplate('pool-other', 'base', base.config);
  // Empty base's pool, so that it is the first to refill.
  const claimed = [];
  for (let i = 0; i < 2; i++) claimed.push(await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } }));
  const tries: number[] = [];
  try {
    await t.runtime.setPooledTemplates([
      {
        templateId: 'base',
        prepare: async () => {
          tries.push(Date.now());
          throw new Error('never ready');
        },
      },
      { templateId: 'pool-other' },
    ]);
    for (let i = 0; i < 300 && (t.runtime.pooled()['pool-other'] ?? []).length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect(t.runtime.pooled()['pool-other']).toHaveLength(2);
    // The second try of base comes after the first wait (5 s) and a boot; the next would wait 10 s.
    for (let i = 0; i < 300 && tries.length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    expect(tries).toHaveLength(2);
    expect(tries[1]! - tries[0]!).toBeGreaterThanOrEqual(5000);
    expect(t.runtime.pooled().base ?? []).toEqual([]);
  } finally {
    await t.runtime.setPooledTemplates([{ templateId: 'base' }]);
    for (const s of claimed) await t.runtime.destroy(s.id);
  }
  expect(t.runtime.pooled()['pool-other']).toBeUndefined();
  await t.runtime.deleteTemplate('pool-other');
  await t.runtime.poolReady();
}, 90_000);

test('a restarted runtime removes a pool sandbox whose boot or preparation was cut off', async () => {
  await t.runtime.poolReady();
  const [cut, kept] = t.runtime.pooled().base!;
  const specFile = join(t.dataDir, 'sandboxes', cut!, 'spec.json');
  const spec = JSON.parse(readFileSync(specFile, 'utf8'));
  delete spec.poolReady;
  writeFileSync(specFile, JSON.stringify(spec));
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir, warmPoolSize: 0 });
  await other.prepare();
  expect(other.pooled().base).toEqual([kept]);
  expect(readdirSync(join(t.dataDir, 'sandboxes'))).not.toContain(cut);
  await other.close();
  // This runtime's pool still names the removed one: it is made again.
  await t.runtime.setPooledTemplates([]);
  await t.runtime.setPooledTemplates([{ templateId: 'base' }]);
  await t.runtime.poolReady();
});

test('closing while the pool refills leaves nothing behind after release', async () => {
  const other = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir, warmPoolSize: 2 });
  await other.prepare();
  const s = await other.create({ templateId: 'base', init: { accessToken: TOKEN } });
  expect(s.fromPool).toBe(true);
  // Start the refill now rather than a moment after the claim, and close while it runs.
  const refilled = other.poolReady();
  await other.close();
  await refilled;
  await other.destroy(s.id);
  expect(Object.values(other.pooled()).flat().length).toBeGreaterThanOrEqual(2);
  await t.runtime.close();
  await t.runtime.release();
  expect(await other.list()).toEqual([]);
  expect(readdirSync(join(t.dataDir, 'sandboxes'))).toEqual([]);
});

test('a pool size of 0 disables the pool: no sandbox is started ahead, and create boots one', async () => {
  const none = await testRuntime({ warmPoolSize: 0 });
  try {
    await none.runtime.poolReady();
    expect(Object.values(none.runtime.pooled()).flat()).toEqual([]);
    expect(readdirSync(join(none.dataDir, 'sandboxes'))).toEqual([]);
    // No container, cgroup, mount, sandbox directory or network slot in use either.
    expect(await sandboxLeftovers(none.runtime)).toEqual([]);
    const s = await none.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } });
    expect(s.fromPool).toBeUndefined();
    expect((await exec(none.runtime, s.id, 'echo cold')).stdout).toBe('cold\n');
    await none.runtime.destroy(s.id);
    expect(Object.values(none.runtime.pooled()).flat()).toEqual([]);
  } finally {
    await none.teardown();
  }
});
