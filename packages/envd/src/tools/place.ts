// Putting files where a build step wants them, with the owner and mode the
// step asks for. Inside the tree being placed nothing is ever followed: a
// symlink is a thing to place, not a way somewhere else. At the destination,
// a directory that is there (or a symlink to one, like /lib on a merged-/usr
// image) is merged into; anything else in the way is replaced, never
// written through.
import {
  chmodSync,
  constants as fsc,
  copyFileSync,
  lchownSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';

export interface Ownership {
  uid: number;
  gid: number;
  /** The permission bits of every file and directory; without it, each keeps its own. */
  mode?: number;
}

export interface PlaceOptions extends Ownership {
  /**
   * The source may be taken apart: renamed into place where it can be,
   * copied where rename cannot (another filesystem). Without it, the source
   * is only read.
   */
  move: boolean;
}

/** What `stat` says of `path`, or nothing when there is nothing there. */
function statOrNone(stat: typeof statSync, path: string): Stats | undefined {
  try {
    return stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw err;
  }
}
export const lstatOrNone = (path: string) => statOrNone(lstatSync, path);
export const followedOrNone = (path: string) => statOrNone(statSync, path);

/**
 * Gives `path` (of the kind `st` says) its owner and mode. The mode comes
 * after the owner, because a change of owner clears set-user-ID and
 * set-group-ID bits; a symlink's own mode means nothing and its target is
 * not touched.
 */
function own(path: string, st: Stats, { uid, gid, mode }: Ownership): void {
  lchownSync(path, uid, gid);
  if (!st.isSymbolicLink()) chmodSync(path, mode ?? st.mode & 0o7777);
}

/** Gives `path` and everything under it `ownership`, in place. */
export function ownTree(path: string, ownership: Ownership): void {
  const st = lstatSync(path);
  own(path, st, ownership);
  if (st.isDirectory()) for (const name of readdirSync(path)) ownTree(join(path, name), ownership);
}

/**
 * Makes `dir` a directory, creating what is missing of it and its parents
 * with mode 0755 and the given owner. What is there already is left as it
 * is.
 */
export function makeDirs(dir: string, { uid, gid }: Ownership): void {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const st = followedOrNone(d);
    if (st?.isDirectory()) break;
    if (st || lstatOrNone(d)) throw new Error(`'${d}' is in the way of a directory`);
    missing.push(d);
  }
  for (const d of missing.reverse()) {
    mkdirSync(d, 0o755);
    chmodSync(d, 0o755);
    lchownSync(d, uid, gid);
  }
}

/** Renames `from` to `to`; false when they are on different filesystems and the caller must copy. */
function renamed(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EXDEV') return false;
    throw err;
  }
}

/** A name beside `path` for what replaces it, so that the replacement appears at once. */
const besideOf = (path: string) => join(dirname(path), `.${basename(path)}.paddock-${process.pid}`);

function placeLeaf(from: string, st: Stats, to: string, opts: PlaceOptions): void {
  if (lstatOrNone(to)?.isDirectory()) throw new Error(`'${to}' is a directory; a file cannot replace it`);
  if (opts.move && renamed(from, to)) return;
  const tmp = besideOf(to);
  try {
    if (st.isSymbolicLink()) symlinkSync(readlinkSync(from), tmp);
    else if (st.isFile()) copyFileSync(from, tmp, fsc.COPYFILE_EXCL);
    else throw new Error(`'${from}' is not a file, directory or symlink`);
    own(tmp, st, opts);
    lutimesSync(tmp, st.atime, st.mtime);
    renameSync(tmp, to);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

function placeDir(from: string, st: Stats, to: string, opts: PlaceOptions): void {
  if (followedOrNone(to)?.isDirectory()) {
    for (const name of readdirSync(from)) place(join(from, name), join(to, name), opts);
    return;
  }
  if (lstatOrNone(to)) unlinkSync(to);
  if (opts.move && renamed(from, to)) return;
  mkdirSync(to, 0o700);
  for (const name of readdirSync(from)) place(join(from, name), join(to, name), opts);
  own(to, st, opts);
  lutimesSync(to, st.atime, st.mtime);
}

/**
 * Puts the file, symlink or directory `from` at `to`, whose parent exists.
 * A directory is merged into what is at `to`; existing directories keep
 * their owner and mode, what the placing creates gets `opts`' (a moved
 * source must have been given them already, with `ownTree`).
 */
export function place(from: string, to: string, opts: PlaceOptions): void {
  const st = lstatSync(from);
  if (st.isDirectory()) placeDir(from, st, to, opts);
  else placeLeaf(from, st, to, opts);
}
