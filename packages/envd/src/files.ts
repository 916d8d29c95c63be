// GET and POST /files: file contents over plain HTTP, streamed both ways.
import Busboy from 'busboy';
import { closeSync, createReadStream, fstatSync, ftruncateSync, openSync, read, readSync, writev, writevSync, constants as fsc } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants as zc, createGunzip, createGzip, gzipSync } from 'node:zlib';
import { EnvdRouteError, NotRegularFileError, fsRouteError } from './errors.js';
import { openForWrite } from './fs-ops.js';
import { metadataFromHeaders, writeMetadata } from './metadata.js';
import { resolveUserPath } from './paths.js';
import type { User } from './users.js';

const READ_CHUNK = 256 * 1024;

/**
 * Reads of a download. Each read is a round trip to libuv's thread pool,
 * which on a busy machine costs more than copying the bytes: 1 MiB reads
 * send a 1 MiB file in one read where 256 KiB reads took five (the last to
 * find the end of the file).
 */
const DOWNLOAD_CHUNK = 1024 * 1024;

/**
 * Writes of an upload. What one socket read brings is 64 KiB, and written as
 * it comes each of those is a round trip to libuv's thread pool; the trips
 * cost more than the copies. Gathered into 1 MiB writes, a MiB uploaded cost
 * envd a quarter less CPU (0.87 against 1.12-1.17 ms, measured against a
 * bare Node server receiving 1 MiB bodies).
 */
const WRITE_BATCH = 1024 * 1024;

/**
 * A batch up to this long is written on the event loop rather than in the
 * thread pool: into the page cache it takes tens of microseconds, less than
 * the pool's round trip (a wake-up of a pool thread, and of the loop when it
 * is done), which is most of what a small upload costs envd.
 */
const WRITE_IN_PLACE_MAX = 256 * 1024;

/**
 * A download up to this long is read on the event loop, for the same reason.
 * Smaller than for writes: a read that misses the page cache waits for the
 * disk, where a write only copies into memory.
 */
const READ_IN_PLACE_MAX = 64 * 1024;

interface WrittenEntry {
  name: string;
  path: string;
  type: 'file';
  metadata?: Record<string, string>;
}

/** Whether the client accepts gzip, and whether it refuses an unencoded body. */
function acceptedEncodings(header: string | undefined): { gzip: boolean; identity: boolean } {
  const q = new Map<string, number>();
  for (const part of (header ?? '').split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    q.set(name, qp ? Number(qp.slice(2)) : 1);
  }
  const gzip = (q.get('gzip') ?? q.get('*') ?? 0) > 0;
  const identity = q.has('identity') ? q.get('identity')! > 0 : !(q.has('*') && q.get('*') === 0);
  return { gzip, identity };
}

const SAMPLE_BYTES = 64 * 1024;

/** Whether the start of the file shrinks by at least a tenth under fast gzip. */
function compresses(fd: number, size: number): boolean {
  const sample = Buffer.allocUnsafe(Math.min(SAMPLE_BYTES, size));
  const n = readSync(fd, sample, 0, sample.length, 0);
  if (n === 0) return false;
  return gzipSync(sample.subarray(0, n), { level: zc.Z_BEST_SPEED }).length < n * 0.9;
}

function requirePath(params: URLSearchParams): string {
  const path = params.get('path');
  if (!path) throw new EnvdRouteError(400, "query parameter 'path' is required");
  return path;
}

export async function getFile(req: IncomingMessage, res: ServerResponse, params: URLSearchParams, user: User): Promise<void> {
  const target = resolveUserPath(requirePath(params), user);
  let fd: number;
  try {
    // Non-blocking, as openForWrite opens: a FIFO would otherwise hold envd
    // until something writes to it. A file that waits for data (/proc/kmsg)
    // then fails its read with EAGAIN instead of waiting.
    fd = openSync(target, fsc.O_RDONLY | fsc.O_NONBLOCK);
  } catch (err) {
    throw fsRouteError(err, target);
  }
  let size: number;
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new EnvdRouteError(400, `path '${target}' is a directory`);
    if (!st.isFile()) throw fsRouteError(new NotRegularFileError(), target);
    size = st.size;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  const enc = acceptedEncodings(req.headers['accept-encoding']);
  if (!enc.gzip && !enc.identity) {
    closeSync(fd);
    throw new EnvdRouteError(406, 'the file can be sent as gzip or unencoded, and the client accepts neither');
  }
  // A size of 0 is also what /proc and /sys report for files whose text is
  // made when read. Those are read to their end and go chunked; a file that
  // is empty indeed still answers Content-Length: 0.
  let first: Buffer | undefined;
  if (size === 0) {
    first = await readAt(fd, DOWNLOAD_CHUNK, 0).catch((err: unknown) => {
      closeSync(fd);
      throw fsRouteError(err, target);
    });
    if (first.length === 0) first = undefined;
  }
  // Accept-Encoding states what the client can take, not what it needs:
  // compress only what compresses. Gzip of incompressible data runs at a
  // few tens of MB/s and would make every download slow. (An empty file is
  // sent as it is whatever the client said: there is nothing to encode.)
  const useGzip = enc.gzip && (first ? !enc.identity : size > 0 && (!enc.identity || compresses(fd, size)));
  res.statusCode = 200;
  res.setHeader('Content-Type', 'application/octet-stream');
  res.setHeader('Content-Disposition', `attachment; filename*=UTF-8''${encodeURIComponent(basename(target))}`);
  res.setHeader('Vary', 'Accept-Encoding');
  if (useGzip) res.setHeader('Content-Encoding', 'gzip');
  else if (!first) res.setHeader('Content-Length', size);
  if (first) {
    const head = first;
    const rest = createReadStream('', { fd, start: head.length, highWaterMark: DOWNLOAD_CHUNK });
    const source = Readable.from(
      (async function* () {
        yield head;
        yield* rest;
      })(),
    );
    await pipeline(useGzip ? [source, createGzip({ level: zc.Z_BEST_SPEED }), res] : [source, res]).catch(() => {
      // The client went away, or the file could not be read on: the transfer ends unfinished.
    });
    return;
  }
  // What the file held when it was opened, and no more: Content-Length
  // promised that many bytes, and reading to the end of a file that is
  // still growing would send others.
  if (!useGzip) {
    await (size <= DOWNLOAD_CHUNK ? sendWhole(res, fd, size, target) : sendStream(res, fd, size));
    return;
  }
  const source = createReadStream('', { fd, start: 0, end: size - 1, highWaterMark: DOWNLOAD_CHUNK });
  await pipeline(source, createGzip({ level: zc.Z_BEST_SPEED }), res).catch(() => {
    // The client went away; the stream closed the file.
  });
}

/**
 * Sends the first `size` bytes of the file and ends the response; a file
 * that is shorter now fails it instead. Closes the file.
 */
async function sendStream(res: ServerResponse, fd: number, size: number): Promise<void> {
  const source = createReadStream('', { fd, start: 0, end: size - 1, highWaterMark: DOWNLOAD_CHUNK });
  try {
    await pipeline(source, res, { end: false });
  } catch {
    // The client went away, or the file could not be read on: the
    // pipeline has ended the response unfinished.
    return;
  }
  // Cut short since it was opened: less than Content-Length promised, so
  // the client must see the transfer fail rather than a whole short file.
  if (source.bytesRead < size) res.destroy();
  else res.end();
}

/** Up to `max` bytes of `fd` from `position`: fewer at its end, none past it. */
async function readAt(fd: number, max: number, position: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(max);
  return buf.subarray(0, await readInto(fd, buf, 0, max, position));
}

/** fs.read as a promise: how many bytes went into `buf` at `offset`. */
function readInto(fd: number, buf: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => read(fd, buf, offset, length, position, (err, bytes) => (err ? reject(err) : resolve(bytes))));
}

/**
 * A file of at most one read's size, read whole and sent in one write: no
 * stream to set up and tear down, and one trip to the thread pool where a
 * stream takes two (the read, then the close). Most downloads are this size.
 * One of at most READ_IN_PLACE_MAX is read on the loop, without the trip.
 */
async function sendWhole(res: ServerResponse, fd: number, size: number, target: string): Promise<void> {
  const buf = Buffer.allocUnsafe(size);
  let got = 0;
  try {
    while (got < size) {
      const n = size <= READ_IN_PLACE_MAX ? readSync(fd, buf, got, size - got, got) : await readInto(fd, buf, got, size - got, got);
      if (n === 0) break;
      got += n;
    }
  } catch (err) {
    throw fsRouteError(err, target);
  } finally {
    closeSync(fd);
  }
  // Cut short since it was opened: less than Content-Length promised, so
  // the client must see the transfer fail rather than a whole short file.
  if (got < size) res.destroy();
  else res.end(buf);
}

/**
 * The failure of a write that took none of what it was given. Some
 * filesystems (FUSE, 9p) answer a full disk that way rather than with
 * ENOSPC; written again, the same bytes would loop forever.
 */
function tookNothing(): NodeJS.ErrnoException {
  return Object.assign(new Error('a write took no bytes'), { code: 'ENOSPC' });
}

/**
 * Writes what it is given to `fd` from offset 0, in writes of WRITE_BATCH
 * bytes (the last may be shorter), in the thread pool; a batch of at most
 * WRITE_IN_PLACE_MAX (a whole small upload) is written on the loop.
 *
 * A failed write (a full disk) does not fail the writer at once: it takes
 * and drops the rest of what comes, and fails when it is ended. Through
 * `pipeline`, a writer that fails destroys the request it reads, and with
 * it the connection, so the client would never see the answer that names
 * the failure. The file descriptor stays the caller's; once the writer has
 * closed, no write of it is under way.
 */
class BatchedFileWriter extends Writable {
  #chunks: Buffer[] = [];
  #size = 0;
  #writing: Promise<void> | undefined;
  #failure: Error | undefined;
  /** Bytes that reached the file. */
  bytesWritten = 0;

  constructor(private readonly fd: number) {
    super({ highWaterMark: WRITE_BATCH });
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    if (this.#failure) {
      done();
      return;
    }
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    if (this.#size < WRITE_BATCH) done();
    else this.#flush(done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.#flush(() => done(this.#failure));
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    // The caller closes the descriptor once this writer has closed: a write
    // still queued for the thread pool must not find the number reused.
    if (this.#writing) void this.#writing.then(() => done(err));
    else done(err);
  }

  /** Writes what waits; calls `done` once it is written or has failed (see #failure). */
  #flush(done: () => void): void {
    const chunks = this.#chunks;
    const size = this.#size;
    this.#chunks = [];
    this.#size = 0;
    if (chunks.length === 0 || this.#failure) {
      done();
      return;
    }
    if (size <= WRITE_IN_PLACE_MAX) {
      try {
        this.#writeAllNow(chunks);
      } catch (err) {
        this.#failure = err as Error;
      }
      done();
      return;
    }
    this.#writing = this.#writeAll(chunks).then(
      () => {
        this.#writing = undefined;
        done();
      },
      (err: Error) => {
        this.#writing = undefined;
        this.#failure = err;
        done();
      },
    );
  }

  async #writeAll(chunks: Buffer[]): Promise<void> {
    for (let rest = chunks; rest.length > 0; ) {
      const n = await new Promise<number>((resolve, reject) => writev(this.fd, rest, this.bytesWritten, (err, written) => (err ? reject(err) : resolve(written))));
      rest = this.#advance(rest, n);
    }
  }

  #writeAllNow(chunks: Buffer[]): void {
    for (let rest = chunks; rest.length > 0; ) rest = this.#advance(rest, writevSync(this.fd, rest, this.bytesWritten));
  }

  /**
   * Counts `n` bytes written and gives what of `chunks` is left. After a
   * short write (a full disk says so at the next one) the writer goes on
   * from where it stopped.
   */
  #advance(chunks: Buffer[], n: number): Buffer[] {
    if (n === 0) throw tookNothing();
    this.bytesWritten += n;
    const rest = [...chunks];
    let skip = n;
    while (rest.length > 0 && skip >= rest[0]!.length) skip -= rest.shift()!.length;
    if (skip > 0) rest[0] = rest[0]!.subarray(skip);
    return rest;
  }
}

/** How much of a file an upload wrote, and what stopped it if it failed. */
interface Filled {
  written: number;
  failure?: unknown;
}

/** Streams a body into the file through {@link BatchedFileWriter}. */
function pourInto(body: Readable): (fd: number) => Promise<Filled> {
  return async (fd) => {
    const out = new BatchedFileWriter(fd);
    try {
      await pipeline(body, out);
      return { written: out.bytesWritten };
    } catch (err) {
      if (!out.closed) await new Promise<void>((resolve) => out.destroy().once('close', () => resolve()));
      return { written: out.bytesWritten, failure: err };
    }
  };
}

/**
 * Opens `target` and has `fill` write the upload into it. `dropBody` is
 * called when the file cannot be opened, for the body to be read and dropped.
 */
async function writeOne(target: string, user: User, metadata: Record<string, string> | undefined, fill: (fd: number) => Promise<Filled>, dropBody: () => void): Promise<WrittenEntry> {
  let fd: number;
  try {
    fd = openForWrite(target, user);
  } catch (err) {
    dropBody();
    throw fsRouteError(err, target);
  }
  // The file is cut to its new length after the last write, not at open: it
  // must not be seen closed with the tail of what it held before, and on
  // ext4 a file cut to nothing and written again is flushed to disk when it
  // is closed, which made a rewrite of 1 MiB take a millisecond more.
  const { written, failure: failed } = await fill(fd);
  let failure = failed;
  try {
    try {
      // After a failure what was written is the file, as if it had been cut at open.
      ftruncateSync(fd, written);
    } finally {
      closeSync(fd);
    }
    // A write replaces the file's metadata, with none when it carries none (as E2B's envd).
    if (failure === undefined) writeMetadata(target, metadata ?? {});
  } catch (err) {
    failure ??= err;
  }
  if (failure !== undefined) {
    if (failure instanceof EnvdRouteError) throw failure;
    if ((failure as NodeJS.ErrnoException).code === 'Z_DATA_ERROR') throw new EnvdRouteError(400, 'the request body is not valid gzip');
    throw fsRouteError(failure, target);
  }
  return { name: basename(target), path: target, type: 'file', ...(metadata ? { metadata } : {}) };
}

function decodedBody(req: IncomingMessage): Readable {
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding === 'identity') return req;
  if (encoding === 'gzip') return req.pipe(createGunzip());
  throw new EnvdRouteError(400, `content-encoding '${encoding}' is not supported (use gzip or none)`);
}

/** The most a part named 'file' without a filename may hold: busboy keeps it in memory. */
const MAX_FIELD_FILE = 64 * 1024 * 1024;

function multipart(req: IncomingMessage, body: Readable, params: URLSearchParams, user: User, metadata: Record<string, string> | undefined) {
  return new Promise<WrittenEntry[]>((resolve, reject) => {
    let parser: Busboy.Busboy;
    try {
      // A part without a filename is a field to busboy, its value a string:
      // read as latin1, it turns back into its bytes exactly.
      parser = Busboy({ headers: req.headers, preservePath: true, defCharset: 'latin1', limits: { fieldSize: MAX_FIELD_FILE } });
    } catch (err) {
      reject(new EnvdRouteError(400, `malformed multipart request: ${(err as Error).message}`));
      return;
    }
    const pathParam = params.get('path');
    const written: WrittenEntry[] = [];
    let chain = Promise.resolve();
    let failed: unknown;
    let files = 0;
    /** Where the next part named 'file' goes, or undefined (and `failed` set) when it has nowhere to go. */
    const targetOf = (filename: string | undefined): string | undefined => {
      files += 1;
      if (pathParam && files === 1) return pathParam;
      if (pathParam) failed = new EnvdRouteError(400, "several files were sent with one 'path'; omit 'path' and give each part its target path as filename");
      else if (filename) return filename;
      else failed = new EnvdRouteError(400, `file part ${files} has no filename and the request has no 'path'`);
      return undefined;
    };
    // A part named 'file' is a file whether or not it has a filename (as E2B's envd takes it).
    parser.on('field', (field, value, info) => {
      if (field !== 'file' || failed) return;
      if (info.valueTruncated) {
        failed = new EnvdRouteError(413, `the part 'file' without a filename is larger than ${MAX_FIELD_FILE} bytes; give it a filename to send more`);
        return;
      }
      const target = targetOf(undefined);
      if (!target) return;
      const abs = resolveUserPath(target, user);
      const pass = Readable.from([Buffer.from(value, 'latin1')]);
      chain = chain.then(() =>
        writeOne(abs, user, metadata, pourInto(pass), () => pass.resume()).then(
          (e) => void written.push(e),
          (err) => {
            failed ??= err;
          },
        ),
      );
    });
    parser.on('file', (field, stream, info) => {
      if (field !== 'file' || failed) {
        stream.resume();
        return;
      }
      const target = targetOf(info.filename);
      if (failed || !target) {
        stream.resume();
        return;
      }
      const abs = resolveUserPath(target, user);
      // Parts are written one after the other, in the order they arrive.
      const pass = stream.pipe(new PassThrough({ highWaterMark: READ_CHUNK }));
      chain = chain.then(() =>
        writeOne(abs, user, metadata, pourInto(pass), () => pass.resume()).then(
          (e) => void written.push(e),
          (err) => {
            failed ??= err;
            pass.resume();
          },
        ),
      );
    });
    parser.on('error', (err: Error) => {
      failed ??= new EnvdRouteError(400, `malformed multipart request: ${err.message}`);
      body.unpipe(parser);
      body.resume();
      chain.then(() => reject(failed));
    });
    parser.on('close', () => {
      chain.then(() => {
        if (failed) reject(failed);
        else if (written.length === 0) reject(new EnvdRouteError(400, "the multipart request has no part named 'file'"));
        else resolve(written);
      });
    });
    body.on('error', (err) => {
      failed ??= (err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' ? new EnvdRouteError(400, 'the request body is not valid gzip') : err;
      parser.destroy(err);
    });
    body.pipe(parser);
  });
}

export async function postFile(req: IncomingMessage, res: ServerResponse, params: URLSearchParams, user: User): Promise<void> {
  let written: WrittenEntry[];
  try {
    const metadata = metadataFromHeaders(req.headers);
    const body = decodedBody(req);
    const type = (req.headers['content-type'] ?? '').toLowerCase();
    if (type.startsWith('multipart/form-data')) {
      written = await multipart(req, body, params, user, metadata);
    } else {
      const target = resolveUserPath(requirePath(params), user);
      written = [await writeOne(target, user, metadata, pourInto(body), () => body.resume())];
    }
  } catch (err) {
    // What is left of the request is read and dropped, so that the answer
    // reaches the client and the connection can serve the next request.
    req.unpipe();
    req.resume();
    throw err;
  }
  const json = JSON.stringify(written);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) });
  res.end(json);
}
