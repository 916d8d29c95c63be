// Overlay mounts of many layers: a template built step by step stacks a
// layer per step on its image's, more than the absolute paths of which fit
// in mount(2)'s one page of options.
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_OVERLAY_LOWERS, isMounted, mountOverlay, unmount } from '../src/mounts.js';

let dir: string;
beforeEach(() => {
  // Deep enough that its layer paths are as long as a data directory's.
  dir = mkdtempSync(join(tmpdir(), 'paddock-mounts-'));
});
afterEach(async () => {
  await unmount(join(dir, 'rootfs'));
  rmSync(dir, { recursive: true, force: true });
});

function layers(count: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    const layer = join(dir, 'layers', 'sha256', i.toString(16).padStart(64, '0'), 'fs');
    mkdirSync(layer, { recursive: true });
    writeFileSync(join(layer, `only-${i}`), '');
    writeFileSync(join(layer, 'top'), `${i}\n`);
    return layer;
  });
}

test('an overlay of 300 layers mounts: every layer shows, the top-most first', async () => {
  const lowers = layers(300);
  // What mount(2) would have been given without the short names: more than its page.
  expect(lowers.join(':').length).toBeGreaterThan(4096);
  for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(dir, d));
  await mountOverlay(join(dir, 'rootfs'), lowers, join(dir, 'upper'), join(dir, 'work'), dir);
  expect(isMounted(join(dir, 'rootfs'))).toBe(true);
  const names = readdirSync(join(dir, 'rootfs'));
  expect(names).toHaveLength(301);
  expect(names).toContain('only-299');
  expect(readFileSync(join(dir, 'rootfs', 'top'), 'utf8')).toBe('0\n');
});

test('more layers than overlayfs stacks are refused, naming the count', async () => {
  const many = Array.from({ length: MAX_OVERLAY_LOWERS + 1 }, (_, i) => `/nowhere/${i}`);
  await expect(mountOverlay(join(dir, 'rootfs'), many, join(dir, 'upper'), join(dir, 'work'), dir)).rejects.toThrow(`an overlay stacks at most 500 layers; this one has 501`);
});

/** The pids of this process's children (of its main thread), from /proc. */
const children = () => new Set(readFileSync(`/proc/self/task/${process.pid}/children`, 'utf8').trim().split(' ').filter(Boolean));

test('unmount is a system call off the event loop, no umount(8) started; a busy mount is detached lazily', async () => {
  for (const d of ['upper', 'work', 'rootfs']) mkdirSync(join(dir, d));
  const rootfs = join(dir, 'rootfs');
  await mountOverlay(rootfs, layers(2), join(dir, 'upper'), join(dir, 'work'), dir);
  const before = children();
  const unmounting = unmount(rootfs);
  // A program started for it would be a child now (until the event loop collects it).
  expect([...children()].filter((pid) => !before.has(pid))).toEqual([]);
  await unmounting;
  expect(isMounted(rootfs)).toBe(false);

  await mountOverlay(rootfs, layers(2), join(dir, 'upper'), join(dir, 'work'), dir);
  // An open directory in the mount keeps it busy.
  const busy = openSync(rootfs, 'r');
  try {
    await unmount(rootfs);
  } finally {
    closeSync(busy);
  }
  expect(isMounted(rootfs)).toBe(false);
});
