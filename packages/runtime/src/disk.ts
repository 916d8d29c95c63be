// A sandbox's disk: a sparse file holding an ext4 filesystem of the
// sandbox's `diskSizeMB`, loop-mounted on the host, with the sandbox's
// overlay upper and work directories inside it. Whatever a sandbox writes
// lands there, so it cannot write more than its size (ENOSPC inside), the
// host's free space drops by at most that much, and `df /` in the sandbox
// shows its own size (overlayfs reports the upper's filesystem).
//
// A file rather than a quota on the host's filesystem: project quotas need
// that filesystem mounted with them (ext4 and XFS both), which Paddock
// cannot assume of a host's `/`. Made with mkfs.ext4 (e2fsprogs, on every
// Debian and Ubuntu) and mounted with mount(8); a cold create takes one made
// ahead (spare-disks.ts), and the warm pool makes its own before anyone
// waits.
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, statfsSync, truncateSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { run } from './exec.js';
import { isMounted } from './mounts.js';

/** The smallest disk a sandbox may have: ext4 with a journal needs a few MiB, and a shell more. */
export const MIN_DISK_MB = 64;

export interface DiskPaths {
  /** The sparse file with the filesystem. */
  image: string;
  /** Where it is mounted on the host. */
  mountPoint: string;
  /** The sandbox's overlay upper and work directories, inside the mount. */
  upper: string;
  work: string;
}

export function diskPaths(sandboxDir: string): DiskPaths {
  const mountPoint = join(sandboxDir, 'disk');
  return { image: join(sandboxDir, 'disk.img'), mountPoint, upper: join(mountPoint, 'upper'), work: join(mountPoint, 'work') };
}

/**
 * Makes the disk's file: `sizeMB` MiB, sparse (it takes space only as the
 * sandbox writes), formatted as ext4 with no blocks reserved for root (the
 * sandbox's root is the only user) and its inode tables and journal
 * initialised lazily, so that formatting writes ~1 MiB whatever the size.
 */
export async function createDisk(paths: DiskPaths, sizeMB: number): Promise<void> {
  writeFileSync(paths.image, '');
  truncateSync(paths.image, sizeMB * 1024 * 1024);
  await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1,nodiscard', paths.image]);
}

/**
 * Mounts the disk (if it is not) and makes sure the upper and work
 * directories exist. The mount point and the filesystem's top directory are
 * the host's: a sandbox sees only what is inside `upper`.
 */
export async function mountDisk(paths: DiskPaths): Promise<void> {
  mkdirSync(paths.mountPoint, { recursive: true, mode: 0o700 });
  if (!isMounted(paths.mountPoint)) await run('mount', ['-t', 'ext4', '-o', 'loop,noatime', paths.image, paths.mountPoint]);
  // The upper directory's own mode becomes the sandbox's `/`.
  mkdirSync(paths.upper, { recursive: true, mode: 0o755 });
  mkdirSync(paths.work, { recursive: true, mode: 0o700 });
}

/** What the disk holds and can hold, in bytes: from the mounted filesystem, or the file's allocated blocks when not mounted. */
export function diskUsage(paths: DiskPaths, sizeMB: number): { used: number; total: number } {
  if (isMounted(paths.mountPoint)) {
    const fs = statfsSync(paths.mountPoint);
    return { used: (fs.blocks - fs.bfree) * fs.bsize, total: fs.blocks * fs.bsize };
  }
  let used = 0;
  try {
    used = statSync(paths.image).blocks * 512;
  } catch {
    // no disk yet
  }
  return { used, total: sizeMB * 1024 * 1024 };
}

/**
 * Loop devices whose file is under `dir` (from /sys/block/loop*), for leak
 * checks: a disk left attached to a loop device after its mount went.
 */
export function loopDevicesUnder(dir: string): string[] {
  const out: string[] = [];
  const root = resolve(dir) + '/';
  let names: string[];
  try {
    names = readdirSync('/sys/block').filter((n) => n.startsWith('loop'));
  } catch {
    return out;
  }
  for (const name of names) {
    const file = join('/sys/block', name, 'loop', 'backing_file');
    if (!existsSync(file)) continue;
    const backing = readFileSync(file, 'utf8').trim().replace(/ \(deleted\)$/, '');
    if (backing.startsWith(root)) out.push(`/dev/${name} (${backing})`);
  }
  return out;
}
