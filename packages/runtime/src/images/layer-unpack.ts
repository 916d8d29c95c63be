// One image layer, from its (compressed) bytes to a directory in the form
// overlayfs stacks: digests checked while the bytes stream by, ownership
// shifted into the sandboxes' id range, whiteouts as character devices 0/0
// and opaque directories marked with trusted.overlay.opaque=y.
//
// node-tar parses the archive; the files are made here rather than by its
// Unpack, whose rules are an npm package's and not an image layer's: it
// rewrites absolute symlink targets (which in a root filesystem are meant
// as they are), refuses links that point through other symlinks (every
// merged-/usr image has them), and chowns after writing a file, which
// clears its setuid bit (sudo's). Nothing here follows a symlink: every
// directory on the way to an entry is one this layer made or checked, and
// the directory being filled is private to the host until it is renamed
// into the store.
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, closeSync, constants, fchmodSync, fchownSync, futimesSync, lchownSync, linkSync, lstatSync, lutimesSync, mkdirSync, openSync, rmSync, symlinkSync, unlinkSync, write, writeSync, type Stats } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as zlib from 'node:zlib';
import { Parser, type ReadEntry } from 'tar';
import { ID_RANGE } from '../ids.js';
import { RuntimeError } from '../runtime.js';
import { imageFs } from './image-fs.js';

const OPAQUE = '.wh..wh..opq';
const WHITEOUT = '.wh.';
/** Decompressed output in pieces this large: fewer writes to the parser and the disk. */
const CHUNK = 256 * 1024;
/** Files up to this size are written without the thread pool. */
const SMALL_FILE = 1024 * 1024;

const writeAsync = promisify(write);

export interface LayerExpectation {
  /** sha256 of the bytes as stored (compressed or not); unchecked when absent (a local tar being imported). */
  digest?: string;
  /** Their length, when known: more is refused as it arrives. */
  size?: number;
  /** sha256 of the uncompressed tar; unchecked when absent (a rootfs tar is named by what it hashes to). */
  diffId?: string;
}

export interface UnpackedLayer {
  digest: string;
  size: number;
  diffId: string;
  /** Bytes of the uncompressed tar. */
  tarSize: number;
}

export interface UnpackContext {
  idShift: number;
  /** Names the image in errors. */
  image: string;
  /** Names the layer in errors. */
  layer: string;
  /** Compressed bytes read so far. */
  onBytes?: (bytes: number) => void;
  signal?: AbortSignal;
}

type Decompressor = () => Transform;

function decompressorFor(head: Buffer, ctx: UnpackContext): Decompressor | null {
  if (head[0] === 0x1f && head[1] === 0x8b) return () => zlib.createGunzip({ chunkSize: CHUNK });
  if (head.readUInt32LE(0) === 0xfd2fb528) {
    // Node.js has zstd from 22.15 on; an older one says so rather than failing on the bytes.
    if (typeof zlib.createZstdDecompress !== 'function') throw new RuntimeError('invalid', `image '${ctx.image}': layer ${ctx.layer} is zstd-compressed, which this Node.js cannot decompress`);
    return () => zlib.createZstdDecompress({ chunkSize: CHUNK });
  }
  return null;
}

/**
 * Unpacks the layer read from `source` into `dest` (an empty directory the
 * caller made) and resolves once every file is written and both digests
 * matched; on failure `dest` holds a partial tree for the caller to remove.
 */
export async function unpackLayer(source: AsyncIterable<Buffer>, dest: string, expect: LayerExpectation, ctx: UnpackContext): Promise<UnpackedLayer> {
  const invalid = (why: string) => new RuntimeError('invalid', `image '${ctx.image}': layer ${ctx.layer} ${why}`);
  const stored = createHash('sha256');
  let size = 0;
  const it = source[Symbol.asyncIterator]();
  const next = async () => {
    try {
      return await it.next();
    } catch (err) {
      if (err instanceof RuntimeError || ctx.signal?.aborted) throw err;
      throw new RuntimeError('unavailable', `image '${ctx.image}': reading layer ${ctx.layer} failed: ${(err as Error).message}`, { cause: err });
    }
  };
  let head = Buffer.alloc(0);
  async function* counted(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        const r = head.length ? { done: false as const, value: head } : await next();
        if (head.length) head = Buffer.alloc(0);
        if (r.done) return;
        size += r.value.length;
        if (expect.size !== undefined && size > expect.size) throw invalid(`is longer than the ${expect.size} bytes its descriptor gives`);
        stored.update(r.value);
        ctx.onBytes?.(size);
        yield r.value;
      }
    } finally {
      await it.return?.();
    }
  }
  // The first bytes say how the layer is compressed, whatever its media type claims.
  const chunks: Buffer[] = [];
  for (let n = 0; n < 4; ) {
    const r = await next();
    if (r.done) break;
    chunks.push(r.value);
    n += r.value.length;
  }
  head = Buffer.concat(chunks);
  if (head.length < 4) throw invalid(head.length ? 'is too short to be a tar' : 'is empty');
  const decompress = decompressorFor(head, ctx);

  const writer = new LayerWriter(dest, ctx);
  const diff = createHash('sha256');
  let tarSize = 0;
  const sink = async (tar: AsyncIterable<Buffer>) => {
    const parser = new Parser({ strict: true, brotli: false, zstd: false });
    const parsed = new Promise<void>((resolve, reject) => {
      parser.on('error', reject);
      parser.on('end', resolve);
    });
    parsed.catch(() => {});
    parser.on('entry', (e: ReadEntry) => writer.push(e));
    parser.on('ignoredEntry', (e: ReadEntry) => writer.fail(invalid(`has entry '${e.path}' of type ${e.type}, which is not supported`)));
    let first = true;
    for await (const chunk of tar) {
      if (first && chunk.length >= 4 && ((chunk[0] === 0x1f && chunk[1] === 0x8b) || chunk.readUInt32LE(0) === 0xfd2fb528)) throw invalid('is compressed twice');
      first = false;
      if (writer.error) throw writer.error;
      diff.update(chunk);
      tarSize += chunk.length;
      if (!parser.write(chunk)) await Promise.race([once(parser, 'drain'), parsed, writer.failed]);
    }
    parser.end();
    await Promise.race([parsed, writer.failed]);
    await writer.done();
  };
  try {
    const signal = ctx.signal;
    if (decompress) await pipeline(counted(), decompress(), sink, { signal });
    else await pipeline(counted(), sink, { signal });
  } catch (err) {
    if (err instanceof RuntimeError) throw err;
    if (ctx.signal?.aborted) throw new RuntimeError('unavailable', `image '${ctx.image}': unpacking layer ${ctx.layer} was cancelled`, { cause: err });
    // A file system's failure is the host's; anything else failed in decompressing or parsing.
    if ((err as { syscall?: string }).syscall) throw err;
    throw invalid(`is truncated or corrupt: ${(err as Error).message}`);
  }
  const digest = `sha256:${stored.digest('hex')}`;
  const diffId = `sha256:${diff.digest('hex')}`;
  if (expect.size !== undefined && size !== expect.size) throw invalid(`is ${size} bytes, not the ${expect.size} its descriptor gives (truncated?)`);
  if (expect.digest && digest !== expect.digest) throw invalid(`has digest ${digest}, not the ${expect.digest} it was asked for`);
  if (expect.diffId && diffId !== expect.diffId) throw invalid(`unpacks to diff_id ${diffId}, not the ${expect.diffId} the image configuration gives`);
  return { digest, size, diffId, tarSize };
}

/**
 * Writes a layer's entries into `dest` one after another (the parser
 * emits entries without waiting for the file system).
 */
class LayerWriter {
  private chain: Promise<void> = Promise.resolve();
  error: Error | undefined;
  private rejectFailed!: (err: Error) => void;
  /** Rejects at the first entry that could not be written. */
  readonly failed = new Promise<never>((_, reject) => (this.rejectFailed = reject));
  /** Paths (relative) known to be directories of this layer, not symlinks. */
  private readonly dirs = new Set<string>(['']);
  /** Directory times, set last: writing into a directory changes its mtime. */
  private readonly dirTimes: [string, Date][] = [];

  constructor(
    private readonly dest: string,
    private readonly ctx: UnpackContext,
  ) {
    this.failed.catch(() => {});
  }

  push(entry: ReadEntry): void {
    this.chain = this.chain
      .then(() => (this.error ? undefined : this.write(entry)))
      .catch((err: Error) => this.fail(err))
      .finally(() => entry.resume());
  }

  fail(err: Error): void {
    if (this.error) return;
    this.error = err;
    this.rejectFailed(err);
  }

  async done(): Promise<void> {
    await this.chain;
    if (this.error) throw this.error;
    // lutimes: a later entry may have put a symlink where the directory was.
    for (const [abs, mtime] of this.dirTimes.reverse()) {
      try {
        lutimesSync(abs, mtime, mtime);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }

  private invalid(entry: string, why: string): RuntimeError {
    return new RuntimeError('invalid', `image '${this.ctx.image}': layer ${this.ctx.layer} has entry '${entry}' that ${why}`);
  }

  /** The entry's path inside the layer, '' for its root; `..` and absolute paths are refused. */
  private clean(raw: string, entry: string): string {
    const parts = raw.split('/').filter((p) => p !== '' && p !== '.');
    // umoci writes the root as '/'; any other absolute path is refused.
    if (raw.startsWith('/') && parts.length) throw this.invalid(entry, 'is an absolute path');
    if (parts.includes('..')) throw this.invalid(entry, "has '..' in its path");
    return parts.join('/');
  }

  private async write(entry: ReadEntry): Promise<void> {
    const name = this.clean(entry.path, entry.path);
    const { idShift } = this.ctx;
    const uid = entry.uid ?? 0;
    const gid = entry.gid ?? 0;
    if (uid >= ID_RANGE || gid >= ID_RANGE) throw this.invalid(name, `is owned by ${uid}:${gid}, outside the ids 0-${ID_RANGE - 1} a sandbox has`);
    const owner = [idShift + uid, idShift + gid] as const;
    const mode = (entry.mode ?? 0o644) & 0o7777;
    const mtime = entry.mtime ?? new Date(0);
    if (name === '') {
      if (entry.type !== 'Directory') throw this.invalid(entry.path, 'replaces the root directory with something else');
      chownSync(this.dest, ...owner);
      chmodSync(this.dest, mode);
      this.dirTimes.push([this.dest, mtime]);
      return;
    }
    const slash = name.lastIndexOf('/');
    const parentRel = slash < 0 ? '' : name.slice(0, slash);
    const base = name.slice(slash + 1);
    const parent = this.directory(parentRel, name);
    const abs = join(parent, base);
    if (base === OPAQUE) {
      imageFs().lsetxattr(parent, 'trusted.overlay.opaque', 'y');
      return;
    }
    if (base.startsWith(WHITEOUT)) {
      const hidden = base.slice(WHITEOUT.length);
      if (!hidden || hidden === '.' || hidden === '..') throw this.invalid(name, 'is a whiteout of nothing');
      // What this layer itself has at that path stays: a whiteout only hides the layers below.
      if (stat(join(parent, hidden))) return;
      imageFs().mknod(join(parent, hidden), constants.S_IFCHR, 0, 0);
      lchownSync(join(parent, hidden), idShift, idShift);
      return;
    }
    switch (entry.type) {
      case 'Directory':
      case 'GNUDumpDir': {
        const st = stat(abs);
        if (!st?.isDirectory()) {
          this.clear(abs, name, st);
          mkdirSync(abs, 0o700);
        }
        chownSync(abs, ...owner);
        chmodSync(abs, mode);
        this.dirs.add(name);
        this.dirTimes.push([abs, mtime]);
        return;
      }
      case 'File':
      case 'OldFile':
      case 'ContiguousFile': {
        this.clear(abs, name, stat(abs));
        const fd = openSync(abs, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
        try {
          // Small files are written at once: a trip to the thread pool costs more than the copy into the page cache.
          const sync = (entry.size ?? 0) <= SMALL_FILE;
          for await (const chunk of entry as AsyncIterable<Buffer>) {
            if (sync) writeSync(fd, chunk);
            else await writeAsync(fd, chunk);
          }
          // The owner first: a chown clears setuid and setgid bits that a chmod before it set.
          fchownSync(fd, ...owner);
          fchmodSync(fd, mode);
          futimesSync(fd, mtime, mtime);
        } finally {
          closeSync(fd);
        }
        return;
      }
      case 'SymbolicLink': {
        if (!entry.linkpath) throw this.invalid(name, 'is a symlink without a target');
        this.clear(abs, name, stat(abs));
        // The target is kept as written: it is resolved inside the sandbox, never here.
        symlinkSync(entry.linkpath, abs);
        lchownSync(abs, ...owner);
        lutimesSync(abs, mtime, mtime);
        return;
      }
      case 'Link': {
        const targetRel = this.clean(entry.linkpath ?? '', name);
        if (!targetRel) throw this.invalid(name, 'is a hard link to the root directory');
        const ts = targetRel.lastIndexOf('/');
        const target = join(this.directory(ts < 0 ? '' : targetRel.slice(0, ts), name, false), targetRel.slice(ts + 1));
        const st = stat(target);
        if (!st) throw this.invalid(name, `is a hard link to '${targetRel}', which the layer does not have before it`);
        if (st.isDirectory()) throw this.invalid(name, `is a hard link to directory '${targetRel}'`);
        if (target === abs) return;
        this.clear(abs, name, stat(abs));
        linkSync(target, abs);
        return;
      }
      case 'FIFO': {
        this.clear(abs, name, stat(abs));
        imageFs().mknod(abs, constants.S_IFIFO | 0o600, 0, 0);
        lchownSync(abs, ...owner);
        chmodSync(abs, mode);
        return;
      }
      case 'CharacterDevice':
      case 'BlockDevice':
        throw this.invalid(name, `is a device node (${entry.type}); images may not carry devices`);
      default:
        throw this.invalid(name, `has type ${entry.type}, which is not supported`);
    }
  }

  /**
   * The absolute path of directory `rel`, each step checked to be a real
   * directory of this layer; missing ones are made (owned by the sandbox's
   * root) unless `make` is false.
   */
  private directory(rel: string, entry: string, make = true): string {
    if (this.dirs.has(rel)) return rel ? join(this.dest, rel) : this.dest;
    let sofar = '';
    for (const part of rel.split('/')) {
      sofar = sofar ? `${sofar}/${part}` : part;
      if (this.dirs.has(sofar)) continue;
      const abs = join(this.dest, sofar);
      const st = stat(abs);
      if (st?.isSymbolicLink()) throw this.invalid(entry, `would be written through symlink '${sofar}'`);
      if (st && !st.isDirectory()) throw this.invalid(entry, `is under '${sofar}', which is not a directory`);
      if (!st) {
        if (!make) throw this.invalid(entry, `refers to '${sofar}', which the layer does not have`);
        mkdirSync(abs, 0o755);
        chownSync(abs, this.ctx.idShift, this.ctx.idShift);
      }
      this.dirs.add(sofar);
    }
    return join(this.dest, rel);
  }

  /** Removes what is at `abs` for a later entry of the same path (the archive's last word counts). */
  private clear(abs: string, name: string, st: Stats | undefined): void {
    if (!st) return;
    if (st.isDirectory()) {
      rmSync(abs, { recursive: true });
      for (const d of this.dirs) if (d === name || d.startsWith(`${name}/`)) this.dirs.delete(d);
    } else {
      unlinkSync(abs);
    }
  }
}

function stat(path: string): Stats | undefined {
  return lstatSync(path, { throwIfNoEntry: false });
}
