// HTTP/1.x as far as a relay needs it: the head of a message (start line and
// header fields) and where its body ends. Bodies are not decoded; a relay
// moves their bytes as they are, chunk framing included, and only counts them.
//
// Parsing is strict where a lenient reading could make the relay and the
// server behind it disagree about where a message ends (request smuggling):
// lines end in CRLF, no folded header lines, no whitespace before a colon,
// one Content-Length, no Content-Length next to Transfer-Encoding.

/** A failure that has an HTTP status of its own (400, 431, 501, 505, 502). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface Field {
  /** As sent. */
  name: string;
  lower: string;
  value: string;
}

interface Head {
  /** HTTP/1.0 or HTTP/1.1. */
  minor: 0 | 1;
  fields: Field[];
  /** Bytes of the head, up to and with the empty line. */
  size: number;
}

export interface RequestHead extends Head {
  method: string;
  target: string;
}

export interface ResponseHead extends Head {
  status: number;
  reason: string;
}

/** How a body is delimited. `close`: by the end of the connection (responses only). */
export type Framing = { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e\x80-\xff]+) HTTP\/(\d)\.(\d)$/;
// eslint-disable-next-line no-control-regex -- a reason phrase may not hold control characters
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d{2})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?$/;
const FIELD_LINE = /^([^:]*):[ \t]*(.*?)[ \t]*$/;
// eslint-disable-next-line no-control-regex -- the control characters a field value may not hold
const BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;
const DIGITS = /^\d{1,15}$/;

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const NOTHING = Buffer.alloc(0);

/**
 * The chunks of a head that is still arriving. They are joined once its end
 * may be among them: joining on every chunk would let a peer that sends a
 * byte at a time cost quadratic time.
 */
export class HeadChunks {
  private chunks: Buffer[] = [];
  private tail: Buffer = NOTHING;
  size = 0;

  /** Adds a chunk; true when the end of the head may be among the chunks now. */
  push(chunk: Buffer): boolean {
    const found =
      chunk.indexOf(CRLFCRLF) >= 0 || (this.tail.length > 0 && Buffer.concat([this.tail, chunk.subarray(0, 3)]).indexOf(CRLFCRLF) >= 0);
    this.chunks.push(chunk);
    this.size += chunk.length;
    this.tail = chunk.length >= 3 ? chunk.subarray(-3) : Buffer.concat([this.tail, chunk]).subarray(-3);
    return found;
  }

  /** All chunks as one buffer; empties this. */
  take(): Buffer {
    const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size);
    this.chunks = [];
    this.tail = NOTHING;
    this.size = 0;
    return all;
  }
}

/** Where the head that starts at 0 ends (after its empty line), or -1 while it is incomplete. */
export function headEnd(buf: Buffer): number {
  const at = buf.indexOf(CRLFCRLF);
  return at < 0 ? -1 : at + 4;
}

function lines(buf: Buffer, size: number, what: string): string[] {
  const text = buf.toString('latin1', 0, size - 4);
  const out = text.split('\r\n');
  for (const l of out) {
    if (l.includes('\n') || l.includes('\r')) throw new HttpError(400, `${what} has a line that does not end in CRLF`);
  }
  return out;
}

function fields(raw: string[], what: string): Field[] {
  const out: Field[] = [];
  for (let i = 1; i < raw.length; i++) {
    const l = raw[i]!;
    if (l[0] === ' ' || l[0] === '\t') throw new HttpError(400, `${what} has a folded header line; folding is not allowed`);
    const m = FIELD_LINE.exec(l);
    if (!m || !TOKEN.test(m[1]!)) throw new HttpError(400, `${what} has a malformed header line '${l.slice(0, 64)}'`);
    const value = m[2]!;
    if (BAD_VALUE.test(value)) throw new HttpError(400, `header '${m[1]}' has a control character in its value`);
    out.push({ name: m[1]!, lower: m[1]!.toLowerCase(), value });
  }
  return out;
}

/** Parses a request head of `size` bytes (from {@link headEnd}). */
export function parseRequestHead(buf: Buffer, size: number): RequestHead {
  const raw = lines(buf, size, 'the request');
  const m = REQUEST_LINE.exec(raw[0]!);
  if (!m) throw new HttpError(400, `malformed request line '${raw[0]!.slice(0, 64)}'`);
  if (m[3] !== '1' || (m[4] !== '0' && m[4] !== '1')) throw new HttpError(505, `HTTP/${m[3]}.${m[4]} is not supported; use HTTP/1.1`);
  return { method: m[1]!, target: m[2]!, minor: m[4] === '1' ? 1 : 0, fields: fields(raw, 'the request'), size };
}

/** Parses a response head of `size` bytes (from {@link headEnd}). */
export function parseResponseHead(buf: Buffer, size: number): ResponseHead {
  const raw = lines(buf, size, 'the response');
  const m = STATUS_LINE.exec(raw[0]!);
  if (!m) throw new HttpError(502, `malformed status line '${raw[0]!.slice(0, 64)}'`);
  return { status: Number(m[2]), reason: m[3] ?? '', minor: m[1] === '1' ? 1 : 0, fields: fields(raw, 'the response'), size };
}

/** The value of the first field called `lower`. */
export function field(head: { fields: Field[] }, lower: string): string | undefined {
  for (const f of head.fields) if (f.lower === lower) return f.value;
  return undefined;
}

/** The comma-separated tokens of every field called `lower`, lowercased. */
export function tokens(head: { fields: Field[] }, lower: string): string[] {
  const out: string[] = [];
  for (const f of head.fields) {
    if (f.lower !== lower) continue;
    for (const t of f.value.split(',')) {
      const v = t.trim().toLowerCase();
      if (v) out.push(v);
    }
  }
  return out;
}

/**
 * The body's length. A response may repeat the same length (RFC 9110 §8.6);
 * a request may not, as Node's parser on the library path will not take one.
 */
function contentLength(head: { fields: Field[] }, status: number, once: boolean): number | undefined {
  let length: number | undefined;
  for (const f of head.fields) {
    if (f.lower !== 'content-length') continue;
    for (const part of f.value.split(',')) {
      const v = part.trim();
      if (!DIGITS.test(v)) throw new HttpError(status, `content-length '${f.value}' is not a number of bytes`);
      if (length !== undefined && (once || Number(v) !== length)) {
        throw new HttpError(status, once ? 'the request has more than one content-length' : 'the message has two different content-lengths');
      }
      length = Number(v);
    }
  }
  return length;
}

/** How the body of a request ends. */
export function requestFraming(head: RequestHead): Framing {
  const te = tokens(head, 'transfer-encoding');
  const length = contentLength(head, 400, true);
  if (te.length) {
    if (length !== undefined) throw new HttpError(400, 'the request has both content-length and transfer-encoding');
    if (te.length !== 1 || te[0] !== 'chunked') throw new HttpError(501, `transfer-encoding '${te.join(', ')}' is not supported; only chunked is`);
    if (head.minor === 0) throw new HttpError(400, 'an HTTP/1.0 request cannot be chunked');
    return { kind: 'chunked' };
  }
  return { kind: 'length', length: length ?? 0 };
}

/** How the body of a response to a `method` request ends. */
export function responseFraming(head: ResponseHead, method: string): Framing {
  if (method === 'HEAD' || head.status < 200 || head.status === 204 || head.status === 304) return { kind: 'length', length: 0 };
  // As on the library path (undici): what a client might frame otherwise than the relay is not passed on.
  const te = tokens(head, 'transfer-encoding');
  const length = contentLength(head, 502, false);
  if (te.length) {
    if (te.length !== 1 || te[0] !== 'chunked') throw new HttpError(502, `transfer-encoding '${te.join(', ')}', which the proxy does not pass on`);
    if (length !== undefined) throw new HttpError(502, 'the response has both content-length and transfer-encoding');
    return { kind: 'chunked' };
  }
  return length === undefined ? { kind: 'close' } : { kind: 'length', length };
}

const enum Chunk {
  Size,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  TrailerStart,
  Trailer,
  TrailerLf,
  EndLf,
  Done,
}

const MAX_SIZE_DIGITS = 13; // below 2^53
const MAX_CHUNK_META = 16 * 1024; // extensions and trailers, per message

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/**
 * Finds the end of one body in the bytes that follow its head. Feed it what
 * arrives; it says how much of each piece belongs to the body. The rest is the
 * next message (or, on a connection that should be quiet, a fault).
 */
export class BodyCounter {
  private remaining: number;
  private state = Chunk.Size;
  private digits = 0;
  private meta = 0;
  /** The size of the chunk last begun. */
  private chunkSize = 0;
  /** True once the whole body has been seen. */
  done: boolean;

  constructor(
    readonly framing: Framing,
    private readonly status: number,
  ) {
    this.remaining = framing.kind === 'length' ? framing.length : 0;
    this.done = framing.kind === 'length' && framing.length === 0;
  }

  /** For a body of known length, the bytes of it still to come; otherwise undefined. */
  get lengthLeft(): number | undefined {
    return this.framing.kind === 'length' ? this.remaining : undefined;
  }

  /** Counts `n` bytes of a body of known length that moved without passing through {@link take}. */
  skip(n: number): void {
    if (this.framing.kind !== 'length' || n > this.remaining) throw new Error(`cannot skip ${n} bytes of this body`);
    this.remaining -= n;
    this.done = this.remaining === 0;
  }

  /**
   * Inside the data of a chunk of at least `min` bytes: what is left of that
   * data. 0 anywhere else.
   */
  chunkDataLeft(min: number): number {
    return this.framing.kind === 'chunked' && this.state === Chunk.Data && this.chunkSize >= min ? this.remaining : 0;
  }

  /**
   * The body went on, past {@link take}, from inside a chunk's data to the
   * end of the data of a later chunk (or the same): its CRLF comes next.
   */
  skipToChunkEnd(): void {
    if (this.framing.kind !== 'chunked' || this.state !== Chunk.Data) throw new Error('not inside the data of a chunk');
    this.remaining = 0;
    this.state = Chunk.DataCr;
  }

  /** How many bytes of `buf`, from `start`, belong to the body. */
  take(buf: Buffer, start = 0): number {
    if (this.done) return 0;
    const avail = buf.length - start;
    switch (this.framing.kind) {
      case 'close':
        return avail;
      case 'length': {
        const n = Math.min(avail, this.remaining);
        this.remaining -= n;
        this.done = this.remaining === 0;
        return n;
      }
      case 'chunked':
        return this.chunked(buf, start) - start;
    }
  }

  private fail(message: string): never {
    throw new HttpError(this.status, `bad chunked body: ${message}`);
  }

  private metaByte(): void {
    if (++this.meta > MAX_CHUNK_META) this.fail('chunk extensions or trailers are too long');
  }

  /** A byte of a chunk extension or a trailer line: text up to the CR, which leads to `atCr`. */
  private lineByte(c: number, atCr: Chunk, line: 'chunk size' | 'trailer'): void {
    this.metaByte();
    if (c === 0x0d) this.state = atCr;
    else if (c === 0x0a) this.fail(`${line} line does not end in CRLF`);
    else if ((c < 0x20 && c !== 0x09) || c === 0x7f) this.fail(`control character in a ${line} line`);
  }

  /** Returns the index just past the last body byte in `buf`. */
  private chunked(buf: Buffer, i: number): number {
    const end = buf.length;
    while (i < end) {
      switch (this.state) {
        case Chunk.Data: {
          const n = Math.min(end - i, this.remaining);
          this.remaining -= n;
          i += n;
          if (this.remaining === 0) this.state = Chunk.DataCr;
          continue;
        }
        case Chunk.Size: {
          const c = buf[i]!;
          const h = hexValue(c);
          if (h >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) this.fail('chunk size is too large');
            this.remaining = this.remaining * 16 + h;
          } else if (this.digits === 0) {
            this.fail('chunk size is not a hex number');
          } else if (c === 0x3b /* ; */) {
            this.state = Chunk.Extension;
          } else if (c === 0x0d) {
            this.state = Chunk.SizeLf;
          } else if (c === 0x0a) {
            this.fail('chunk size line does not end in CRLF');
          } else {
            this.fail('unexpected byte after chunk size');
          }
          break;
        }
        case Chunk.Extension:
          this.lineByte(buf[i]!, Chunk.SizeLf, 'chunk size');
          break;
        case Chunk.SizeLf:
          if (buf[i] !== 0x0a) this.fail('chunk size line does not end in CRLF');
          this.digits = 0;
          this.chunkSize = this.remaining;
          this.state = this.remaining === 0 ? Chunk.TrailerStart : Chunk.Data;
          break;
        case Chunk.DataCr:
          if (buf[i] !== 0x0d) this.fail('chunk data is longer than its size');
          this.state = Chunk.DataLf;
          break;
        case Chunk.DataLf:
          if (buf[i] !== 0x0a) this.fail('chunk data does not end in CRLF');
          this.state = Chunk.Size;
          break;
        case Chunk.TrailerStart: {
          const c = buf[i]!;
          if (c === 0x0d) this.state = Chunk.EndLf;
          else if (c === 0x20 || c === 0x09) this.fail('folded trailer line');
          else if (c === 0x0a) this.fail('trailer section has a line that does not end in CRLF');
          else if (c < 0x20 || c === 0x7f) this.fail('control character in a trailer');
          else {
            this.metaByte();
            this.state = Chunk.Trailer;
          }
          break;
        }
        case Chunk.Trailer:
          this.lineByte(buf[i]!, Chunk.TrailerLf, 'trailer');
          break;
        case Chunk.TrailerLf:
          if (buf[i] !== 0x0a) this.fail('trailer line does not end in CRLF');
          this.state = Chunk.TrailerStart;
          break;
        case Chunk.EndLf:
          if (buf[i] !== 0x0a) this.fail('last chunk does not end in CRLF');
          this.state = Chunk.Done;
          this.done = true;
          return i + 1;
        case Chunk.Done:
          return i;
      }
      i++;
    }
    return i;
  }
}
