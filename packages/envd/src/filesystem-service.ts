// The filesystem.Filesystem Connect service.
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { lstatSync, readdirSync, renameSync, statfsSync, statSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import {
  FileType,
  type Filesystem,
  FilesystemEventSchema,
  WatchDirResponseSchema,
  type EntryInfo,
  type FilesystemEvent,
  type WatchDirResponse,
} from '@paddock/models';
import { basicAuthUser } from './auth.js';
import { entryInfo } from './entry-info.js';
import { fsConnectError } from './errors.js';
import { EventQueue, untilAborted } from './event-queue.js';
import { makeDirs, removeTree } from './fs-ops.js';
import { keepaliveIntervalMs } from './headers.js';
import { resolveUserPath } from './paths.js';
import type { EnvdState } from './state.js';
import type { User } from './users.js';
import { DirWatch, takeQueuedEvents, type WatchEvent } from './watch.js';

/** Events a polled watcher keeps before dropping the oldest. */
const MAX_PENDING_WATCHER_EVENTS = 10_000;

// statfs(2) magic numbers of network filesystems.
const NETWORK_FS = new Set([0x6969 /* nfs */, 0xff534d42 /* cifs */, 0xfe534d42 /* smb2 */, 0x517b /* smb */, 0x65735546 /* fuse */]);

interface WatchSpec {
  path: string;
  recursive: boolean;
  includeEntry: boolean;
  allowNetworkMounts: boolean;
}

export function filesystemService(state: EnvdState): ServiceImpl<typeof Filesystem> {
  const watchers = new Map<string, { watch: DirWatch; events: FilesystemEvent[] }>();

  const actingUser = (ctx: HandlerContext): User => state.rpcUser(basicAuthUser(ctx.requestHeader.get('authorization')));

  function resolved(path: string, user: User): string {
    return resolveUserPath(path, user);
  }

  function describe(path: string): EntryInfo {
    try {
      return entryInfo(path, state.users.names());
    } catch (err) {
      throw fsConnectError(err, path);
    }
  }

  function toEvent(ev: WatchEvent, includeEntry: boolean): FilesystemEvent {
    let entry: EntryInfo | undefined;
    if (includeEntry) {
      try {
        entry = entryInfo(ev.path, state.users.names());
      } catch {
        entry = undefined; // gone already (a remove or the old name of a rename)
      }
    }
    return create(FilesystemEventSchema, { name: ev.name, type: ev.type, entry });
  }

  /** Checks the directory to watch and starts watching it. */
  function startWatch(spec: WatchSpec, user: User, onEvent: (ev: WatchEvent) => void, onGone: () => void): DirWatch {
    const dir = resolved(spec.path, user);
    requireDirectory(dir);
    if (!spec.allowNetworkMounts && NETWORK_FS.has(Number(statfsSync(dir).type))) {
      throw new ConnectError(`path '${dir}' is on a network filesystem; set allow_network_mounts to watch it`, Code.FailedPrecondition);
    }
    const watch = new DirWatch(dir, spec.recursive, onEvent, onGone);
    try {
      watch.start();
    } catch (err) {
      throw fsConnectError(err, dir);
    }
    return watch;
  }

  return {
    stat(req, ctx) {
      const path = resolved(req.path, actingUser(ctx));
      return { entry: describe(path) };
    },

    makeDir(req, ctx) {
      const user = actingUser(ctx);
      const path = resolved(req.path, user);
      let created: boolean;
      try {
        created = makeDirs(path, user);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOTDIR' && lstatSafe(path)) {
          throw new ConnectError(`path '${path}' exists and is not a directory`, Code.InvalidArgument);
        }
        throw fsConnectError(err, path);
      }
      if (!created) throw new ConnectError(`directory '${path}' already exists`, Code.AlreadyExists);
      return { entry: describe(path) };
    },

    move(req, ctx) {
      const user = actingUser(ctx);
      const source = resolved(req.source, user);
      const destination = resolved(req.destination, user);
      if (!lstatSafe(source)) throw new ConnectError(`path '${source}' does not exist`, Code.NotFound);
      try {
        makeDirs(dirname(destination), user);
        renameSync(source, destination);
      } catch (err) {
        throw fsConnectError(err, destination);
      }
      return { entry: describe(destination) };
    },

    listDir(req, ctx) {
      const path = resolved(req.path, actingUser(ctx));
      const depth = req.depth === 0 ? 1 : req.depth;
      requireDirectory(path);
      const entries: EntryInfo[] = [];
      const owners = state.users.names();
      const walk = (dir: string, level: number) => {
        let names: string[];
        try {
          names = readdirSync(dir).sort();
        } catch (err) {
          if (level === 1) throw fsConnectError(err, dir);
          return; // an unreadable subdirectory is listed but not entered
        }
        for (const name of names) {
          const child = join(dir, name);
          let info: EntryInfo;
          try {
            info = entryInfo(child, owners);
          } catch {
            continue; // removed while listing
          }
          entries.push(info);
          if (info.type === FileType.DIRECTORY && level < depth) walk(child, level + 1);
        }
      };
      walk(path, 1);
      return { entries };
    },

    remove(req, ctx) {
      const path = resolved(req.path, actingUser(ctx));
      if (path === '/') throw new ConnectError(`refusing to remove '/'`, Code.InvalidArgument);
      try {
        removeTree(path);
      } catch (err) {
        // Name what could not be removed, which may be deep inside `path`.
        const failed = (err as NodeJS.ErrnoException).path;
        throw fsConnectError(err, typeof failed === 'string' ? failed : path);
      }
      return {};
    },

    async *watchDir(req, ctx): AsyncIterable<WatchDirResponse> {
      const queue = new EventQueue<WatchDirResponse>();
      const watch = startWatch(
        req,
        actingUser(ctx),
        (ev) => queue.push(create(WatchDirResponseSchema, { event: { case: 'filesystem', value: toEvent(ev, req.includeEntry) } })),
        () => queue.close(),
      );
      queue.push(create(WatchDirResponseSchema, { event: { case: 'start', value: {} } }));
      queue.keepalive(keepaliveIntervalMs(ctx.requestHeader), () =>
        create(WatchDirResponseSchema, { event: { case: 'keepalive', value: {} } }),
      );
      try {
        yield* untilAborted(queue, ctx.signal, state.streams);
      } finally {
        watch.close();
      }
    },

    createWatcher(req, ctx) {
      const id = randomUUID();
      const events: FilesystemEvent[] = [];
      const watch = startWatch(
        req,
        actingUser(ctx),
        (ev) => {
          if (events.length >= MAX_PENDING_WATCHER_EVENTS) events.shift();
          events.push(toEvent(ev, req.includeEntry));
        },
        () => undefined, // kept until removed, so that its last events can still be read
      );
      watchers.set(id, { watch, events });
      return { watcherId: id };
    },

    getWatcherEvents(req) {
      const w = watchers.get(req.watcherId);
      if (!w) throw new ConnectError(`watcher '${req.watcherId}' does not exist`, Code.NotFound);
      takeQueuedEvents();
      return { events: w.events.splice(0, w.events.length) };
    },

    removeWatcher(req) {
      const w = watchers.get(req.watcherId);
      if (!w) throw new ConnectError(`watcher '${req.watcherId}' does not exist`, Code.NotFound);
      w.watch.close();
      watchers.delete(req.watcherId);
      return {};
    },
  };
}

/** Throws unless `path` is a directory (following links): what stat(2) refuses, or InvalidArgument for anything else. */
function requireDirectory(path: string): void {
  let st;
  try {
    st = statSync(path);
  } catch (err) {
    throw fsConnectError(err, path);
  }
  if (!st.isDirectory()) throw new ConnectError(`path '${path}' is not a directory`, Code.InvalidArgument);
}

function lstatSafe(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
