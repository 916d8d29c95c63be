// GET and POST /files: file contents over plain HTTP, streamed both ways.
import Busboy from 'busboy';
import { closeSync, createReadStream, createWriteStream, fstatSync, ftruncateSync, openSync, read, readSync, truncateSync, constants as fsc } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { basename } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants as zc, createGunzip, createGzip, gzipSync } from 'node:zlib';
import { HttpError, fsHttpError } from './errors.js';
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
  if (!path) throw new HttpError(400, "query parameter 'path' is required");
  return path;
}

export async function getFile(req: IncomingMessage, res: ServerResponse, params: URLSearchParams, user: User): Promise<void> {
  const target = resolveUserPath(requirePath(params), user);
  let fd: number;
  try {
    fd = openSync(target, fsc.O_RDONLY);
  } catch (err) {
    throw fsHttpError(err, target);
  }
  let size: number;
  try {
    const st = fstatSync(fd);
    if (st.isDirectory()) throw new HttpError(400, `path '${target}' is a directory`);
    if (!st.isFile()) throw new HttpError(400, `path '${target}' is not a regular file`);
    size = st.size;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  const enc = acceptedEncodings(req.headers['accept-encoding']);
  if (!enc.gzip && !enc.identity) {
    closeSync(fd);
    throw new HttpError(406, 'the file can be sent as gzip or unencoded, and the client accepts neither');
  }
  // A size of 0 is also what /proc and /sys report for files whose text is
  // made when read. Those are read to their end and go chunked; a file that
  // is empty indeed still answers Content-Length: 0.
  let first: Buffer | undefined;
  if (size === 0) {
    first = await readAt(fd, DOWNLOAD_CHUNK, 0).catch((err: unknown) => {
      closeSync(fd);
      throw fsHttpError(err, target);
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
  if (!useGzip && size <= DOWNLOAD_CHUNK) {
    await sendWhole(res, fd, size, target);
    return;
  }
  const source = createReadStream('', { fd, start: 0, end: size - 1, highWaterMark: DOWNLOAD_CHUNK });
  await pipeline(useGzip ? [source, createGzip({ level: zc.Z_BEST_SPEED }), res] : [source, res]).catch(() => {
    // The client went away; the stream closed the file.
  });
}

/** Up to `max` bytes of `fd` from `position`: fewer at its end, none past it. */
async function readAt(fd: number, max: number, position: number): Promise<Buffer> {
  const buf = Buffer.allocUnsafe(max);
  const n = await new Promise<number>((resolve, reject) => read(fd, buf, 0, max, position, (err, bytes) => (err ? reject(err) : resolve(bytes))));
  return buf.subarray(0, n);
}

/**
 * A file of at most one read's size, read whole and sent in one write: no
 * stream to set up and tear down, and one trip to the thread pool where a
 * stream takes two (the read, then the close). Most downloads are this size.
 */
async function sendWhole(res: ServerResponse, fd: number, size: number, target: string): Promise<void> {
  const buf = Buffer.allocUnsafe(size);
  let got = 0;
  try {
    while (got < size) {
      const n = await new Promise<number>((resolve, reject) => read(fd, buf, got, size - got, got, (err, bytes) => (err ? reject(err) : resolve(bytes))));
      if (n === 0) break;
      got += n;
    }
  } catch (err) {
    throw fsHttpError(err, target);
  } finally {
    closeSync(fd);
  }
  // Cut short since it was opened: less than Content-Length promised, so
  // the client must see the transfer fail rather than a whole short file.
  if (got < size) res.destroy();
  else res.end(buf);
}

async function writeOne(body: Readable, target: string, user: User, metadata: Record<string, string> | undefined): Promise<WrittenEntry> {
  let fd: number;
  try {
    fd = openForWrite(target, user);
  } catch (err) {
    body.resume();
    throw fsHttpError(err, target);
  }
  // The file stays open after the last write: openForWrite left the cut to
  // its new length to us, and it must happen before anyone can see the file
  // closed with the tail of what it held before.
  const out = createWriteStream('', { fd, highWaterMark: READ_CHUNK, autoClose: false });
  try {
    await pipeline(body, out);
  } catch (err) {
    // A failed stream closes its file itself. What was written is the file
    // then, as if it had been truncated at open.
    if (!out.closed) await new Promise<void>((resolve) => out.destroy().once('close', () => resolve()));
    try {
      truncateSync(target, out.bytesWritten);
    } catch {
      // Gone meanwhile: nothing to cut.
    }
    if ((err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR') throw new HttpError(400, 'the request body is not valid gzip');
    throw fsHttpError(err, target);
  }
  try {
    try {
      ftruncateSync(fd, out.bytesWritten);
    } finally {
      closeSync(fd);
    }
    if (metadata) writeMetadata(target, metadata);
  } catch (err) {
    throw fsHttpError(err, target);
  }
  return { name: basename(target), path: target, type: 'file', ...(metadata ? { metadata } : {}) };
}

function decodedBody(req: IncomingMessage): Readable {
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  if (encoding === 'identity') return req;
  if (encoding === 'gzip') return req.pipe(createGunzip());
  throw new HttpError(400, `content-encoding '${encoding}' is not supported (use gzip or none)`);
}

function multipart(req: IncomingMessage, body: Readable, params: URLSearchParams, user: User, metadata: Record<string, string> | undefined) {
  return new Promise<WrittenEntry[]>((resolve, reject) => {
    let parser: Busboy.Busboy;
    try {
      parser = Busboy({ headers: req.headers, preservePath: true });
    } catch (err) {
      reject(new HttpError(400, `malformed multipart request: ${(err as Error).message}`));
      return;
    }
    const pathParam = params.get('path');
    const written: WrittenEntry[] = [];
    let chain = Promise.resolve();
    let failed: unknown;
    let files = 0;
    parser.on('file', (field, stream, info) => {
      if (field !== 'file' || failed) {
        stream.resume();
        return;
      }
      files += 1;
      let target: string | undefined;
      if (pathParam && files === 1) target = pathParam;
      else if (pathParam) failed = new HttpError(400, "several files were sent with one 'path'; omit 'path' and give each part its target path as filename");
      else if (info.filename) target = info.filename;
      else failed = new HttpError(400, `file part ${files} has no filename and the request has no 'path'`);
      if (failed || !target) {
        stream.resume();
        return;
      }
      const abs = resolveUserPath(target, user);
      // Parts are written one after the other, in the order they arrive.
      const pass = stream.pipe(new PassThrough({ highWaterMark: READ_CHUNK }));
      chain = chain.then(() =>
        writeOne(pass, abs, user, metadata).then(
          (e) => void written.push(e),
          (err) => {
            failed ??= err;
            pass.resume();
          },
        ),
      );
    });
    parser.on('error', (err: Error) => {
      failed ??= new HttpError(400, `malformed multipart request: ${err.message}`);
      body.unpipe(parser);
      body.resume();
      chain.then(() => reject(failed));
    });
    parser.on('close', () => {
      chain.then(() => {
        if (failed) reject(failed);
        else if (written.length === 0) reject(new HttpError(400, "the multipart request has no part named 'file'"));
        else resolve(written);
      });
    });
    body.on('error', (err) => {
      failed ??= (err as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' ? new HttpError(400, 'the request body is not valid gzip') : err;
      parser.destroy(err);
    });
    body.pipe(parser);
  });
}

export async function postFile(req: IncomingMessage, res: ServerResponse, params: URLSearchParams, user: User): Promise<void> {
  const metadata = metadataFromHeaders(req.headers);
  const body = decodedBody(req);
  const type = (req.headers['content-type'] ?? '').toLowerCase();
  let written: WrittenEntry[];
  if (type.startsWith('multipart/form-data')) {
    written = await multipart(req, body, params, user, metadata);
  } else {
    const target = resolveUserPath(requirePath(params), user);
    written = [await writeOne(body, target, user, metadata)];
  }
  const json = JSON.stringify(written);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) });
  res.end(json);
}
