// A small HTTP/1.1 client for envd-client's calls in Node (the /files
// transfers, and the Connect calls of node-transport.ts) when the caller gave
// no fetch of their own.
//
// Why not node:http: its parser runs in C++ and copies every piece of a body
// it reads into a new Buffer, and each request builds a ClientRequest, an
// IncomingMessage and their streams. For a 1 MiB download through the sandbox
// proxy that was about 1.1 of the client's 1.8 ms of CPU
// (tools/bench/probes/raw-download.mjs). Here the head is parsed in JS and the
// body is handed on in the buffers the socket read it into, without a copy;
// connections are kept per origin and used again.
//
// What it understands of a response: bodies framed by Content-Length, chunked,
// or by the end of the connection; 1xx heads before the answer; Connection:
// close; HTTP/1.0. What it does not do: pipelining, upgrades, proxies. Content
// codings (gzip) are left to the caller, with `Content-Encoding` in the headers.
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { joinBytes } from './bytes.js';

export interface Http1Request {
  method: string;
  headers: Record<string, string>;
  /** The whole body, sent in order with its Content-Length; none for a GET. */
  body?: Uint8Array[];
  /** Fails the request with its reason and closes the connection. */
  signal: AbortSignal;
  /**
   * Sending it twice does what sending it once does (a GET, a file written
   * whole): it may go again when a kept connection turns out to be closed.
   */
  idempotent?: boolean;
}

/** Receives a body, piece by piece; exactly one of `end` and `fail` ends it. */
export interface BodySink {
  /** A piece of the body: a view of the buffer the socket read it into, not a copy. */
  chunk(bytes: Buffer): void;
  end(): void;
  fail(err: Error): void;
}

/** Flow control of a body being read. */
export interface BodyFlow {
  /** Stops reading the socket until `resume`. */
  pause(): void;
  resume(): void;
  /** Drops the rest of the body: the connection is closed, the sink hears nothing more. */
  cancel(): void;
}

/** An answer whose head is in; its body waits for `read`. */
export interface Http1Response {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  /** One header's value (repeated ones joined with ', '), without building `headers`. */
  header(name: string): string | undefined;
  /** The body's length when the answer declares it (Content-Length, no Transfer-Encoding). */
  readonly length: number | undefined;
  /** Starts reading the body into `sink`; once only. */
  read(sink: BodySink): BodyFlow;
}

/** Most heads are well under 1 KiB; Node's own limit is 16 KiB. */
const MAX_HEAD_BYTES = 64 * 1024;
/** Chunk-size lines and trailer lines. */
const MAX_LINE_BYTES = 8 * 1024;
/** An idle connection is closed after this: under the 5 s a Node http server keeps one by default (the sandbox proxy and envd keep 65 s). */
const IDLE_MS = 4_000;
/**
 * Where a plain connection's reads go: one after another into a block of
 * READ_BLOCK_BYTES, each into the room the ones before it left, and the next
 * block once less than READ_MIN_BYTES is left. A piece handed on is a view
 * of its block that no later read touches, so nothing is copied, and at most
 * READ_MIN_BYTES of a block (one eighth) is never filled. A piece the caller
 * keeps keeps its whole block, as a slice of Node's Buffer pool keeps the pool.
 *
 * Node's own reads go into a new 64 KiB buffer each, so a 1 MiB body came as
 * at least 16 pieces, each taken through the socket's stream machinery and
 * then the body's. Measured alternately on one sandbox through the proxy, SDK
 * reads took: 1 MiB 2.56 -> 2.04 ms, 64 MiB 45 -> 39 ms, 256 MiB 170 -> 110
 * ms; 64 MiB of stdout 188 -> 179 ms.
 */
const READ_BLOCK_BYTES = 256 * 1024;
const READ_MIN_BYTES = 32 * 1024;

class ReadRoom {
  #room: Buffer | undefined;

  /** The buffer the next read goes into. */
  next(): Buffer {
    if (!this.#room || this.#room.length < READ_MIN_BYTES) this.#room = Buffer.allocUnsafeSlow(READ_BLOCK_BYTES);
    return this.#room;
  }

  /** `n` bytes were read into `buf` (the last `next()`): they, as a view; the rest is the next room. */
  took(buf: Buffer, n: number): Buffer {
    this.#room = buf.subarray(n);
    return buf.subarray(0, n);
  }
}

/** Idle connections kept per origin; more are closed when they come free. */
const MAX_IDLE_PER_ORIGIN = 8;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: ([^\r\n]*))?$/;

/** An answer that is not HTTP/1.1, or breaks its own framing. */
function malformed(what: string): Error {
  return Object.assign(new Error(`malformed HTTP response: ${what}`), { code: 'ERR_MALFORMED_RESPONSE' });
}

/** The connection ended where the answer had more to come (its code is Node's for a reset). */
export class CutShort extends Error {
  readonly code = 'ECONNRESET';
  constructor() {
    super('the connection closed before the answer ended');
  }
}

/**
 * Sends a request and resolves once the answer's head is in. A kept
 * connection that the server closed as it was taken fails before any byte
 * comes back; an idempotent request then goes again on another (a fresh
 * connection's failure is final). Any other request fails: the server may
 * have acted on it before the connection went.
 */
export async function request(url: string, req: Http1Request): Promise<Http1Response> {
  const target = new URL(url);
  if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new TypeError(`unsupported protocol '${target.protocol}' in ${url}`);
  const head = requestHead(target, req);
  const origin = `${target.protocol}//${target.host}`;
  for (;;) {
    if (req.signal.aborted) throw req.signal.reason;
    const kept = pool.take(origin);
    const conn = kept ?? Connection.open(target, origin);
    try {
      return await new Exchange(conn, req.signal).send(head, req.body);
    } catch (err) {
      if (!(kept && req.idempotent && err instanceof NoAnswer) || req.signal.aborted) throw err instanceof NoAnswer ? err.cause : err;
    }
  }
}

/** Closes every idle connection (tests; a process about to exit need not: idle ones do not keep it alive). */
export function closeIdleConnections(): void {
  pool.clear();
}

function requestHead(target: URL, { method, headers, body }: Http1Request): string {
  if (!TOKEN.test(method)) throw new TypeError(`invalid HTTP method '${method}'`);
  let head = `${method} ${target.pathname}${target.search} HTTP/1.1\r\n`;
  let host = true;
  let auth = true;
  for (const name of Object.keys(headers)) {
    const value = headers[name]!;
    if (!TOKEN.test(name)) throw new TypeError(`invalid header name '${name}'`);
    if (!FIELD_VALUE.test(value)) throw new TypeError(`invalid character in the value of header '${name}'`);
    const lower = name.toLowerCase();
    if (lower === 'content-length' || lower === 'transfer-encoding') throw new TypeError(`header '${name}' is the client's own to set`);
    // The caller's Host and Authorization win over the URL's, as with node:http.
    if (lower === 'host') host = false;
    if (lower === 'authorization') auth = false;
    head += `${name}: ${value}\r\n`;
  }
  if (host) head += `Host: ${target.host}\r\n`;
  if (auth && (target.username || target.password)) {
    const credentials = `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`;
    head += `Authorization: Basic ${Buffer.from(credentials).toString('base64')}\r\n`;
  }
  if (body !== undefined) head += `Content-Length: ${body.reduce((n, p) => n + p.length, 0)}\r\n`;
  return head + '\r\n';
}

/** What a connection tells the exchange it carries. */
interface Owner {
  data(chunk: Buffer): void;
  /** The server finished sending (FIN). */
  end(): void;
  /** The connection failed or closed. */
  lost(err: Error): void;
}

/** One socket and the exchange it carries now; between exchanges it waits in the pool. */
class Connection {
  owner: Owner | undefined;
  /** The pool's list it sits in while idle. */
  idleIn: Connection[] | undefined;

  private constructor(
    readonly socket: Socket,
    readonly origin: string,
  ) {
    socket.setNoDelay(true);
    // A TLS socket's pieces; a plain one reads through `onread` (open) and
    // emits none, though the listener still sets it reading.
    socket.on('data', (chunk: Buffer) => this.received(chunk));
    socket.on('end', () => this.owner?.end());
    // 'error' is followed by 'close'; a close of our own has no owner left.
    socket.on('error', (err) => this.#lost(err));
    socket.on('close', () => this.#lost(new CutShort()));
    socket.on('timeout', () => {
      if (!this.owner) socket.destroy();
    });
  }

  received(chunk: Buffer): void {
    if (this.owner) this.owner.data(chunk);
    else this.socket.destroy(); // nothing is asked of an idle connection
  }

  static open(target: URL, origin: string): Connection {
    const host = target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname;
    const https = target.protocol === 'https:';
    const port = Number(target.port) || (https ? 443 : 80);
    if (https) return new Connection(tlsConnect({ host, port, servername: isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] }), origin);
    // TLS decrypts into buffers of its own; a plain socket reads into ours.
    const room = new ReadRoom();
    const socket = netConnect({
      host,
      port,
      onread: {
        buffer: () => room.next(),
        callback: (n: number, buf: Uint8Array) => {
          conn.received(room.took(buf as Buffer, n));
          // Back-pressure pauses the socket itself (Exchange, the pool), as with 'data'.
          return true;
        },
      },
    });
    // Nothing is read before the connection is made, so `conn` is there by then.
    const conn = new Connection(socket, origin);
    return conn;
  }

  #lost(err: Error): void {
    pool.forget(this);
    const owner = this.owner;
    this.owner = undefined;
    owner?.lost(err);
  }

  destroy(): void {
    this.owner = undefined;
    pool.forget(this);
    this.socket.destroy();
  }
}

class Pool {
  readonly #idle = new Map<string, Connection[]>();

  take(origin: string): Connection | undefined {
    const list = this.#idle.get(origin);
    for (let conn = list?.pop(); conn; conn = list?.pop()) {
      conn.idleIn = undefined;
      if (conn.socket.destroyed) continue;
      conn.socket.setTimeout(0);
      conn.socket.ref();
      return conn;
    }
    return undefined;
  }

  /** Keeps a connection whose last answer was read to its end, unless enough are kept already. */
  give(conn: Connection): void {
    let list = this.#idle.get(conn.origin);
    if (!list) this.#idle.set(conn.origin, (list = []));
    if (list.length >= MAX_IDLE_PER_ORIGIN || conn.socket.destroyed) {
      conn.destroy();
      return;
    }
    conn.owner = undefined;
    conn.idleIn = list;
    conn.socket.setTimeout(IDLE_MS);
    conn.socket.unref();
    // Read while idle, so that the server's close is seen (and anything it sends refused).
    conn.socket.resume();
    list.push(conn);
  }

  forget(conn: Connection): void {
    const list = conn.idleIn;
    if (!list) return;
    conn.idleIn = undefined;
    const at = list.indexOf(conn);
    if (at >= 0) list.splice(at, 1);
  }

  clear(): void {
    for (const list of this.#idle.values()) for (const conn of [...list]) conn.destroy();
    this.#idle.clear();
  }
}

const pool = new Pool();

/** A kept connection that failed before the answer began: the request may go again. */
class NoAnswer extends Error {
  constructor(override readonly cause: Error) {
    super(cause.message);
  }
}

type Framing =
  | { kind: 'none' }
  | { kind: 'length'; remaining: number }
  | { kind: 'chunked'; decoder: ChunkedDecoder }
  | { kind: 'close' };

/** One request and its answer on a connection. */
class Exchange implements Owner, Http1Response {
  status = 0;
  statusText = '';
  length: number | undefined;
  #raw: string[] = [];
  #headers: Headers | undefined;
  /** Bytes of the head read so far (the head phase), or undefined once it is parsed. */
  #head: Buffer | undefined = Buffer.alloc(0);
  #received = false;
  #framing: Framing = { kind: 'none' };
  #reusable = false;
  /** Body pieces that came before `read`, and the end, if it came too. */
  #early: Buffer[] = [];
  #earlyEnd: Error | null | undefined;
  #sink: BodySink | undefined;
  #done = false;
  /** The whole request has left: a connection whose request is still going out is not used again. */
  #sent = false;
  #settleHead!: { resolve(res: Http1Response): void; reject(err: Error): void };
  readonly #onAbort = (): void => {
    this.conn.destroy();
    this.#settleHead.reject(this.signal.reason as Error);
  };

  constructor(
    readonly conn: Connection,
    readonly signal: AbortSignal,
  ) {}

  send(head: string, body: Uint8Array[] | undefined): Promise<Http1Response> {
    return new Promise<Http1Response>((resolve, reject) => {
      this.#settleHead = { resolve, reject };
      this.signal.addEventListener('abort', this.#onAbort, { once: true });
      this.conn.owner = this;
      const socket = this.conn.socket;
      // Corked, the head and the body leave in one write; the pieces are not copied into one array.
      const pieces = body?.filter((piece) => piece.length > 0) ?? [];
      const sent = (): void => {
        this.#sent = true;
      };
      socket.cork();
      socket.write(head, 'latin1', pieces.length === 0 ? sent : undefined);
      for (let i = 0; i < pieces.length; i++) socket.write(pieces[i]!, i === pieces.length - 1 ? sent : undefined);
      socket.uncork();
    });
  }

  get headers(): Headers {
    if (!this.#headers) {
      this.#headers = new Headers();
      for (let i = 0; i < this.#raw.length; i += 2) this.#headers.append(this.#raw[i]!, this.#raw[i + 1]!);
    }
    return this.#headers;
  }

  header(name: string): string | undefined {
    const wanted = name.toLowerCase();
    let value: string | undefined;
    for (let i = 0; i < this.#raw.length; i += 2) {
      if (this.#raw[i]!.toLowerCase() === wanted) value = value === undefined ? this.#raw[i + 1] : `${value}, ${this.#raw[i + 1]}`;
    }
    return value;
  }

  data(chunk: Buffer): void {
    this.#received = true;
    if (this.#head === undefined) {
      this.#body(chunk);
      return;
    }
    const bytes = this.#head.length === 0 ? chunk : Buffer.concat([this.#head, chunk]);
    try {
      let at = 0;
      for (;;) {
        const end = bytes.indexOf('\r\n\r\n', at, 'latin1');
        if ((end < 0 ? bytes.length : end) - at > MAX_HEAD_BYTES) throw malformed(`a head longer than ${MAX_HEAD_BYTES} bytes`);
        if (end < 0) {
          this.#head = bytes.subarray(at);
          return;
        }
        const informational = this.#parseHead(bytes.toString('latin1', at, end));
        at = end + 4;
        if (!informational) break;
      }
      this.#head = undefined;
      this.signal.removeEventListener('abort', this.#onAbort);
      // Until the body is asked for, the socket is not read.
      this.conn.socket.pause();
      if (this.#framing.kind === 'none') this.#finish(bytes.length - at);
      else if (at < bytes.length) this.#body(bytes.subarray(at));
      this.#settleHead.resolve(this);
    } catch (err) {
      this.signal.removeEventListener('abort', this.#onAbort);
      this.conn.destroy();
      this.#settleHead.reject(err as Error);
    }
  }

  /** Parses one head; true when it was a 1xx, with the answer still to come. */
  #parseHead(text: string): boolean {
    const lines = text.split('\r\n');
    const statusLine = STATUS_LINE.exec(lines[0]!);
    if (!statusLine) throw malformed(`status line '${lines[0]!.slice(0, 80)}'`);
    const status = Number(statusLine[2]);
    if (status === 101) throw malformed('101 Switching Protocols to an ordinary request');
    if (status < 100 || status > 599) throw malformed(`status ${status}`);
    if (status < 200) return true;
    const raw: string[] = [];
    let length: string | undefined;
    let transferEncoding = '';
    let connection = '';
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(':');
      const name = colon > 0 ? line.slice(0, colon) : '';
      if (!TOKEN.test(name)) throw malformed(`header line '${line.slice(0, 80)}'`);
      const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
      raw.push(name, value);
      switch (name.toLowerCase()) {
        case 'content-length':
          if (!/^\d{1,15}$/.test(value) || (length !== undefined && length !== value)) throw malformed(`Content-Length '${value}'`);
          length = value;
          break;
        case 'transfer-encoding':
          transferEncoding += (transferEncoding ? ',' : '') + value;
          break;
        case 'connection':
          connection += (connection ? ',' : '') + value;
          break;
      }
    }
    this.status = status;
    this.statusText = statusLine[3] ?? '';
    this.#raw = raw;
    const closes = statusLine[1] === '0' || hasToken(connection, 'close');
    if (status === 204 || status === 304) {
      this.#framing = { kind: 'none' };
    } else if (transferEncoding) {
      // Transfer-Encoding overrides Content-Length; chunked must come last, or the body runs to the close.
      const codings = transferEncoding.split(',').map((c) => c.trim().toLowerCase());
      this.#framing = codings.at(-1) === 'chunked' ? { kind: 'chunked', decoder: new ChunkedDecoder() } : { kind: 'close' };
    } else if (length !== undefined) {
      this.length = Number(length);
      this.#framing = this.length === 0 ? { kind: 'none' } : { kind: 'length', remaining: this.length };
    } else {
      this.#framing = { kind: 'close' };
    }
    this.#reusable = !closes && this.#framing.kind !== 'close' && !(transferEncoding && length !== undefined);
    return false;
  }

  read(sink: BodySink): BodyFlow {
    if (this.#sink) throw new Error('the body is being read already');
    this.#sink = sink;
    const early = this.#early;
    this.#early = [];
    for (const piece of early) sink.chunk(piece);
    if (this.#earlyEnd !== undefined) {
      if (this.#earlyEnd === null) sink.end();
      else sink.fail(this.#earlyEnd);
    } else {
      this.conn.socket.resume();
    }
    return {
      pause: () => {
        if (!this.#done) this.conn.socket.pause();
      },
      resume: () => {
        if (!this.#done) this.conn.socket.resume();
      },
      cancel: () => {
        if (this.#done) return;
        this.#done = true;
        this.conn.destroy();
      },
    };
  }

  #emit(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.#sink) this.#sink.chunk(piece);
    else this.#early.push(piece);
  }

  /** Takes body bytes through the framing. */
  #body(bytes: Buffer): void {
    if (this.#done) return;
    const framing = this.#framing;
    try {
      switch (framing.kind) {
        case 'length': {
          const take = Math.min(framing.remaining, bytes.length);
          this.#emit(take === bytes.length ? bytes : bytes.subarray(0, take));
          framing.remaining -= take;
          if (framing.remaining === 0) this.#finish(bytes.length - take);
          return;
        }
        case 'chunked': {
          const rest = framing.decoder.push(bytes, (piece) => this.#emit(piece));
          if (rest >= 0) this.#finish(rest);
          return;
        }
        case 'close':
          this.#emit(bytes);
          return;
        // 'none' finished the answer with its head: #done is set, and no body bytes get here.
      }
    } catch (err) {
      this.#fail(err as Error);
    }
  }

  /** The answer is complete; `extra` bytes came after it. */
  #finish(extra = 0): void {
    if (this.#done) return;
    this.#done = true;
    // Bytes past the answer were never asked for: the connection is not trusted again.
    // Nor is one whose request has not all gone out (an early answer, as a refusal can be).
    if (this.#reusable && extra === 0 && this.#sent) pool.give(this.conn);
    else this.conn.destroy();
    if (this.#sink) this.#sink.end();
    else this.#earlyEnd = null;
  }

  #fail(err: Error): void {
    if (this.#done) return;
    this.#done = true;
    this.conn.destroy();
    if (this.#sink) this.#sink.fail(err);
    else this.#earlyEnd = err;
  }

  end(): void {
    if (this.#head === undefined && this.#framing.kind === 'close') this.#finish();
    // Otherwise 'close' follows and tells the loss.
  }

  lost(err: Error): void {
    if (this.#head !== undefined) {
      this.signal.removeEventListener('abort', this.#onAbort);
      this.#head = undefined;
      this.#done = true;
      this.#settleHead.reject(this.#received ? err : new NoAnswer(err));
      return;
    }
    // A body that runs to the close ends with 'end' (a FIN); a loss without one is a failure for every framing.
    this.#fail(err);
  }
}

function hasToken(list: string, token: string): boolean {
  return list.split(',').some((t) => t.trim().toLowerCase() === token);
}

/** Reads a chunked body (RFC 9112 §7.1): size lines, data, and trailers, which are dropped. */
class ChunkedDecoder {
  #state: 'size' | 'data' | 'data-end' | 'trailer' = 'size';
  #remaining = 0;
  #line = '';

  /** Hands the data in `bytes` to `emit`; returns how many bytes follow the body's end, or -1 while it goes on. */
  push(bytes: Buffer, emit: (piece: Buffer) => void): number {
    let at = 0;
    while (at < bytes.length) {
      if (this.#state === 'data') {
        const take = Math.min(this.#remaining, bytes.length - at);
        emit(bytes.subarray(at, at + take));
        at += take;
        this.#remaining -= take;
        if (this.#remaining === 0) this.#state = 'data-end';
        continue;
      }
      const newline = bytes.indexOf(10, at);
      const end = newline < 0 ? bytes.length : newline;
      this.#line += bytes.toString('latin1', at, end);
      if (this.#line.length > MAX_LINE_BYTES) throw malformed(`a chunk line longer than ${MAX_LINE_BYTES} bytes`);
      at = end + 1;
      if (newline < 0) break;
      const line = this.#line.endsWith('\r') ? this.#line.slice(0, -1) : this.#line;
      this.#line = '';
      switch (this.#state) {
        case 'size': {
          const size = (line.split(';', 1)[0] ?? '').trim();
          if (!/^[0-9a-fA-F]{1,12}$/.test(size)) throw malformed(`chunk size '${line.slice(0, 40)}'`);
          this.#remaining = parseInt(size, 16);
          this.#state = this.#remaining === 0 ? 'trailer' : 'data';
          break;
        }
        case 'data-end':
          if (line !== '') throw malformed('chunk data longer than its size');
          this.#state = 'size';
          break;
        case 'trailer':
          if (line === '') return bytes.length - at;
          break;
      }
    }
    return -1;
  }
}

/** Drops a body that will not be read: the connection is closed. */
export function dropBody(res: Http1Response): void {
  res.read({ chunk() {}, end() {}, fail() {} }).cancel();
}

/** How much of a body a stream holds unread before the socket stops being read. */
const STREAM_QUEUE_BYTES = 256 * 1024;

/** The whole body, in one array of its own (sized up front when the length is declared). */
export function bytesOf(res: Http1Response, signal: AbortSignal): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const declared = res.length;
    const whole = declared === undefined ? undefined : new Uint8Array(declared);
    const pieces: Uint8Array[] = [];
    let size = 0;
    const onAbort = (): void => {
      flow.cancel();
      reject(signal.reason);
    };
    const flow = res.read({
      chunk(piece) {
        if (whole) whole.set(piece, size);
        else pieces.push(piece);
        size += piece.length;
      },
      end() {
        signal.removeEventListener('abort', onAbort);
        resolve(whole ?? joinBytes(pieces, size));
      },
      fail(err) {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? signal.reason : err);
      },
    });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * The body as a Web stream, piece by piece as it arrives. A reader that falls
 * behind pauses the socket; cancelling the stream closes the connection; the
 * signal fails it with its reason.
 */
export function webStreamOf(res: Http1Response, signal: AbortSignal): ReadableStream<Uint8Array> {
  let flow: BodyFlow | undefined;
  let settled = false;
  const onAbort = (): void => {
    if (settled) return;
    settled = true;
    flow?.cancel();
    controller.error(signal.reason);
  };
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        if (signal.aborted) {
          dropBody(res);
          settled = true;
          c.error(signal.reason);
          return;
        }
        signal.addEventListener('abort', onAbort, { once: true });
        flow = res.read({
          chunk(piece) {
            if (settled) return;
            // A plain view, as fetch's body gives, not the Buffer itself.
            c.enqueue(new Uint8Array(piece.buffer, piece.byteOffset, piece.length));
            if ((c.desiredSize ?? 1) <= 0) flow?.pause();
          },
          end() {
            if (settled) return;
            settled = true;
            signal.removeEventListener('abort', onAbort);
            c.close();
          },
          fail(err) {
            if (settled) return;
            settled = true;
            signal.removeEventListener('abort', onAbort);
            c.error(signal.aborted ? signal.reason : err);
          },
        });
      },
      pull() {
        flow?.resume();
      },
      cancel() {
        settled = true;
        signal.removeEventListener('abort', onAbort);
        flow?.cancel();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: STREAM_QUEUE_BYTES }),
  );
}

/** The body as a Node stream, with the same flow control as `webStreamOf`; destroying it closes the connection. */
export function nodeStreamOf(res: Http1Response): Readable {
  return new BodyReadable(res);
}

class BodyReadable extends Readable {
  /** Unset only while `read` hands over what came with the head. */
  #flow: BodyFlow | undefined;

  constructor(res: Http1Response) {
    super({ highWaterMark: STREAM_QUEUE_BYTES });
    this.#flow = res.read({
      chunk: (piece) => {
        if (!this.push(piece)) this.#flow?.pause();
      },
      end: () => this.push(null),
      fail: (err) => this.destroy(err),
    });
  }

  override _read(): void {
    this.#flow?.resume();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#flow?.cancel();
    callback(err);
  }
}
