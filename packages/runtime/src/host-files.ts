// What runc and the sandbox's root reach of the host: paths they must be able
// to pass, and the files every sandbox mounts at /.paddock.
//
// runc sets up a container from inside its user namespace, so the paths it
// opens there (the bundle's root filesystem, the sources of bind mounts,
// hooks) are opened as the sandbox's root, an unprivileged id on the host:
// every directory on the way must let it pass.
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, linkSync, lstatSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { RuntimeError } from './runtime.js';
import { processAlive } from './util.js';

/**
 * Throws unless a process with host ids `uid`/`gid` and no capabilities
 * may search every directory from `/` down to `path` (the last one too).
 */
export function checkPassable(path: string, uid: number, gid: number, what: string): void {
  const dirs: string[] = [];
  for (let p = resolve(path); ; p = dirname(p)) {
    dirs.unshift(p);
    if (p === '/') break;
  }
  for (const dir of dirs) {
    const st = statSync(dir);
    const bit = st.uid === uid ? 0o100 : st.gid === gid ? 0o010 : 0o001;
    if ((st.mode & bit) === 0) {
      throw new RuntimeError(
        'invalid',
        `${what} '${path}' is below '${dir}' (mode ${(st.mode & 0o7777).toString(8)}, owner ${st.uid}:${st.gid}), which a sandbox's root (host id ${uid}) cannot pass while runc sets the sandbox up; put it elsewhere (e.g. under /var/lib) or let others search '${dir}' (chmod o+x)`,
      );
    }
  }
}

/** Makes `dir` a directory that the host's root owns and that only the sandboxes' root group may search. */
export function sandboxPassable(dir: string, gid: number): void {
  mkdirSync(dir, { recursive: true });
  chownSync(dir, 0, gid);
  chmodSync(dir, 0o710);
}

/** A name for a file's or a directory tree's contents: paths, sizes, modes and modification times. */
function stamp(source: string): string {
  const h = createHash('sha256');
  const names = statSync(source).isDirectory() ? ['', ...(readdirSync(source, { recursive: true }) as string[]).sort()] : [''];
  for (const name of names) {
    const st = statSync(join(source, name));
    h.update(`${name}\0${st.size}\0${st.mtimeMs}\0${st.mode}\n`);
  }
  return h.digest('hex').slice(0, 16);
}

/**
 * Copies `source` (a file or a directory) to `<into>/<stamp>-<name>` unless that copy exists,
 * and returns the copy. Sandboxes mount the copy, not the build output: a
 * rebuild never changes files under running sandboxes (builds replace files,
 * they do not write into them, so a hard link is as good as a copy and costs
 * nothing on the same filesystem), and the copy sits where the sandboxes'
 * root may pass. Made in a scratch directory and renamed, so a crash never
 * leaves half a copy under its final name.
 */
export function installCopy(source: string, into: string): string {
  const target = join(into, `${stamp(source)}-${basename(source)}`);
  if (existsSync(target)) return target;
  mkdirSync(into, { recursive: true, mode: 0o755 });
  const scratch = `${target}.${process.pid}.tmp`;
  rmSync(scratch, { recursive: true, force: true });
  linkOrCopy(source, scratch);
  try {
    renameSync(scratch, target);
  } catch (err) {
    // Another runtime sharing the directory made the same copy meanwhile.
    rmSync(scratch, { recursive: true, force: true });
    if (!existsSync(target)) throw err;
  }
  return target;
}

function linkOrCopy(from: string, to: string): void {
  const st = lstatSync(from);
  if (st.isDirectory()) {
    // Whatever the source's directories allow, the copy's let everyone pass and read: sandboxes' root must.
    mkdirSync(to);
    chmodSync(to, 0o755);
    for (const name of readdirSync(from)) linkOrCopy(join(from, name), join(to, name));
    return;
  }
  if (st.isFile()) {
    try {
      linkSync(from, to);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    }
  }
  cpSync(from, to, { dereference: false, verbatimSymlinks: true, preserveTimestamps: true });
}

/** Scratch copies that a process which has ended left in `into` (a crash), removed. */
export function removeScratchCopies(into: string): void {
  if (!existsSync(into)) return;
  for (const name of readdirSync(into)) {
    const pid = /\.(\d+)\.tmp$/.exec(name)?.[1];
    if (pid !== undefined && !processAlive(Number(pid))) rmSync(join(into, name), { recursive: true, force: true });
  }
}
