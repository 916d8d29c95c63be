// Watches a directory (optionally its whole tree) with inotify and reports
// changes with the kinds clients expect: CREATE, WRITE, REMOVE, RENAME (for
// the old name of a moved entry; the new name is a CREATE) and CHMOD.
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { EventType } from '@paddock/models';
import { IN, native, type InotifyEvent, type InotifyHandle } from './native.js';

const WATCH_MASK =
  IN.CREATE |
  IN.MODIFY |
  IN.DELETE |
  IN.MOVED_FROM |
  IN.MOVED_TO |
  IN.ATTRIB |
  IN.DELETE_SELF |
  IN.MOVE_SELF |
  IN.ONLYDIR |
  IN.DONT_FOLLOW |
  IN.EXCL_UNLINK;

export interface WatchEvent {
  /** Path relative to the watched directory. */
  name: string;
  type: EventType;
  /** Absolute path. */
  path: string;
}

interface Registration {
  watch: DirWatch;
  /** Directory relative to the watch's root; '' is the root itself. */
  dir: string;
}

/**
 * One inotify instance for the whole daemon: the kernel limits instances per
 * user, and every sandbox's envd runs as root. Watches on the same directory
 * share a watch descriptor, so registrations are counted per descriptor.
 */
class Inotify {
  private handle: InotifyHandle | undefined;
  private readonly byWd = new Map<number, Set<Registration>>();

  add(path: string, reg: Registration): number {
    this.handle ??= native.inotifyOpen((events) => this.dispatch(events));
    const wd = native.inotifyAddWatch(this.handle, path, WATCH_MASK);
    let regs = this.byWd.get(wd);
    if (!regs) this.byWd.set(wd, (regs = new Set()));
    regs.add(reg);
    return wd;
  }

  remove(wd: number, reg: Registration): void {
    const regs = this.byWd.get(wd);
    if (!regs) return;
    regs.delete(reg);
    if (regs.size === 0) {
      this.byWd.delete(wd);
      if (this.handle) native.inotifyRemoveWatch(this.handle, wd);
    }
    this.releaseIfIdle();
  }

  /** Hands the watches what the kernel has queued by now, without waiting for the event loop's next poll. */
  drain(): void {
    if (this.handle) this.dispatch(native.inotifyDrain(this.handle));
  }

  private dispatch(events: InotifyEvent[]): void {
    for (const ev of events) {
      const regs = this.byWd.get(ev.wd);
      if (!regs) continue;
      if (ev.mask & IN.IGNORED) this.byWd.delete(ev.wd);
      for (const reg of [...regs]) reg.watch.handle(reg, ev);
    }
    this.releaseIfIdle();
  }

  /** With nothing watched, the descriptor is closed so that it does not keep the process alive. */
  private releaseIfIdle(): void {
    if (this.byWd.size === 0 && this.handle) {
      native.inotifyClose(this.handle);
      this.handle = undefined;
    }
  }
}

const inotify = new Inotify();

/**
 * Takes in every event the kernel has queued for the watches: called before
 * a caller is told what happened, so that what was done before it asked
 * (a write that returned) is in the answer.
 */
export function takeQueuedEvents(): void {
  inotify.drain();
}

function kindOf(mask: number): EventType | undefined {
  if (mask & IN.CREATE || mask & IN.MOVED_TO) return EventType.CREATE;
  if (mask & IN.DELETE) return EventType.REMOVE;
  if (mask & IN.MOVED_FROM) return EventType.RENAME;
  if (mask & IN.MODIFY) return EventType.WRITE;
  if (mask & IN.ATTRIB) return EventType.CHMOD;
  return undefined;
}

/** How long the files a new directory's scan announced are remembered, to tell inotify's queued events for them from later ones. */
const ANNOUNCED_MS = 1000;

export class DirWatch {
  private readonly dirs = new Map<string, { wd: number; reg: Registration }>();
  private closed = false;
  /**
   * Files in a directory that appeared under a recursive watch, as its scan
   * saw them: what happened to them before the directory's own watch was
   * added is announced by the scan, and the events inotify queued for them
   * between that watch and the scan are not told a second time.
   */
  private readonly announced = new Map<string, bigint>();
  private forget: NodeJS.Timeout | undefined;

  constructor(
    readonly root: string,
    private readonly recursive: boolean,
    private readonly onEvent: (ev: WatchEvent) => void,
    /** Called once when the watched directory itself goes away. */
    private readonly onGone: () => void,
  ) {}

  /** Starts watching; throws (ENOENT, ENOTDIR, ...) when the root cannot be watched. */
  start(): void {
    this.addDir('');
    if (this.recursive) this.addSubtree('', false);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.forget);
    this.announced.clear();
    for (const { wd, reg } of this.dirs.values()) inotify.remove(wd, reg);
    this.dirs.clear();
  }

  private addDir(rel: string): boolean {
    if (this.dirs.has(rel)) return true;
    const reg: Registration = { watch: this, dir: rel };
    try {
      this.dirs.set(rel, { wd: inotify.add(join(this.root, rel), reg), reg });
      return true;
    } catch (err) {
      if (rel === '') throw err;
      // A subdirectory that vanished or cannot be read is simply not watched.
      return false;
    }
  }

  /** Watches every directory under `rel`; with `announce`, reports what is already there as created. */
  private addSubtree(rel: string, announce: boolean): void {
    let entries;
    try {
      entries = readdirSync(join(this.root, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const child = rel ? join(rel, e.name) : e.name;
      if (announce) {
        this.emit(child, EventType.CREATE);
        // Written before its directory was watched: inotify will not say so.
        this.remember(child, e.isFile());
      }
      if (e.isDirectory() && this.addDir(child)) this.addSubtree(child, announce);
    }
  }

  /** Notes an entry the scan announced; a file that has content gets its WRITE too. */
  private remember(rel: string, file: boolean): void {
    let mark: bigint;
    let size: bigint;
    try {
      const st = lstatSync(join(this.root, rel), { bigint: true });
      mark = st.mtimeNs ^ (st.size << 64n);
      size = st.size;
    } catch {
      return;
    }
    if (file && size > 0n) this.emit(rel, EventType.WRITE);
    this.announced.set(rel, mark);
    clearTimeout(this.forget);
    this.forget = setTimeout(() => this.announced.clear(), ANNOUNCED_MS);
    this.forget.unref();
  }

  /** Whether an inotify event repeats what a scan announced: the file's CREATE, or a write it already held. */
  private repeats(rel: string, type: EventType): boolean {
    const mark = this.announced.get(rel);
    if (mark === undefined) return false;
    if (type === EventType.CREATE) return true;
    if (type !== EventType.WRITE) {
      this.announced.delete(rel);
      return false;
    }
    try {
      const st = lstatSync(join(this.root, rel), { bigint: true });
      if ((st.mtimeNs ^ (st.size << 64n)) === mark) return true;
    } catch {
      // Gone: its removal comes next.
    }
    // Written since the scan: from now on every write is news.
    this.announced.delete(rel);
    return false;
  }

  private removeSubtree(rel: string): void {
    for (const [dir, { wd, reg }] of [...this.dirs]) {
      if (dir === rel || dir.startsWith(rel + '/')) {
        inotify.remove(wd, reg);
        this.dirs.delete(dir);
      }
    }
  }

  private emit(name: string, type: EventType): void {
    this.onEvent({ name, type, path: join(this.root, name) });
  }

  /** Called by the shared inotify instance for events of this watch's directories. */
  handle(reg: Registration, ev: InotifyEvent): void {
    if (this.closed) return;
    if (ev.mask & IN.IGNORED) {
      this.dirs.delete(reg.dir);
      if (reg.dir === '') this.gone();
      return;
    }
    if (!ev.name) {
      // The directory itself was deleted or moved: its parent reports that,
      // unless it is the root, which ends the watch.
      if (reg.dir === '' && ev.mask & (IN.DELETE_SELF | IN.MOVE_SELF | IN.UNMOUNT)) this.gone();
      return;
    }
    const type = kindOf(ev.mask);
    if (type === undefined) return;
    const rel = reg.dir ? join(reg.dir, ev.name) : ev.name;
    if (this.announced.size > 0 && this.repeats(rel, type)) return;
    this.emit(rel, type);
    if (this.recursive && ev.mask & IN.ISDIR) {
      if (ev.mask & IN.CREATE) {
        if (this.addDir(rel)) this.addSubtree(rel, true);
      } else if (ev.mask & IN.MOVED_TO) {
        if (this.addDir(rel)) this.addSubtree(rel, false);
      } else if (ev.mask & (IN.MOVED_FROM | IN.DELETE)) {
        this.removeSubtree(rel);
      }
    }
  }

  private gone(): void {
    this.close();
    this.onGone();
  }
}
