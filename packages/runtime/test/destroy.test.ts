// How destroy kills a sandbox's container. For a running one it signals the
// init whose pid runc wrote at the start, without a `runc state` first; it
// must never signal a pid that is not the sandbox's (the kernel may have
// given it to another process), nor rely on a signal a frozen container
// does not take. Here runc is real, behind a wrapper that writes down every
// call.
import { spawn, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ociRuntimeUnderTest, parentCgroupsOnHost, sleep, testRuntime, TOKEN, type TestRuntime } from './harness.js';

let dir: string;
let calls: string;
let failDelete: string;
let t: TestRuntime;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-destroy-'));
  calls = join(dir, 'calls');
  // The OCI runtime under test (runc or crun: the same command line).
  const realRunc = execFileSync('sh', ['-c', `command -v ${ociRuntimeUnderTest().ociRuntime}`], { encoding: 'utf8' }).trim();
  const binary = join(dir, 'runc');
  // With the file `fail-delete` beside it, every `runc delete` fails.
  failDelete = join(dir, 'fail-delete');
  writeFileSync(
    binary,
    ['#!/bin/sh', `echo "$*" >> '${calls}'`, `case "$*" in *" delete "*) [ -e '${failDelete}' ] && { echo "delete refused" >&2; exit 1; };; esac`, `exec '${realRunc}' "$@"`, ''].join('\n'),
  );
  chmodSync(binary, 0o755);
  t = await testRuntime({ runcBinary: binary, warmPoolSize: 0 });
});
afterAll(async () => {
  await t?.teardown();
  rmSync(dir, { recursive: true, force: true });
});

const create = async () => (await t.runtime.create({ templateId: 'base', init: { accessToken: TOKEN } })).id;
/** The runc subcommands (with their arguments, `--root` left out) that `fn` set off. */
async function runcCalls(fn: () => Promise<void>): Promise<string[]> {
  writeFileSync(calls, '');
  await fn();
  return readFileSync(calls, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.replace(/^--root \S+ /, ''));
}
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false;
  }
};

test('a running sandbox is killed through the pid runc wrote at its start, with no `runc state`', async () => {
  const id = await create();
  const init = Number(readFileSync(join(t.dataDir, 'sandboxes', id, 'init.pid'), 'utf8'));
  expect(alive(init)).toBe(true);
  expect(await runcCalls(() => t.runtime.destroy(id))).toEqual([`delete ${id}`]);
  expect(alive(init)).toBe(false);
  expect(await t.runtime.get(id)).toBeUndefined();
});

test('a paused sandbox is asked about, and deleted by force: a SIGKILL does not reach a frozen init on cgroup v1', async () => {
  const id = await create();
  const init = Number(readFileSync(join(t.dataDir, 'sandboxes', id, 'init.pid'), 'utf8'));
  await t.runtime.pause(id);
  expect(await runcCalls(() => t.runtime.destroy(id))).toEqual([`state ${id}`, `delete --force ${id}`]);
  expect(alive(init)).toBe(false);
  expect(await t.runtime.get(id)).toBeUndefined();
});

test('a pid file that names a process outside the sandbox is not believed: that process lives on', async () => {
  const id = await create();
  const pidFile = join(t.dataDir, 'sandboxes', id, 'init.pid');
  const init = Number(readFileSync(pidFile, 'utf8'));
  const bystander = spawn('sleep', ['600'], { stdio: 'ignore' });
  try {
    writeFileSync(pidFile, String(bystander.pid));
    expect(await runcCalls(() => t.runtime.destroy(id))).toEqual([`state ${id}`, `delete ${id}`]);
    await sleep(50);
    expect(alive(bystander.pid!)).toBe(true);
    expect(alive(init)).toBe(false);
    expect(await t.runtime.get(id)).toBeUndefined();
  } finally {
    bystander.kill('SIGKILL');
  }
});

test('what a runc killed mid-create leaves in its state directory (a bind mount of its binary) goes with the sandbox', async () => {
  const id = await create();
  // runc makes that mount for a moment while it starts a container, so it
  // is made here by hand, on a sandbox whose container is gone. (crun
  // makes none, but a crun killed mid-create leaves its state directory
  // too: the same directory of the OCI runtime under test goes the same way.)
  await t.runtime.stop(id);
  const state = join(t.dataDir, ociRuntimeUnderTest().ociRuntime, id);
  mkdirSync(state);
  writeFileSync(join(state, 'runc.Xq3e9a'), '');
  execFileSync('mount', ['--bind', '-o', 'ro', execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim(), join(state, 'runc.Xq3e9a')]);
  expect(await t.runtime.leftovers()).toEqual(expect.arrayContaining([`mount ${join(state, 'runc.Xq3e9a')}`, `${ociRuntimeUnderTest().ociRuntime} state directory ${id}`]));
  await t.runtime.destroy(id);
  expect((await t.runtime.leftovers()).filter((l) => l.includes(id))).toEqual([]);
  expect(existsSync(state)).toBe(false);
});

/** The cgroup directories of sandbox `id` on the host, in every hierarchy. */
const cgroupsOf = (id: string) => parentCgroupsOnHost(t.runtime).map((p) => join(p, id)).filter((d) => existsSync(d));

test('a container its OCI runtime has no state of (killed mid-create, before it wrote it) is ended through its cgroups', async () => {
  const id = await create();
  const init = Number(readFileSync(join(t.dataDir, 'sandboxes', id, 'init.pid'), 'utf8'));
  // What a runtime killed between starting the container's init and writing
  // its state leaves: the init runs, and the runtime lists no container.
  rmSync(join(t.dataDir, ociRuntimeUnderTest().ociRuntime, id), { recursive: true });
  expect(alive(init)).toBe(true);
  await t.runtime.destroy(id);
  expect(alive(init)).toBe(false);
  expect(cgroupsOf(id)).toEqual([]);
  expect((await t.runtime.leftovers()).filter((l) => l.includes(id))).toEqual([]);
});

test("a destroy that fails part-way still removes the sandbox's cgroups; the next one finishes", async () => {
  const id = await create();
  expect(cgroupsOf(id).length).toBeGreaterThan(0);
  writeFileSync(failDelete, '');
  try {
    await expect(t.runtime.destroy(id)).rejects.toThrow(/delete refused/);
  } finally {
    rmSync(failDelete);
  }
  // Its processes were killed, so its cgroups are empty and gone although runc failed.
  expect(cgroupsOf(id)).toEqual([]);
  await t.runtime.destroy(id);
  expect((await t.runtime.leftovers()).filter((l) => l.includes(id))).toEqual([]);
});

test('sandboxes killed at awkward moments, and empty cgroups a crash left, are all gone after removeEverything', async () => {
  const other = await testRuntime({ warmPoolSize: 0 });
  let removed = false;
  try {
    const rt = other.runtime;
    const boot = async () => (await rt.create({ templateId: 'base', init: { accessToken: TOKEN } })).id;
    // Init already dead: killed from the host, destroyed before the runtime noticed.
    const dead = await boot();
    process.kill(Number(readFileSync(join(other.dataDir, 'sandboxes', dead, 'init.pid'), 'utf8')), 'SIGKILL');
    await rt.destroy(dead);
    // Mid-pause: destroyed while its pause is under way.
    const pausing = await boot();
    await Promise.all([rt.pause(pausing).catch(() => undefined), rt.destroy(pausing)]);
    // Paused, and left for removeEverything.
    const frozen = await boot();
    await rt.pause(frozen);
    // Empty cgroups of a sandbox that is gone, in every hierarchy, as a crash between
    // a container's end and its cgroups' removal leaves them.
    const stray = 'x'.repeat(20);
    for (const parent of parentCgroupsOnHost(rt)) mkdirSync(join(parent, stray));
    expect((await rt.leftovers()).some((l) => l.includes(stray))).toBe(true);
    // Mid-create: removeEverything arrives while a create is booting.
    const booting = boot().catch((err: Error) => err);
    await sleep(30);
    await rt.removeEverything();
    removed = true;
    await booting;
    expect(await rt.leftovers()).toEqual([]);
    expect(parentCgroupsOnHost(rt)).toEqual([]);
  } finally {
    if (!removed) await other.runtime.removeEverything().catch(() => undefined);
    rmSync(other.dataDir, { recursive: true, force: true });
  }
});
