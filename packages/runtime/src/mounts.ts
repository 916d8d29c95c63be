// Overlay mounts of sandbox root filesystems, through mount(2) in a native
// addon (native/mount_overlay.c): Node has none, and mount(8) was a process
// start on every sandbox start. Unmounts through umount(2) in the same
// addon, off the event loop: umount(8) was a fork of this whole process.
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { rm } from 'node:fs/promises';

interface MountNative {
  mountOverlay(dir: string, target: string, options: string): void;
  /** umount2(target, lazy ? MNT_DETACH : 0) in a thread of libuv's pool; rejects with an errno error. */
  unmount(target: string, lazy: boolean): Promise<void>;
}

let native: MountNative | undefined;

function mountNative(): MountNative {
  if (native) return native;
  const file = join(import.meta.dirname, '../build/Release/mount_overlay.node');
  if (!existsSync(file)) throw new Error(`the runtime's mount addon was not found at '${file}'; run the runtime build`);
  return (native = createRequire(import.meta.url)(file) as MountNative);
}

/** Mount points currently mounted, from /proc/self/mountinfo. */
export function mountPoints(): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    // Octal escapes (\040 for a space) are how mountinfo writes special characters.
    if (fields[4]) out.add(fields[4].replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))));
  }
  return out;
}

export function isMounted(path: string): boolean {
  return mountPoints().has(path);
}

/** The most lower layers overlayfs stacks (its OVL_MAX_STACK). */
export const MAX_OVERLAY_LOWERS = 500;

/**
 * Mounts an overlay: `lowers` top-most first, all read-only.
 *
 * mount(2) takes its options in one page, which about forty absolute layer
 * paths fill. The lowers are named instead by short relative links made in
 * `linkDir` (`l/0`, `l/1`, ...: host-only, as the caller's directory is),
 * resolved from there by the kernel when it mounts; then hundreds fit.
 * `volatile`: the overlay never syncs its upper's filesystem, not even at
 * its unmount.
 */
export async function mountOverlay(target: string, lowers: string[], upper: string, work: string, linkDir: string, { volatile = false }: { volatile?: boolean } = {}): Promise<void> {
  if (isMounted(target)) return;
  if (lowers.length > MAX_OVERLAY_LOWERS) throw new Error(`an overlay stacks at most ${MAX_OVERLAY_LOWERS} layers; this one has ${lowers.length}`);
  for (const p of [...lowers, upper, work]) {
    if (p.includes(',') || p.includes(':')) throw new Error(`overlay layer path '${p}' may not contain ',' or ':'`);
  }
  const links = join(linkDir, 'l');
  rmSync(links, { recursive: true, force: true });
  mkdirSync(links, { mode: 0o700 });
  lowers.forEach((lower, i) => symlinkSync(lower, join(links, String(i))));
  const named = lowers.map((_, i) => `l/${i}`).join(':');
  mountNative().mountOverlay(linkDir, target, `lowerdir=${named},upperdir=${upper},workdir=${work}${volatile ? ',volatile' : ''}`);
}

/**
 * Deletes a directory tree, refusing when anything is mounted inside it: a
 * recursive delete would walk into the mount (a sandbox's root filesystem,
 * a disk) instead of stopping at it.
 *
 * A container being created at the same moment briefly holds copies of all
 * mounts in its new mount namespace (until runc detaches the old root), and
 * an unmounted directory stays busy until then: EBUSY is retried for a while.
 */
export async function removeTree(dir: string): Promise<void> {
  const inside = [...mountPoints()].filter((m) => m === dir || m.startsWith(dir + '/'));
  if (inside.length) throw new Error(`refusing to delete '${dir}': ${inside.join(', ')} still mounted`);
  for (let attempt = 0; ; attempt++) {
    try {
      // Not rmSync: a sandbox may hold many files, and the server must not
      // stop answering while they go.
      await rm(dir, { recursive: true, force: true });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || attempt >= 100) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Unmounts `target` if mounted; lazily when something still holds it. */
export async function unmount(target: string): Promise<void> {
  if (!isMounted(target)) return;
  try {
    await mountNative().unmount(target, false);
  } catch {
    await mountNative().unmount(target, true);
  }
}
