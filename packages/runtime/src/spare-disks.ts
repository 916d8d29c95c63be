// Sandbox disks made ahead: a few formatted, mounted disks kept ready, so
// that a cold create does not wait for mkfs.ext4 and mount(8) (two process
// starts, ~50 ms on a small host, most of what a create spends before runc).
//
// Each spare is a directory laid out as a sandbox's own directory is before
// its first start: `disk.img`, `disk/` (mounted, with `upper/` owned by the
// sandboxes' root and `work/`) and an empty `rootfs/`. A create takes one by
// renaming the whole directory to the sandbox's: the mount moves with it (a
// rename may move a directory that holds a mount point), and it is atomic, so
// a crash leaves each disk either a spare or part of a sandbox's directory,
// which the runtime's recovery removes like any other.
//
// Spares live under `<dataDir>/spare-disks/<pid>.<start time>.<instance>/`. A runtime
// removes its own when it closes; at start it removes those of processes
// that are gone and of runtimes of this process that closed: what a crash
// left, mounted, half made or with a loop device still attached.
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { createDisk, diskPaths, loopDevicesUnder, mountDisk } from './disk.js';
import { run } from './exec.js';
import { warningsOnly, type RuntimeLog } from './log.js';
import { mountPoints, removeTree, unmount } from './mounts.js';
import { processStart } from './runc.js';

/** Spare-disk directories of runtimes in this process that have not closed. */
const liveInThisProcess = new Set<string>();

/** A spare the pool made: its directory and the size of its disk. */
interface Spare {
  dir: string;
  sizeMB: number;
}

export interface SpareDisksOptions {
  /** `<dataDir>/spare-disks`. */
  dir: string;
  /** Spares kept ready; 0 keeps none. */
  count: number;
  /** Host id that the sandboxes' root is (the owner of each disk's upper directory). */
  rootId: number;
  /** Whether the host is free for background work now (no create is booting). */
  idle: () => boolean;
  /** How long after a take (or a busy moment) the pool waits before it makes the next spare. */
  refillDelayMs?: number;
  log?: RuntimeLog;
}

/** After a failed refill, the pool waits this long before it tries again. */
const RETRY_AFTER_FAILURE_MS = 5_000;

export class SpareDisks {
  /** This instance's own directory under `dir`. */
  readonly ownDir: string;
  private readonly ready: Spare[] = [];
  /** The size the last create asked for: what the refill makes. */
  private wantedMB: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private filling: Promise<void> | undefined;
  private closed = false;
  private made = 0;
  private failedLast = false;
  private readonly log: RuntimeLog;

  constructor(private readonly opts: SpareDisksOptions) {
    this.ownDir = join(opts.dir, `${process.pid}.${processStart(process.pid)}.${randomBytes(4).toString('hex')}`);
    this.log = opts.log ?? warningsOnly;
  }

  /**
   * Removes what earlier runtimes left under `dir`: the spares of processes
   * that are gone and of this process's runtimes that closed (each
   * unmounted, its loop device detached, its directory deleted).
   */
  async removeStale(): Promise<void> {
    if (!existsSync(this.opts.dir)) return;
    for (const name of readdirSync(this.opts.dir)) {
      const dir = join(this.opts.dir, name);
      // A process is known by its pid and start time, so that one given a dead owner's pid is not taken for it.
      const [pid, started] = name.split('.');
      const alive = Number(pid) === process.pid ? liveInThisProcess.has(dir) : started !== undefined && processStart(Number(pid)) === started;
      if (!alive) await removeSpareDir(dir);
    }
  }

  /** Starts keeping `count` spares of `sizeMB` (until a create asks for another size). */
  start(sizeMB: number): void {
    if (this.opts.count <= 0 || this.closed) return;
    liveInThisProcess.add(this.ownDir);
    this.wantedMB ??= sizeMB;
    this.schedule(0);
  }

  /**
   * Moves a ready spare of `sizeMB` to `target` (a path that does not exist
   * yet), which then holds the sandbox's disk, mounted, and its empty
   * `rootfs/`. False when there is none; the pool refills in the background
   * either way, with disks of this size.
   */
  take(sizeMB: number, target: string): boolean {
    if (this.opts.count <= 0 || this.closed) return false;
    this.wantedMB = sizeMB;
    this.schedule(this.opts.refillDelayMs ?? 0);
    for (;;) {
      const i = this.ready.findIndex((s) => s.sizeMB === sizeMB);
      if (i < 0) return false;
      const [spare] = this.ready.splice(i, 1);
      try {
        renameSync(spare!.dir, target);
        return true;
      } catch (err) {
        // Removed under it (by hand, or by a runtime that took this one for a crashed one's): the next, or a new disk.
        this.log.warn({ err, spare: spare!.dir }, 'a spare disk could not be taken');
      }
    }
  }

  /** Spares ready now, for tests. */
  count(): number {
    return this.ready.length;
  }

  /** Resolves once the pool holds its count of spares, or a refill failed, the host got busy or the pool closed. */
  async full(): Promise<void> {
    while (!this.closed && this.short() && this.opts.idle()) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.fill();
      await this.filling;
      if (this.failedLast) return;
    }
  }

  /** Stops refilling and removes this runtime's spares. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.filling;
    this.ready.length = 0;
    await removeSpareDir(this.ownDir);
    liveInThisProcess.delete(this.ownDir);
  }

  private schedule(delayMs: number): void {
    if (this.timer || this.filling || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fill();
    }, delayMs);
    this.timer.unref();
  }

  /** Whether fewer spares than the count are of the size asked for last. */
  private short(): boolean {
    return this.wantedMB !== undefined && this.ready.filter((s) => s.sizeMB === this.wantedMB).length < this.opts.count;
  }

  /** Makes spares one at a time while the pool is short and the host idle. */
  private fill(): void {
    if (this.filling || this.closed) return;
    const work = async () => {
      while (!this.closed && this.opts.idle() && this.short()) {
        const wanted = this.wantedMB!;
        if (this.ready.length >= this.opts.count) {
          // Full: a disk of a size nobody asks for any more makes room for one that is asked for.
          const [old] = this.ready.splice(this.ready.findIndex((s) => s.sizeMB !== wanted), 1);
          await removeSpareDir(old!.dir);
        }
        this.ready.push(await this.make(wanted));
      }
    };
    this.failedLast = false;
    this.filling = work()
      .catch((err: unknown) => {
        this.failedLast = true;
        this.log.warn({ err }, 'a spare disk could not be made');
      })
      .finally(() => {
        this.filling = undefined;
        if (this.closed) return;
        if (this.failedLast) this.schedule(RETRY_AFTER_FAILURE_MS);
        else if (this.short()) this.schedule(this.opts.refillDelayMs ?? 0);
      });
  }

  private async make(sizeMB: number): Promise<Spare> {
    const dir = join(this.ownDir, String(this.made++));
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      mkdirSync(join(dir, 'rootfs'), { mode: 0o700 });
      const disk = diskPaths(dir);
      await createDisk(disk, sizeMB);
      await mountDisk(disk);
      // The overlay's top directory becomes the sandbox's `/`, owned by its root.
      chownSync(disk.upper, this.opts.rootId, this.opts.rootId);
      chmodSync(disk.upper, 0o755);
      return { dir, sizeMB };
    } catch (err) {
      await removeSpareDir(dir).catch(() => undefined);
      throw err;
    }
  }
}

/** Unmounts everything under `dir`, detaches loop devices of files in it, and deletes it. */
async function removeSpareDir(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  const mounts = [...mountPoints()].filter((m) => m === dir || m.startsWith(dir + '/'));
  // Deepest first.
  for (const m of mounts.sort((a, b) => b.length - a.length)) await unmount(m);
  // A disk attached to a loop device by a mount(8) that died before it mounted.
  for (const loop of loopDevicesUnder(dir)) await run('losetup', ['-d', loop.split(' ')[0]!]).catch(() => undefined);
  await removeTree(dir);
}
