// The COPY step of a template build: files from the archive the SDK made
// of the user's build context, placed in the image (through its ImageRoot:
// on the host, the overlay of a new layer on the image's layers) with the
// owner and mode the step names, as Docker's COPY places them. The
// archive is unpacked whole into a private directory first, and only an
// archive that unpacked without a refused entry is placed, so that a bad
// archive changes nothing in the image.
//
// On the host, the archive may be kept unpacked in a directory of the
// host's own (`unpacked`): the first copy of it unpacks it there, and every
// copy copies those files into the image in the kernel (copy_file_range),
// which reads no data into this process. Unpacking reads every byte into
// fresh buffers, and that was most of what a COPY of a few MiB took.
import {
  chmodSync,
  constants as fsc,
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, posix } from 'node:path';
import { extract, type ReadEntry } from 'tar';
import { Accounts } from './accounts.js';
import type { ImageRoot } from './image-root.js';
import { followedOrNone, lstatOrNone, makeDirs, ownTree, place, type Ownership } from './place.js';

export interface CopyOptions {
  /** The tar archive, gzip-compressed or not, as this process reaches it (not through the image). */
  archive: string;
  /** What of the archive to copy: a path in it (`app/`, `file.txt`, `.` for all). */
  source: string;
  /** Where to: absolute, or relative to `workdir` (else to the home of `user`, else to /). */
  dest: string;
  workdir?: string;
  /** The step's user: the owner when `owner` is not given, and whose home a relative `dest` is in. */
  user?: string;
  /** `user`, `user:group`, `uid` or `uid:gid`. */
  owner?: string;
  /** Octal permission bits for every file and directory copied (`0755`). */
  mode?: string;
  /** The most bytes the archive's files may hold unpacked; unbounded when unset (a build container's disk bounds it). */
  maxBytes?: number;
  /**
   * Where the archive is kept unpacked, on the host, out of every image's
   * reach: made by the first copy that names it (in `unpackScratch`, a
   * directory of no one else's on the same filesystem, then renamed), and
   * copied from by every copy.
   */
  unpacked?: string;
  unpackScratch?: string;
}

/** Entry types that are copied; devices, FIFOs and the like are refused. */
const copiedTypes = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

/**
 * Why the archive entry at `path` must not be unpacked, or undefined if it
 * may. Besides what leaves the directory it is unpacked in, this refuses
 * entries under a symlink the archive made (`link -> /etc`, then
 * `link/passwd`) and hard links to anything but a file the archive already
 * holds, so that unpacking never reaches outside that directory.
 */
function refusal(path: string, entry: ReadEntry, symlinks: Set<string>, files: Set<string>): string | undefined {
  if (path.startsWith('/')) return 'is an absolute path';
  if (path.split('/').includes('..')) return "leaves the archive ('..')";
  if (!copiedTypes.has(entry.type)) return `is a ${entry.type}; only files, directories and symlinks are copied`;
  const norm = posix.normalize(path).replace(/\/+$/, '');
  const parts = norm.split('/');
  for (let i = 1; i < parts.length; i++) {
    const above = parts.slice(0, i).join('/');
    if (symlinks.has(above)) return `is under the symlink '${above}'`;
  }
  if (entry.type === 'Link') {
    const target = posix.normalize(String(entry.linkpath));
    if (!files.has(target)) return `is a hard link to '${entry.linkpath}', which is not a file before it in the archive`;
  }
  symlinks.delete(norm);
  files.delete(norm);
  if (entry.type === 'SymbolicLink') symlinks.add(norm);
  else if (entry.type !== 'Directory') files.add(norm);
  return undefined;
}

/** Unpacks `archive` into the directory `into`, or fails naming the first entry it refuses; the bytes its files hold. */
function unpack(archive: string, into: string, maxBytes = Infinity): number {
  const symlinks = new Set<string>();
  const files = new Set<string>();
  let refused: string | undefined;
  let bytes = 0;
  try {
    extract({
      file: archive,
      cwd: into,
      sync: true,
      // Any entry node-tar could not unpack fails the copy, rather than being left out.
      strict: true,
      // The step decides owners and modes; the archive's modes are kept exactly, untouched by the umask.
      preserveOwner: false,
      chmod: true,
      // A symlink's target is kept as the archive has it: node-tar would
      // otherwise make `/usr/bin/python3` relative. Its own guards against
      // absolute paths, '..' and paths through symlinks go with it; `refusal`
      // stands in for them, and refuses where node-tar would skip.
      preservePaths: true,
      // A file of zeros compresses far beyond node-tar's default bound of
      // 1000:1 and is no bomb; what unpacking may write is bounded by the
      // build container's disk quota, or by `maxBytes`, instead.
      maxDecompressionRatio: Infinity,
      // Reads of 1 MiB, not node-tar's default of 16: a 10 MiB gzip archive
      // unpacked about four times faster (each read allocates its buffer,
      // and the unzip of one big read is slower than that of several).
      maxReadSize: 1024 * 1024,
      filter: (path, entry) => {
        if (refused) return false;
        bytes += (entry as ReadEntry).type === 'Link' ? 0 : ((entry as ReadEntry).size ?? 0);
        if (bytes > maxBytes) {
          refused = tooMany(maxBytes);
          return false;
        }
        const why = refusal(path, entry as ReadEntry, symlinks, files);
        if (why) refused = `archive entry '${path}' ${why}`;
        return !why;
      },
    });
  } catch (err) {
    throw new Error(`archive '${archive}': ${(err as Error).message}`, { cause: err });
  }
  if (refused) throw new Error(refused);
  return bytes;
}

const tooMany = (maxBytes: number) => `the archive's files hold more than ${maxBytes} bytes, the most this copy may write`;

/**
 * The directory where `archive` is kept unpacked (`<unpacked>/files`, the
 * bytes its files hold in `<unpacked>/bytes`), made now when it is not
 * there yet. Nothing but this tool writes there, and nothing of an image is
 * ever in it.
 */
function keptUnpacked(archive: string, unpacked: string, scratch: string, maxBytes = Infinity): string {
  if (!existsSync(join(unpacked, 'bytes'))) {
    const made = mkdtempSync(join(scratch, 'unpacked-'));
    try {
      const files = join(made, 'files');
      mkdirSync(files);
      // What the scratch directory an archive is unpacked in starts as (see copy).
      chmodSync(files, 0o755);
      const bytes = unpack(archive, files, maxBytes);
      writeFileSync(join(made, 'bytes'), String(bytes));
      try {
        renameSync(made, unpacked);
      } catch (err) {
        // Another copy of the same archive kept it meanwhile.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      }
    } finally {
      rmSync(made, { recursive: true, force: true });
    }
  }
  const bytes = Number(readFileSync(join(unpacked, 'bytes'), 'utf8'));
  if (!(bytes <= maxBytes)) throw new Error(tooMany(maxBytes));
  return join(unpacked, 'files');
}

/**
 * Copies what is in the host directory `from` (an archive kept unpacked)
 * into the directory `to`, as unpacking the archive there would have made
 * it: the same files, directories, symlinks and hard links, modes (`to`'s
 * own among them, which an archive's `./` entry sets) and files' times. Nothing
 * is followed on either side: `from` is the host's own, `to` a new directory.
 */
function copyUnpacked(from: string, to: string): void {
  copyEntries(from, to, new Map());
  chmodSync(to, lstatSync(from).mode & 0o7777);
}

function copyEntries(from: string, to: string, links: Map<string, string>): void {
  for (const name of readdirSync(from)) {
    const src = join(from, name);
    const dst = join(to, name);
    const st = lstatSync(src);
    if (st.isDirectory()) {
      // Its times are those of the copy, as unpacking leaves a directory's.
      mkdirSync(dst);
      copyEntries(src, dst, links);
      chmodSync(dst, st.mode & 0o7777);
    } else if (st.isSymbolicLink()) {
      symlinkSync(readlinkSync(src), dst);
    } else if (st.isFile()) {
      const inode = `${st.dev}:${st.ino}`;
      const first = st.nlink > 1 ? links.get(inode) : undefined;
      if (first !== undefined) {
        linkSync(first, dst);
        continue;
      }
      copyFileSync(src, dst, fsc.COPYFILE_EXCL);
      chmodSync(dst, st.mode & 0o7777);
      utimesSync(dst, st.atime, st.mtime);
      if (st.nlink > 1) links.set(inode, dst);
    } else {
      throw new Error(`'${src}' is neither a file, a directory nor a symlink`);
    }
  }
}

/** The source as a path inside the archive ('.' for all of it). */
function archivePath(source: string): string {
  const rel = posix.normalize(source.replace(/^\/+/, '') || '.').replace(/\/+$/, '') || '.';
  if (rel === '..' || rel.startsWith('../')) throw new Error(`source '${source}' is outside the build context`);
  return rel;
}

/** Where `source` is in the archive unpacked at the image's `dir`; it is only found through directories, never through symlinks. */
function locate(root: ImageRoot, dir: string, source: string): string {
  const rel = archivePath(source);
  const parts = rel === '.' ? [] : rel.split('/');
  let at = dir;
  for (const [i, part] of parts.entries()) {
    at = join(at, part);
    const st = lstatOrNone(root, at);
    if (!st) throw new Error(`source '${source}' is not in the archive`);
    if (i < parts.length - 1 && st.isSymbolicLink()) throw new Error(`source '${source}' goes through the symlink '${parts.slice(0, i + 1).join('/')}' in the archive`);
    if (i < parts.length - 1 && !st.isDirectory()) throw new Error(`source '${source}' is not in the archive`);
  }
  if (source.endsWith('/') && !lstatSync(root.at(at)).isDirectory()) throw new Error(`source '${source}' is not a directory in the archive`);
  return at;
}

function parseMode(mode: string): number {
  if (!/^[0-7]{1,4}$/.test(mode)) throw new Error(`mode '${mode}' is not an octal mode like 0755`);
  return parseInt(mode, 8);
}

/**
 * Runs `fn` with a new private directory under the image's /tmp (on the
 * image's filesystem, so that what is unpacked there is moved into place,
 * not copied), and removes it after. An image without /tmp (scratch) gets
 * one for that time only.
 */
function withScratchDir(root: ImageRoot, fn: (dir: string) => void): void {
  const madeTmp = !followedOrNone(root, '/tmp');
  if (madeTmp) {
    mkdirSync(root.at('/tmp'));
    chmodSync(root.at('/tmp'), 0o1777);
  }
  try {
    const dir = `/tmp/${basename(mkdtempSync(`${root.at('/tmp', true)}/paddock-copy-`))}`;
    try {
      fn(dir);
    } finally {
      rmSync(root.at(dir), { recursive: true, force: true });
    }
  } finally {
    if (madeTmp) rmdirSync(root.at('/tmp'));
  }
}

/** Places the step's files in the image at `root`. */
export function copy(root: ImageRoot, opts: CopyOptions): void {
  if (!opts.dest) throw new Error('dest is empty');
  const accounts = new Accounts(root);
  const user = opts.user === undefined ? undefined : accounts.knownUser(opts.user);
  const ownership: Ownership = {
    ...(opts.owner !== undefined ? accounts.owner(opts.owner) : { uid: user?.uid ?? 0, gid: user?.gid ?? 0 }),
    mode: opts.mode === undefined ? undefined : parseMode(opts.mode),
  };
  const base = opts.workdir !== undefined ? posix.resolve('/', opts.workdir) : (user?.home ?? '/');
  const dest = posix.resolve(base, opts.dest);
  const intoDir = /(^|\/)\.?$/.test(opts.dest);

  withScratchDir(root, (scratch) => {
    const unpacked = join(scratch, 'archive');
    // The scratch directory keeps others out. The archive's root is what a
    // source of '.' or a glob places whole, so it gets the mode Docker gives
    // a directory its COPY makes, whatever the umask.
    mkdirSync(root.at(unpacked));
    chmodSync(root.at(unpacked), 0o755);
    if (opts.unpacked !== undefined && opts.unpackScratch !== undefined) copyUnpacked(keptUnpacked(opts.archive, opts.unpacked, opts.unpackScratch, opts.maxBytes), root.at(unpacked));
    else unpack(opts.archive, root.at(unpacked), opts.maxBytes);
    const from = locate(root, unpacked, opts.source);
    ownTree(root, from, ownership);
    const placing = { ...ownership, move: true };
    if (lstatSync(root.at(from)).isDirectory()) {
      makeDirs(root, dirname(dest), ownership);
      place(root, from, dest, placing);
    } else if (intoDir || followedOrNone(root, dest)?.isDirectory()) {
      makeDirs(root, dest, ownership);
      place(root, from, join(dest, basename(from)), placing);
    } else {
      makeDirs(root, dirname(dest), ownership);
      place(root, from, dest, placing);
    }
  });
}
