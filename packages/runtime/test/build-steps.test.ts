// A build step run as the only process of a build container (runStep): the
// container is made as a sandbox is and the command runs as envd would run
// it, what the command changed (and nothing else) becomes the step's layer,
// and nothing of the step outlives it.
import { existsSync, lstatSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ID_RANGE, RuncRuntime } from '../src/index.js';
import { exec, sandboxLeftovers, sharedImages, sleep, testRuntime, TOKEN, type TestRuntime } from './harness.js';

if (process.getuid?.() !== 0) throw new Error('build steps run in runc containers: run this test as root');

let t: TestRuntime;
beforeAll(async () => {
  t = await testRuntime();
}, 600_000);
afterAll(() => t.teardown());

const layer = (template: string) => join(t.dataDir, 'templates', template, 'layer');

function output() {
  const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  return {
    onOutput: (stream: 'stdout' | 'stderr', bytes: Buffer) => chunks[stream].push(bytes),
    text: (stream: 'stdout' | 'stderr') => Buffer.concat(chunks[stream]).toString(),
  };
}

/** What a process sees of how it runs: who, where, with what environment, limits, privileges and isolation. */
const SELF = [
  'id',
  'echo "HOME=$HOME USER=$USER LOGNAME=$LOGNAME PATH=$PATH GREETING=$GREETING"',
  'pwd',
  'echo "shell=$0 umask=$(umask) nofile=$(ulimit -n)"',
  'grep -E "^(Seccomp|NoNewPrivs|CapInh|CapPrm|CapEff|CapBnd|CapAmb|Groups):" /proc/self/status',
  'cat /proc/self/uid_map /proc/self/gid_map /proc/self/oom_score_adj',
  'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max /sys/fs/cgroup/cpu.weight',
  'ls /.paddock',
  'env | sort',
].join('; ');

test.each(['user', 'root'])('a step runs as %s as envd runs the same command in a sandbox of the same template', async (user) => {
  const o = output();
  const r = await t.runtime.runStep('base', `step-self-${user}`, { shell: SELF, user, env: { GREETING: 'hi' } }, { limits: { memoryMB: 384 }, onOutput: o.onOutput });
  await t.runtime.destroy(r.sandboxId);
  expect(r).toMatchObject({ exitCode: 0, status: 'exit status 0', template: { id: `step-self-${user}`, parentId: 'base' } });
  expect(o.text('stderr')).toBe('');

  const sandbox = await t.runtime.create({ templateId: 'base', limits: { memoryMB: 384 }, init: { accessToken: TOKEN }, cold: true });
  try {
    const envd = await exec(t.runtime, sandbox.id, `export GREETING=hi; ${SELF}`, { user });
    expect(envd.exitCode).toBe(0);
    expect(o.text('stdout')).toBe(envd.stdout);
  } finally {
    await t.runtime.destroy(sandbox.id);
  }
  // And that is a sandbox's isolation: its own user namespace, seccomp, its limits.
  expect(o.text('stdout')).toMatch(new RegExp(`^\\s+0\\s+\\d+\\s+${ID_RANGE}$`, 'm'));
  expect(o.text('stdout')).toMatch(/^Seccomp:\s+2$/m);
  expect(o.text('stdout')).toMatch(new RegExp(`^${384 * 1024 * 1024}$`, 'm'));
  if (user === 'user') expect(o.text('stdout')).toMatch(/^CapEff:\s+0+$/m);
}, 120_000);

test("a step's layer holds exactly what it changed: new files, a deletion as a whiteout, a replaced directory as opaque", async () => {
  // On the base image: /etc/issue is a file of a lower layer, /etc/skel a directory of one.
  const r = await t.runtime.runStep('base', 'step-changes', { shell: 'echo new > /opt/new.txt && rm /etc/issue && rm -r /etc/skel && mkdir /etc/skel && echo mine > /etc/skel/only', user: 'root' });
  await t.runtime.destroy(r.sandboxId);
  expect(r.exitCode).toBe(0);
  const l = layer('step-changes');
  expect(readFileSync(join(l, 'opt/new.txt'), 'utf8')).toBe('new\n');
  const whiteout = lstatSync(join(l, 'etc/issue'));
  expect(whiteout.isCharacterDevice() && whiteout.rdev === 0).toBe(true);
  expect(execFileSync('getfattr', ['--absolute-names', '--only-values', '-n', 'trusted.overlay.opaque', join(l, 'etc/skel')]).toString()).toBe('y');
  expect(readdirSync(join(l, 'etc/skel'))).toEqual(['only']);
  // Nothing else: the step's own name files are not the template's; the
  // mount points runc makes for any sandbox's container (the base image has
  // no /etc/resolv.conf) are empty.
  expect(readdirSync(l).sort()).toEqual(['.paddock', 'dev', 'etc', 'opt']);
  for (const mountPoint of ['.paddock', 'dev']) expect(readdirSync(join(l, mountPoint))).toEqual([]);
  expect(readdirSync(join(l, 'etc')).sort()).toEqual(['issue', 'resolv.conf', 'skel']);
  expect(readFileSync(join(l, 'etc/resolv.conf'), 'utf8')).toBe('');

  // A step on that layer sees it as a sandbox would.
  const o = output();
  const next = await t.runtime.runStep('step-changes', 'step-changes-2', { shell: 'cat /opt/new.txt; ls /etc/skel; test -e /etc/issue || echo no-issue', user: 'root' }, { onOutput: o.onOutput });
  await t.runtime.destroy(next.sandboxId);
  expect(o.text('stdout')).toBe('new\nonly\nno-issue\n');
}, 120_000);

test('processes a step leaves running end with it: nothing they do later is in the layer, and none survives', async () => {
  const r = await t.runtime.runStep('base', 'step-background', { shell: '(sleep 1; touch /late) >/dev/null 2>&1 & sleep 1000 >/dev/null 2>&1 & echo started', user: 'root' });
  expect(r.exitCode).toBe(0);
  await sleep(1500);
  expect(existsSync(join(layer('step-background'), 'late'))).toBe(false);
  // The step's cgroup (and with it any process of the step) is gone once its container is.
  await t.runtime.destroy(r.sandboxId);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
  expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toMatch(/^sleep 1000$/m);
}, 120_000);

test('a failing command gives its status and output and makes no template; a user or directory that does not exist is named', async () => {
  const o = output();
  const failed = await t.runtime.runStep('base', 'step-failed', { shell: 'echo out; echo err >&2; exit 3' }, { onOutput: o.onOutput });
  await t.runtime.destroy(failed.sandboxId);
  expect(failed).toMatchObject({ exitCode: 3, status: 'exit status 3' });
  expect(failed.template).toBeUndefined();
  expect(o.text('stdout')).toBe('out\n');
  expect(o.text('stderr')).toBe('err\n');
  expect(await t.runtime.getTemplate('step-failed')).toBeUndefined();

  const nobody = await t.runtime.runStep('base', 'step-nobody', { shell: 'true', user: 'nobody-here' });
  await t.runtime.destroy(nobody.sandboxId);
  expect(nobody).toMatchObject({ exitCode: -1, status: "user 'nobody-here' does not exist" });
  const nowhere = await t.runtime.runStep('base', 'step-nowhere', { shell: 'true', cwd: '/no/such/dir' });
  await t.runtime.destroy(nowhere.sandboxId);
  expect(nowhere).toMatchObject({ exitCode: -1, status: "cwd '/no/such/dir' does not exist" });
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
}, 120_000);

test('a step cancelled while it runs ends at once, leaving nothing', async () => {
  const abort = new AbortController();
  const started = Date.now();
  const running = t.runtime.runStep('base', 'step-cancelled', { shell: 'echo going; sleep 1000' }, { signal: abort.signal, onOutput: () => abort.abort(new Error('cancelled by the test')) });
  await expect(running).rejects.toThrow('cancelled by the test');
  expect(Date.now() - started).toBeLessThan(20_000);
  expect(await t.runtime.getTemplate('step-cancelled')).toBeUndefined();
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
  expect(readdirSync(join(t.dataDir, 'templates')).filter((n) => n.startsWith('.new-'))).toEqual([]);
}, 120_000);

test("a step's container destroyed while its command runs ends the command at once", async () => {
  let said: () => void;
  const going = new Promise<void>((resolve) => (said = resolve));
  const running = t.runtime.runStep('base', 'step-destroyed', { shell: 'echo going; sleep 1000' }, { onOutput: () => said() });
  await going;
  const [id] = readdirSync(join(t.dataDir, 'sandboxes'));
  const started = Date.now();
  await t.runtime.destroy(id!);
  expect(Date.now() - started).toBeLessThan(20_000);
  const result = await running;
  expect(result).toMatchObject({ exitCode: 137, status: 'exit status 137' });
  expect(result.template).toBeUndefined();
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
}, 120_000);

test('a step container left by a runtime that stopped is removed when the runtime starts again, and is no sandbox meanwhile', async () => {
  const r = await t.runtime.runStep('base', 'step-left', { shell: 'true' });
  expect(await t.runtime.get(r.sandboxId)).toBeUndefined();
  expect((await t.runtime.list()).map((s) => s.id)).not.toContain(r.sandboxId);
  expect(existsSync(join(t.dataDir, 'sandboxes', r.sandboxId))).toBe(true);
  // As at a restart: the runtime stops without removing it, and another starts on the same directory.
  await t.runtime.close();
  t.runtime = new RuncRuntime({ dataDir: t.dataDir, ...sharedImages });
  await t.runtime.prepare();
  expect(existsSync(join(t.dataDir, 'sandboxes', r.sandboxId))).toBe(false);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
  expect(await t.runtime.getTemplate('step-left')).toMatchObject({ id: 'step-left' });
}, 180_000);

/** Which sandbox ids hold network slots now, from the network's slot records. */
const slotHolders = () => {
  const dir = join(t.dataDir, 'network', 'slots');
  return (existsSync(dir) ? readdirSync(dir) : []).filter((f) => f.endsWith('.json')).map((f) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { sandboxId: string }).sandboxId);
};
/** The inodes of the host's named network namespaces. */
const namespaceInodes = () => readdirSync('/run/netns').map((n) => statSync(join('/run/netns', n)).ino);
/** The inode of the network namespace a step's `readlink /proc/self/ns/net` printed (`net:[4026532...]`). */
const netnsOf = (printed: string) => Number(/^net:\[(\d+)\]$/m.exec(printed)?.[1]);

test("a build's steps join the network slot it holds, one after another, and take none of their own; destroy releases it", async () => {
  const held = await t.runtime.holdStepNetwork({});
  expect(slotHolders()).toContain(held);
  expect(await t.runtime.get(held)).toBeUndefined();
  const first = output();
  const one = await t.runtime.runStep('base', 'step-net-1', { shell: 'readlink /proc/self/ns/net', user: 'root' }, { stepNetwork: held, onOutput: first.onOutput });
  // Its container, stopped and not yet destroyed, holds no slot: the build does.
  expect(slotHolders()).not.toContain(one.sandboxId);
  await t.runtime.destroy(one.sandboxId);
  expect(slotHolders()).toContain(held);
  const second = output();
  const two = await t.runtime.runStep('step-net-1', 'step-net-2', { shell: 'readlink /proc/self/ns/net', user: 'root' }, { stepNetwork: held, onOutput: second.onOutput });
  await t.runtime.destroy(two.sandboxId);
  expect([one.exitCode, two.exitCode]).toEqual([0, 0]);
  const netns = netnsOf(first.text('stdout'));
  expect(netnsOf(second.text('stdout'))).toBe(netns);
  expect(namespaceInodes()).toContain(netns);

  await t.runtime.destroy(held);
  expect(slotHolders()).not.toContain(held);
  expect(namespaceInodes()).not.toContain(netns);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
  await expect(t.runtime.runStep('base', 'step-net-gone', { shell: 'true' }, { stepNetwork: held })).rejects.toThrow(`step network '${held}' does not exist`);
  await expect(t.runtime.runStep('base', 'step-net-bad', { shell: 'true' }, { stepNetwork: '../templates' })).rejects.toThrow("step network '../templates' does not exist");
  // A sandbox is no step network.
  const sandbox = await t.runtime.create({ templateId: 'base', cold: true });
  await expect(t.runtime.runStep('base', 'step-net-sandbox', { shell: 'true' }, { stepNetwork: sandbox.id })).rejects.toThrow(`step network '${sandbox.id}' does not exist`);
  await t.runtime.destroy(sandbox.id);
}, 120_000);

test('a held network takes one step container at a time', async () => {
  const held = await t.runtime.holdStepNetwork();
  let said: () => void;
  const going = new Promise<void>((resolve) => (said = resolve));
  const abort = new AbortController();
  const running = t.runtime.runStep('base', 'step-net-busy', { shell: 'echo going; sleep 1000' }, { stepNetwork: held, signal: abort.signal, onOutput: () => said() });
  await going;
  await expect(t.runtime.runStep('base', 'step-net-second', { shell: 'true' }, { stepNetwork: held })).rejects.toThrow(`step network '${held}' is in use by another step`);
  abort.abort(new Error('done with it'));
  await expect(running).rejects.toThrow('done with it');
  await t.runtime.destroy(held);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
}, 120_000);

test('a network held for a build is released when the runtime starts again', async () => {
  const held = await t.runtime.holdStepNetwork();
  const o = output();
  const r = await t.runtime.runStep('base', 'step-net-left', { shell: 'readlink /proc/self/ns/net', user: 'root' }, { stepNetwork: held, onOutput: o.onOutput });
  const netns = netnsOf(o.text('stdout'));
  // As at a restart mid-build: the runtime stops without removing anything, and another starts on the same directory.
  await t.runtime.close();
  t.runtime = new RuncRuntime({ dataDir: t.dataDir, ...sharedImages });
  await t.runtime.prepare();
  for (const id of [held, r.sandboxId]) expect(existsSync(join(t.dataDir, 'sandboxes', id))).toBe(false);
  expect(slotHolders()).not.toContain(held);
  expect(namespaceInodes()).not.toContain(netns);
  expect(await sandboxLeftovers(t.runtime)).toEqual([]);
}, 180_000);
