// The few Linux system calls envd needs that Node.js does not offer, from
// native/envd_native.c. The addon sits next to the bundle in dist/, or in
// build/Release when running from source.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

export interface InotifyEvent {
  wd: number;
  mask: number;
  cookie: number;
  name: string;
}

declare const inotifyHandle: unique symbol;
export type InotifyHandle = { readonly [inotifyHandle]: true };

export interface EnvdNative {
  inotifyOpen(onEvents: (events: InotifyEvent[]) => void): InotifyHandle;
  inotifyAddWatch(handle: InotifyHandle, path: string, mask: number): number;
  /** The events queued on the descriptor now, read at once (not through the callback). */
  inotifyDrain(handle: InotifyHandle): InotifyEvent[];
  inotifyRemoveWatch(handle: InotifyHandle, wd: number): void;
  inotifyClose(handle: InotifyHandle): void;
  /** Attributes whose name starts with `prefix`, keyed by the rest of the name. */
  getXattrs(path: string, prefix: string): Record<string, string>;
  setXattr(path: string, name: string, value: string): void;
  removeXattr(path: string, name: string): void;
  /**
   * Starts `argv` from the first of `candidates` that execs, in a session
   * of its own, as `uid`/`gid`, in `cwd`, with `oomScoreAdj` (-1000..1000)
   * as its OOM score adjustment unless null. Gives the pid and envd's ends
   * of its stdio (stdin -1 when `withStdin` is false). Throws an errno error.
   */
  spawn(
    candidates: string[],
    argv: string[],
    envp: string[],
    cwd: string,
    uid: number,
    gid: number,
    withStdin: boolean,
    oomScoreAdj: number | null,
  ): [pid: number, stdin: number, stdout: number, stderr: number];
  /** Collects child `pid` if it ended: [exit code or -1, signal number or 0]; null while it runs. */
  waitStatus(pid: number): [code: number, signal: number] | null;
  /** Marks inherited descriptor `fd` close-on-exec. Throws an errno error (EBADF). */
  closeOnExec(fd: number): void;
}

function load(): EnvdNative {
  const candidates = [
    join(import.meta.dirname, 'envd_native.node'),
    join(import.meta.dirname, '../build/Release/envd_native.node'),
  ];
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new Error(`envd native addon not found (looked in ${candidates.join(', ')}); run the envd build`);
  }
  return createRequire(import.meta.url)(found) as EnvdNative;
}

export const native: EnvdNative = load();

// inotify(7) event bits.
export const IN = {
  MODIFY: 0x2,
  ATTRIB: 0x4,
  CLOSE_WRITE: 0x8,
  MOVED_FROM: 0x40,
  MOVED_TO: 0x80,
  CREATE: 0x100,
  DELETE: 0x200,
  DELETE_SELF: 0x400,
  MOVE_SELF: 0x800,
  UNMOUNT: 0x2000,
  Q_OVERFLOW: 0x4000,
  IGNORED: 0x8000,
  ONLYDIR: 0x1000000,
  DONT_FOLLOW: 0x2000000,
  EXCL_UNLINK: 0x4000000,
  ISDIR: 0x40000000,
} as const;
