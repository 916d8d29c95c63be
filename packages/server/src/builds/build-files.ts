// The files of builds' COPY steps: tar archives that clients upload once
// (gzip-compressed or not), kept by the hash the SDK computes of them, and
// the signed, short-lived URLs they upload to. A compressed upload is kept
// unzipped: every COPY of it would otherwise unzip it again, and that was
// most of what a COPY of a few MiB took.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createReadStream, createWriteStream, closeSync, existsSync, mkdirSync, openSync, readSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Parser } from 'tar';
import { badRequest } from '../errors.js';

/** The SDKs' files hash: sha256, hex. */
export const FILES_HASH = /^[0-9a-f]{64}$/;

/** How long an upload URL is good for. */
export const UPLOAD_URL_TTL_MS = 10 * 60_000;

export class BuildFiles {
  private readonly dir: string;
  private readonly tmp: string;
  /** Signs upload URLs; a new one at each start, as URLs live minutes. */
  private readonly secret = randomBytes(32);

  constructor(home: string, readonly maxUploadBytes: number) {
    this.dir = join(home, 'build-files');
    this.tmp = join(this.dir, 'tmp');
    mkdirSync(this.tmp, { recursive: true, mode: 0o700 });
    // Uploads, and archives being unpacked, cut off by a crash or a restart.
    for (const name of readdirSync(this.tmp)) rmSync(join(this.tmp, name), { recursive: true, force: true });
  }

  path(hash: string): string {
    if (!FILES_HASH.test(hash)) throw badRequest(`files hash '${hash}' is not a sha256 in hex`);
    return join(this.dir, `${hash}.tar`);
  }

  /**
   * Where the files `hash` are kept unpacked, made by the first COPY of
   * them (the runtime's copy tool, on the host), with the scratch directory
   * it is made in before it is renamed there.
   */
  unpacked(hash: string): { dir: string; scratch: string } {
    return { dir: `${this.path(hash).slice(0, -'.tar'.length)}.unpacked`, scratch: this.tmp };
  }

  has(hash: string): boolean {
    return existsSync(this.path(hash));
  }

  private signature(templateId: string, hash: string, expires: number): Buffer {
    return createHmac('sha256', this.secret).update(`${templateId}\n${hash}\n${expires}`).digest();
  }

  /** The query of an upload URL for the files `hash` of a template's build. */
  sign(templateId: string, hash: string, now = Date.now()): string {
    const expires = now + UPLOAD_URL_TTL_MS;
    return new URLSearchParams({ expires: String(expires), signature: this.signature(templateId, hash, expires).toString('base64url') }).toString();
  }

  /** Whether the query of an upload URL is one `sign` made and has not expired. */
  verify(templateId: string, hash: string, query: { expires?: string; signature?: string }, now = Date.now()): string | undefined {
    const expires = Number(query.expires);
    if (!Number.isSafeInteger(expires) || !query.signature) return 'the upload URL is not signed';
    if (expires < now) return 'the upload URL has expired; ask for another';
    const given = Buffer.from(query.signature, 'base64url');
    const expected = this.signature(templateId, hash, expires);
    return given.length === expected.length && timingSafeEqual(given, expected) ? undefined : 'the upload URL signature does not match';
  }

  /**
   * Takes an upload: written beside the kept files, unzipped when it is
   * gzip-compressed (and no larger unzipped than the largest upload; a
   * larger one is kept compressed), read back through a tar parser to
   * check that it is a whole archive, and only then moved into place under
   * its hash.
   */
  async receive(hash: string, body: Readable): Promise<void> {
    const target = this.path(hash);
    const part = join(this.tmp, `${hash}.${randomBytes(6).toString('hex')}`);
    const plain = `${part}.plain`;
    try {
      let size = 0;
      body.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > this.maxUploadBytes) body.destroy(badRequest(`the upload is larger than ${this.maxUploadBytes} bytes`));
      });
      await pipeline(body, createWriteStream(part, { mode: 0o600 }));
      const kept = isGzip(part) && (await gunzipWithin(part, plain, this.maxUploadBytes)) ? plain : part;
      await checkArchive(kept);
      // What was unpacked of an earlier upload under this hash is not this one's.
      rmSync(this.unpacked(hash).dir, { recursive: true, force: true });
      renameSync(kept, target);
    } finally {
      rmSync(part, { force: true });
      rmSync(plain, { force: true });
    }
  }
}

/** Whether `file` starts as a gzip stream does. */
function isGzip(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(2);
    return readSync(fd, head, 0, 2, 0) === 2 && head[0] === 0x1f && head[1] === 0x8b;
  } finally {
    closeSync(fd);
  }
}

/**
 * Unzips `from` into `to`: false when it is not whole gzip or holds more
 * than `maxBytes` unzipped (what was written of `to` is the caller's to
 * remove), so that the compressed file is kept and checked as it is.
 */
async function gunzipWithin(from: string, to: string, maxBytes: number): Promise<boolean> {
  let bytes = 0;
  const bound = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      done(bytes > maxBytes ? new Error('too large unzipped') : null, chunk);
    },
  });
  try {
    await pipeline(createReadStream(from), createGunzip(), bound, createWriteStream(to, { mode: 0o600 }));
    return true;
  } catch {
    return false;
  }
}

/** Reads a whole tar archive (gzip or not); a 400 naming what is wrong when it is not one. */
async function checkArchive(file: string): Promise<void> {
  let entries = 0;
  let problem: string | undefined;
  const parser = new Parser({
    strict: true,
    onReadEntry: (entry) => {
      entries++;
      entry.resume();
    },
  });
  parser.on('warn', (_code: string, message: string) => {
    problem ??= message;
  });
  try {
    await pipeline(createReadStream(file), parser);
  } catch (err) {
    problem ??= (err as Error).message;
  }
  if (problem) throw badRequest(`the upload is not a tar archive: ${problem}`);
  if (entries === 0) throw badRequest('the upload is an empty archive');
}
