// Filesystem changes made on behalf of a user. envd runs as root: it does the
// work itself and gives what it creates to the acting user, so a user may
// write wherever the client asked, with missing parents created.
import { chownSync, closeSync, fchownSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, rmdirSync, statSync, unlinkSync, constants as fsc } from 'node:fs';
import { dirname, join } from 'node:path';
import { NotRegularFileError } from './errors.js';
import type { User } from './users.js';

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Creates `dir` and its missing parents, owned by `user`; returns whether
 * `dir` itself was created. Throws EEXIST/ENOTDIR-style errors as fs does.
 */
export function makeDirs(dir: string, user: User): boolean {
  const missing: string[] = [];
  let p = dir;
  while (!exists(p)) {
    missing.push(p);
    const parent = dirname(p);
    if (parent === p) break;
    p = parent;
  }
  if (missing.length === 0) {
    if (!statSync(dir).isDirectory()) {
      const err = new Error(`'${dir}' exists and is not a directory`) as NodeJS.ErrnoException;
      err.code = 'ENOTDIR';
      throw err;
    }
    return false;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d, { mode: 0o755 });
    } catch (err) {
      // Someone else made it between the check and now: fine for parents.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || d === dir) throw err;
      continue;
    }
    chownSync(d, user.uid, user.gid);
  }
  return true;
}

/**
 * Opens `path` for writing from the start, creating it (mode 0644, owned by
 * `user`) and its parents when missing. An existing file is written in place,
 * not replaced, so watchers see a write to the same file. It is not truncated
 * here: the writer cuts it to its new length when done (`ftruncate`).
 * Truncating first would free every block and cached page only to allocate
 * them again: ~1 ms for 1 MiB and ~30 ms for 64 MiB here, during which envd
 * answers nothing else.
 */
export function openForWrite(path: string, user: User): number {
  makeDirs(dirname(path), user);
  const created = !exists(path);
  // Non-blocking: a plain open of a FIFO waits for a reader, and envd,
  // which opens synchronously, would answer nothing else meanwhile. A
  // regular file is written as before; one under another process's lease
  // fails with EAGAIN instead of waiting for it.
  const fd = openSync(path, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_NONBLOCK, 0o644);
  try {
    if (!fstatSync(fd).isFile()) throw new NotRegularFileError(`'${path}' is not a regular file`);
    // A file that existed keeps its owner; a new one belongs to the user.
    if (created) fchownSync(fd, user.uid, user.gid);
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

function ignoreMissing(remove: () => void): void {
  try {
    remove();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/**
 * Removes `path`, with everything under it when it is a directory; a path
 * that does not exist (or stops existing meanwhile) is no error. Unlike
 * fs.rmSync, a failure is thrown as the kernel reported it, with the path
 * it failed on: rmSync answers an unlink refused with EPERM (an immutable
 * file) by treating the file as a directory, and throws ENOTDIR.
 */
export function removeTree(path: string): void {
  let isDir = false;
  ignoreMissing(() => (isDir = lstatSync(path).isDirectory()));
  if (!isDir) {
    ignoreMissing(() => unlinkSync(path));
    return;
  }
  let names: string[] = [];
  ignoreMissing(() => (names = readdirSync(path)));
  for (const name of names) removeTree(join(path, name));
  ignoreMissing(() => rmdirSync(path));
}
