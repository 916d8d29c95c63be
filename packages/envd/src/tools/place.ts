// Putting files where a build step wants them, with the owner and mode the
// step asks for. Inside the tree being placed nothing is ever followed: a
// symlink is a thing to place, not a way somewhere else. At the destination,
// a directory that is there (or a symlink to one, like /lib on a merged-/usr
// image) is merged into; anything else in the way is replaced, never
// written through. Every path is the image's, reached through an
// ImageRoot (the container's own `/`, or an image's layers on the host).
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
import type { ImageRoot } from './image-root.js';

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
/** The image's `path` itself (a symlink as a symlink), or nothing. */
export const lstatOrNone = (root: ImageRoot, path: string) => statOrNone(lstatSync, root.at(path));
/** What the image's `path` leads to, its symlinks followed within the image, or nothing. */
export const followedOrNone = (root: ImageRoot, path: string) => statOrNone(statSync, root.at(path, true));

/**
 * Gives `path` (of the kind `st` says) its owner and mode. The mode comes
 * after the owner, because a change of owner clears set-user-ID and
 * set-group-ID bits; a symlink's own mode means nothing and its target is
 * not touched.
 */
function own(root: ImageRoot, path: string, st: Stats, { uid, gid, mode }: Ownership): void {
  const at = root.at(path);
  lchownSync(at, root.id(uid), root.id(gid));
  if (!st.isSymbolicLink()) chmodSync(at, mode ?? st.mode & 0o7777);
}

/** Gives `path` and everything under it `ownership`, in place. */
export function ownTree(root: ImageRoot, path: string, ownership: Ownership): void {
  const st = lstatSync(root.at(path));
  own(root, path, st, ownership);
  if (st.isDirectory()) for (const name of readdirSync(root.at(path))) ownTree(root, join(path, name), ownership);
}

/**
 * Makes `dir` a directory, creating what is missing of it and its parents
 * with mode 0755 and the given owner. What is there already is left as it
 * is.
 */
export function makeDirs(root: ImageRoot, dir: string, { uid, gid }: Ownership): void {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const st = followedOrNone(root, d);
    if (st?.isDirectory()) break;
    if (st || lstatOrNone(root, d)) throw new Error(`'${d}' is in the way of a directory`);
    missing.push(d);
  }
  for (const d of missing.reverse()) {
    const at = root.at(d);
    mkdirSync(at, 0o755);
    chmodSync(at, 0o755);
    lchownSync(at, root.id(uid), root.id(gid));
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

function placeLeaf(root: ImageRoot, from: string, st: Stats, to: string, opts: PlaceOptions): void {
  if (lstatOrNone(root, to)?.isDirectory()) throw new Error(`'${to}' is a directory; a file cannot replace it`);
  if (opts.move && renamed(root.at(from), root.at(to))) return;
  const tmp = besideOf(to);
  const tmpAt = root.at(tmp);
  try {
    if (st.isSymbolicLink()) symlinkSync(readlinkSync(root.at(from)), tmpAt);
    else if (st.isFile()) copyFileSync(root.at(from), tmpAt, fsc.COPYFILE_EXCL);
    else throw new Error(`'${from}' is not a file, directory or symlink`);
    own(root, tmp, st, opts);
    lutimesSync(tmpAt, st.atime, st.mtime);
    renameSync(tmpAt, root.at(to));
  } catch (err) {
    rmSync(tmpAt, { force: true });
    throw err;
  }
}

function placeDir(root: ImageRoot, from: string, st: Stats, to: string, opts: PlaceOptions): void {
  if (followedOrNone(root, to)?.isDirectory()) {
    for (const name of readdirSync(root.at(from))) place(root, join(from, name), join(to, name), opts);
    return;
  }
  if (lstatOrNone(root, to)) unlinkSync(root.at(to));
  if (opts.move && renamed(root.at(from), root.at(to))) return;
  mkdirSync(root.at(to), 0o700);
  for (const name of readdirSync(root.at(from))) place(root, join(from, name), join(to, name), opts);
  own(root, to, st, opts);
  lutimesSync(root.at(to), st.atime, st.mtime);
}

/**
 * Puts the file, symlink or directory `from` at `to`, whose parent exists.
 * A directory is merged into what is at `to`; existing directories keep
 * their owner and mode, what the placing creates gets `opts`' (a moved
 * source must have been given them already, with `ownTree`).
 */
export function place(root: ImageRoot, from: string, to: string, opts: PlaceOptions): void {
  const st = lstatSync(root.at(from));
  if (st.isDirectory()) placeDir(root, from, st, to, opts);
  else placeLeaf(root, from, st, to, opts);
}
