// Spare disks: formatted and mounted ahead for cold creates, refilled
// behind, removed when their runtime closes and, after a crash, at the next
// start.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createDisk, diskPaths, loopDevicesUnder, mountDisk } from '../src/disk.js';
import { RuncRuntime } from '../src/index.js';
import { mountPoints } from '../src/mounts.js';
import { exec, sharedImages, testRuntime, TOKEN, type TestRuntime } from './harness.js';

let t: TestRuntime;
let sparesDir: string;
beforeAll(async () => {
  t = await testRuntime({ warmPoolSize: 0, spareDisks: 2, network: false });
  sparesDir = join(t.dataDir, 'spare-disks');
  await t.runtime.spareDisksReady();
});
afterAll(() => t.teardown());

const MiB = 1024 * 1024;
/** The disk files of the spares ready now, by inode. */
function spareDiskInodes(): Map<number, number> {
  const out = new Map<number, number>();
  for (const owner of readdirSync(sparesDir)) {
    for (const spare of readdirSync(join(sparesDir, owner))) {
      const st = statSync(join(sparesDir, owner, spare, 'disk.img'));
      out.set(st.ino, st.size);
    }
  }
  return out;
}
const diskOf = (id: string) => statSync(join(t.dataDir, 'sandboxes', id, 'disk.img'));
const mountsUnder = (dir: string) => [...mountPoints()].filter((m) => m.startsWith(dir + '/'));

/**
 * What a process killed while it made spares leaves: one mounted disk, one
 * file still attached to a loop device, one half-made directory. Gives the
 * directory.
 */
async function crashedSpares(): Promise<string> {
  const dead = spawnSync('true').pid!;
  const stale = join(sparesDir, `${dead}.1.deadbeef`);
  const mounted = diskPaths(join(stale, '0'));
  mkdirSync(join(stale, '0'), { recursive: true });
  await createDisk(mounted, 64);
  await mountDisk(mounted);
  mkdirSync(join(stale, '1'));
  await createDisk(diskPaths(join(stale, '1')), 64);
  execFileSync('losetup', ['-f', join(stale, '1', 'disk.img')]);
  mkdirSync(join(stale, '2'));
  writeFileSync(join(stale, '2', 'disk.img'), '');
  expect(mountsUnder(stale)).toHaveLength(1);
  expect(loopDevicesUnder(stale)).toHaveLength(2);
  return stale;
}

test('a cold create takes a spare disk, mounted ahead, and the pool makes another', async () => {
  const spares = spareDiskInodes();
  expect(spares.size).toBe(2);
  const s = await t.runtime.create({ templateId: 'base', cold: true, init: { accessToken: TOKEN } });
  expect(spares.has(diskOf(s.id).ino)).toBe(true);
  expect(t.runtime.spareDiskCount()).toBe(1);
  // The sandbox writes to it, sees its own size, and its root owns its `/`.
  const out = await exec(t.runtime, s.id, 'echo kept > /on-disk && cat /on-disk && df -m --output=size / | tail -1 && stat -c %u /', { user: 'root' });
  const [kept, size, owner] = out.stdout.trim().split(/\s+/);
  expect(kept).toBe('kept');
  expect(Math.abs(Number(size) - s.limits.diskSizeMB)).toBeLessThan(s.limits.diskSizeMB * 0.1);
  expect(owner).toBe('0');
  await t.runtime.spareDisksReady();
  expect(t.runtime.spareDiskCount()).toBe(2);
  expect(spareDiskInodes().has(diskOf(s.id).ino)).toBe(false);
  await t.runtime.destroy(s.id);
});

test('a create of another disk size makes its own disk; the spares made after it are of its size', async () => {
  const spares = spareDiskInodes();
  const s = await t.runtime.create({ templateId: 'base', limits: { diskSizeMB: 96 }, init: { accessToken: TOKEN } });
  expect(spares.has(diskOf(s.id).ino)).toBe(false);
  expect(diskOf(s.id).size).toBe(96 * MiB);
  await t.runtime.spareDisksReady();
  expect([...spareDiskInodes().values()]).toEqual([96 * MiB, 96 * MiB]);
  // The next one of that size takes one.
  const resized = spareDiskInodes();
  const next = await t.runtime.create({ templateId: 'base', limits: { diskSizeMB: 96 }, init: { accessToken: TOKEN } });
  expect(resized.has(diskOf(next.id).ino)).toBe(true);
  expect(t.runtime.spareDiskCount()).toBe(1);
  await t.runtime.destroy(s.id);
  await t.runtime.destroy(next.id);
});

test("a crashed runtime's spares are removed at the next start, mounted or not; a closing runtime removes its own", async () => {
  await t.runtime.spareDisksReady();
  const stale = await crashedSpares();
  const dead = stale.slice(sparesDir.length + 1);
  const ours = readdirSync(sparesDir).filter((d) => d !== dead);
  const next = new RuncRuntime({ ...sharedImages, dataDir: t.dataDir, warmPoolSize: 0, spareDisks: 1, network: false });
  try {
    await next.prepare();
    expect(existsSync(stale)).toBe(false);
    expect(mountsUnder(stale)).toEqual([]);
    expect(loopDevicesUnder(stale)).toEqual([]);
    // Those of a runtime that still runs stay.
    for (const d of ours) expect(existsSync(join(sparesDir, d))).toBe(true);
    expect(t.runtime.spareDiskCount()).toBe(2);
    await next.spareDisksReady();
    expect(next.spareDiskCount()).toBe(1);
  } finally {
    await next.close();
  }
  // Its own went with it; the first runtime's are still there.
  expect(readdirSync(sparesDir).sort()).toEqual(ours.sort());
  expect(mountsUnder(sparesDir).every((m) => ours.some((d) => m.startsWith(join(sparesDir, d) + '/')))).toBe(true);
  const s = await t.runtime.create({ templateId: 'base', limits: { diskSizeMB: 96 }, init: { accessToken: TOKEN } });
  expect((await exec(t.runtime, s.id, 'echo ok')).stdout).toBe('ok\n');
  await t.runtime.destroy(s.id);
});

test("removing everything without a start (what uninstalling does) removes a crashed runtime's spares too", async () => {
  await t.runtime.spareDisksReady();
  const stale = await crashedSpares();
  await new RuncRuntime({ ...sharedImages, dataDir: t.dataDir, warmPoolSize: 0, network: false }).removeEverything();
  expect(existsSync(stale)).toBe(false);
  expect(mountsUnder(stale)).toEqual([]);
  expect(loopDevicesUnder(stale)).toEqual([]);
  // The running runtime's stay, and serve it.
  expect(t.runtime.spareDiskCount()).toBe(2);
  const s = await t.runtime.create({ templateId: 'base', limits: { diskSizeMB: 96 }, init: { accessToken: TOKEN } });
  expect(t.runtime.spareDiskCount()).toBe(1);
  await t.runtime.destroy(s.id);
});
