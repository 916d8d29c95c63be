// Watches a directory (optionally its whole tree) with inotify and reports
// changes with the kinds clients expect: CREATE, WRITE, REMOVE, RENAME (for
// the old name of a moved entry; the new name is a CREATE) and CHMOD.
import { readdirSync } from 'node:fs';
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

function kindOf(mask: number): EventType | undefined {
  if (mask & IN.CREATE || mask & IN.MOVED_TO) return EventType.CREATE;
  if (mask & IN.DELETE) return EventType.REMOVE;
  if (mask & IN.MOVED_FROM) return EventType.RENAME;
  if (mask & IN.MODIFY) return EventType.WRITE;
  if (mask & IN.ATTRIB) return EventType.CHMOD;
  return undefined;
}

export class DirWatch {
  private readonly dirs = new Map<string, { wd: number; reg: Registration }>();
  private closed = false;

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
      if (announce) this.emit(child, EventType.CREATE);
      if (e.isDirectory() && this.addDir(child)) this.addSubtree(child, announce);
    }
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
