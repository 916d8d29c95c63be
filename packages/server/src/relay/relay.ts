// The sandbox proxy's HTTP side. Node's http server reads each request (its
// llhttp parser, strict: it refuses what a lenient reading would let the
// relay and the server behind it frame differently), `route` says where it
// goes, and undici (./upstreams.ts) carries it there and the answer back.
// Both bodies stream with back-pressure, and each piece of an answer is
// written to the client as it arrives. An Upgrade request, once the
// upstream switches protocols, has its two connections joined byte for byte.
//
// Requests pipelined on one connection are passed on one at a time, each
// once the answer before it is done: a client cannot have the relay hold
// many upstream requests, or their answers, at once.
//
// A client connection is timed while the relay waits for the client: for a
// request head (Node's headersTimeout, from the connection's opening for its
// first request), for the bytes of a request body while the relay is ready to
// take them, and between requests (keepAliveTimeout); not while an answer is
// under way, which may be quiet for as long as it likes. An answer of the
// relay's own (a request `route` refuses, one Node cannot read, an upstream
// that fails before answering) closes the connection, and so does an answer
// that comes before its request is whole. Closing, the relay reads and drops
// what the client still sends for a few seconds, so that a client still
// writing its request reads the answer rather than a reset.
import { STATUS_CODES, createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import type { Socket } from 'node:net';
import { PassThrough, finished, type Duplex } from 'node:stream';
import { limitConnectionsPerAddress } from '../connection-limit.js';
import { hostFault, requestFields, responseFields, tokens } from './headers.js';
import { errors } from 'undici';
import { MAX_HEAD, Unreachable, Upstreams, type Destination } from './upstreams.js';

export type { Destination } from './upstreams.js';

/** A request the relay answers itself, with this status. */
export class ProxyError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Fields the answer's JSON body carries before `message` and `code` (E2B's 502 names the sandbox). */
    readonly fields: Record<string, string> = {},
    /** Header fields of the answer besides its framing (CORS). A 204 has no body. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ProxyError';
  }
}

/** An answer the relay gives itself, whole, closing the connection after it when `close`. */
export function ownResponse(status: number, message: string, close: boolean, fields?: Record<string, string>, headers: Record<string, string> = {}): string {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n`;
  for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
  const end = close ? 'connection: close\r\n\r\n' : '\r\n';
  if (status === 204) return head + end;
  const body = errorBody(status, message, fields);
  return `${head}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${end}${body}`;
}

/** Adds `extra` fields to a response's, where it has none of that name (an upstream's own CORS fields stay). */
export function withExtraFields<T extends Record<string, unknown>>(fields: T, extra: Record<string, string> | undefined): T {
  if (!extra) return fields;
  const have = new Set(Object.keys(fields).map((k) => k.toLowerCase()));
  const out: Record<string, unknown> = { ...fields };
  for (const [k, v] of Object.entries(extra)) if (!have.has(k.toLowerCase())) out[k] = v;
  return out as T;
}

/** The JSON body of an answer the relay gives itself. */
export function errorBody(status: number, message: string, fields?: Record<string, string>): string {
  // E2B's order where it has a body of its own ({sandboxId, message, code}); the relay's {code, message} otherwise.
  return JSON.stringify(fields && Object.keys(fields).length ? { ...fields, message, code: status } : { code: status, message });
}

/** What routing sees of a request: Node's view of it, which the fast path gives too. */
export interface RequestView {
  method?: string;
  url?: string;
  /** Lowercased names; a repeated field's values joined with ', '. */
  headers: IncomingHttpHeaders;
}

export interface RelayOptions {
  /** Where a request goes. A {@link ProxyError} it throws is the answer (400, 401, 403, 502 ...). */
  route(req: RequestView): Promise<Destination>;
  /** A kept-alive client connection is closed after this long without a request (65 s). */
  idleTimeoutMs?: number;
  /** A request head must arrive whole within this long of its first byte, or of the connection's opening (20 s). */
  headTimeoutMs?: number;
  /** A request body of which no byte arrives for this long, while the relay would take one, is cut off (30 s). */
  bodyTimeoutMs?: number;
  /** Client connections open at once from one address, beyond which one is closed as it opens (no limit). */
  maxConnectionsPerAddress?: number;
  /** A kept upstream connection is closed after this long unused (30 s; envd keeps its side 65 s). */
  poolIdleMs?: number;
  /** Serve HTTPS with this certificate and key (the library relay only: the fast path's kernel pump moves plain bytes). */
  tls?: SecureContextOptions;
}

/** How long a connection being closed is still read from, at most. */
const LINGER_MS = 5_000;

/** Refuses what Node's parser lets through but the relay will not pass on. */
function checkRequest(req: IncomingMessage): void {
  if (req.httpVersionMajor !== 1) throw new ProxyError(505, `HTTP/${req.httpVersion} is not supported; use HTTP/1.1`);
  const host = hostFault(
    req.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase()),
    req.httpVersionMinor,
  );
  if (host) throw new ProxyError(400, host);
  const te = req.headers['transfer-encoding'];
  if (te !== undefined) {
    const codings = tokens(te);
    if (codings.length !== 1 || codings[0] !== 'chunked') throw new ProxyError(501, `transfer-encoding '${te}' is not supported; only chunked is`);
    if (req.httpVersionMinor === 0) throw new ProxyError(400, 'an HTTP/1.0 request cannot be chunked');
  }
}

/** The answer to a request Node's parser refused: what was wrong, in llhttp's words. */
function parseFailure(err: Error & { code?: string; reason?: string }): [number, string] {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'the request head took too long to arrive'];
  if (err.code === 'HPE_HEADER_OVERFLOW') return [431, `the request head is larger than ${MAX_HEAD} bytes`];
  return [400, `the request is not valid HTTP/1.1: ${err.reason ?? err.message}`];
}

/** The answer when passing a request on failed before any of the upstream's answer was sent. */
function upstreamFailure(dest: Destination, err: Error & { code?: string }): [number, string] {
  if (err instanceof ProxyError) return [err.status, err.message];
  if (err instanceof Unreachable) return [502, `${dest.name} did not answer: ${err.message}`];
  if (err instanceof errors.InvalidArgumentError) return [400, `the request cannot be passed on: ${err.message}`];
  if (err instanceof errors.SocketError) return [502, `${dest.name} closed the connection before the response was complete`];
  if (err instanceof errors.HTTPParserError || err instanceof errors.ResponseContentLengthMismatchError) {
    return [502, `${dest.name} sent a bad response: ${err.message}`];
  }
  return [502, `${dest.name} failed: ${err.message}`];
}

/** A response head as it goes on the wire, for answers written to a connection Node's server has let go. */
function headText(status: number, reason: string, raw: (Buffer | string)[], keep: (lowerName: string) => boolean, extra = ''): string {
  let s = `HTTP/1.1 ${status} ${reason || STATUS_CODES[status] || ''}\r\n`;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString();
    if (keep(name.toLowerCase())) s += `${name}: ${raw[i + 1]!.toString()}\r\n`;
  }
  return `${s}${extra}\r\n`;
}

/** Joins two connections byte for byte, each end passed on, until either closes. */
function splice(a: Duplex, b: Duplex): void {
  const both = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', both).once('close', both);
  b.on('error', both).once('close', both);
  a.pipe(b);
  b.pipe(a);
}

export class Relay {
  readonly server: Server;
  readonly idleTimeoutMs: number;
  readonly headTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  private readonly upstreams: Upstreams;
  private readonly sockets = new Set<Duplex>();
  /** Per client connection: settles once the answer to its latest request is over. */
  private readonly turns = new WeakMap<Duplex, Promise<void>>();
  /** Per client connection: the answer under way. */
  private readonly answering = new WeakMap<Duplex, ServerResponse>();
  /** Connections being closed after an answer: nothing more is served on them. */
  private readonly closing = new WeakSet<Duplex>();

  constructor(readonly options: RelayOptions) {
    this.idleTimeoutMs = options.idleTimeoutMs ?? 65_000;
    this.headTimeoutMs = options.headTimeoutMs ?? 20_000;
    this.bodyTimeoutMs = options.bodyTimeoutMs ?? 30_000;
    this.upstreams = new Upstreams(options.poolIdleMs ?? 30_000);
    const serverOptions = {
      noDelay: true,
      maxHeaderSize: MAX_HEAD,
      // Node looks for heads past their timeout this often.
      connectionsCheckingInterval: Math.min(1_000, this.headTimeoutMs),
      // Checked by the relay, which says what is wrong.
      requireHostHeader: false,
    };
    this.server = options.tls ? createHttpsServer({ ...serverOptions, ...options.tls }) : createServer(serverOptions);
    this.server.headersTimeout = this.headTimeoutMs;
    // Bodies are timed byte by byte below: an upload may be large, and take long as a whole.
    this.server.requestTimeout = 0;
    this.server.keepAliveTimeout = this.idleTimeoutMs;
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.inTurn(req.socket, res, () => this.forward(req, res, false)));
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.inTurn(req.socket, res, () => this.forward(req, res, true)));
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.inTurn(socket, undefined, () => this.forwardUpgrade(req, socket, head)));
    this.server.on('connect', (_req: IncomingMessage, socket: Duplex) => this.refuse(socket, 405, 'CONNECT is not supported'));
    this.server.on('clientError', (err: Error, socket: Duplex) => {
      if (this.closing.has(socket) || this.answering.get(socket)?.headersSent || (err as { code?: string }).code === 'ECONNRESET') {
        socket.destroy();
        return;
      }
      const [status, message] = parseFailure(err);
      this.refuse(socket, status, message);
    });
    this.server.on('close', () => this.upstreams.destroy());
    if (options.maxConnectionsPerAddress !== undefined) limitConnectionsPerAddress(this.server, options.maxConnectionsPerAddress);
  }

  /** Closes every client connection, streams and upgraded ones included. */
  destroyConnections(): void {
    for (const s of this.sockets) s.destroy();
  }

  dropSandbox(id: string): void {
    this.upstreams.dropSandbox(id);
  }

  closeIdle(): number {
    // Node's server knows which of its connections wait for a request; upgraded ones it has let go are busy.
    this.server.closeIdleConnections();
    let busy = 0;
    for (const s of this.sockets) if (!s.destroyed) busy++;
    return busy;
  }

  /** Runs `serve` once the answers to the connection's earlier requests are over. */
  private inTurn(socket: Duplex, res: ServerResponse | undefined, serve: () => Promise<void>): void {
    const before = this.turns.get(socket);
    if (res) this.turns.set(socket, new Promise((resolve) => res.once('close', () => resolve())));
    (before ?? Promise.resolve())
      .then(() => (socket.destroyed || this.closing.has(socket) ? undefined : serve()))
      .catch(() => socket.destroy());
  }

  private async route(req: IncomingMessage, socket: Duplex): Promise<Destination | undefined> {
    try {
      checkRequest(req);
      return await this.options.route(req);
    } catch (err) {
      if (err instanceof ProxyError) this.refuse(socket, err.status, err.message, req, err.fields, err.headers);
      else this.refuse(socket, 502, (err as Error).message, req);
      return undefined;
    }
  }

  private async forward(req: IncomingMessage, res: ServerResponse, continueWanted: boolean): Promise<void> {
    const socket = req.socket;
    const dest = await this.route(req, socket);
    if (!dest || socket.destroyed) return;
    if (continueWanted) res.writeContinue();
    this.answering.set(socket, res);
    res.once('close', () => {
      if (this.answering.get(socket) === res) this.answering.delete(socket);
    });
    const { dispatcher, reset, done } = this.upstreams.take(dest);
    dispatcher.stream(
      { path: req.url!, method: req.method!, headers: requestFields(req, dest.host, dest.requestId), body: this.bodyOf(req), reset },
      ({ statusCode, headers }) => {
        const te = tokens(headers['transfer-encoding']);
        if (te.some((t) => t !== 'chunked')) throw new ProxyError(502, `${dest.name} sent transfer-encoding '${te.join(', ')}', which the proxy does not pass on`);
        res.sendDate = false;
        res.writeHead(statusCode, withExtraFields(responseFields(headers), dest.responseHeaders));
        // A stream's head goes at once: its first data may be a while coming.
        if (headers['content-length'] === undefined) res.flushHeaders();
        return res;
      },
      (err) => {
        done();
        if (err) {
          if (res.headersSent || socket.destroyed) socket.destroy();
          else this.refuse(socket, ...upstreamFailure(dest, err), req);
        } else if (!req.complete) {
          // Answered before the request was whole: the rest of it is not passed on, nor waited for.
          this.linger(socket, req);
        }
      },
    );
  }

  /** The request's body as undici takes it: a stream of its own, which undici may destroy without closing the client's connection. */
  private bodyOf(req: IncomingMessage): PassThrough | null {
    if (req.headers['transfer-encoding'] === undefined && Number(req.headers['content-length'] ?? 0) === 0) {
      req.resume();
      return null;
    }
    const body = new PassThrough();
    req.pipe(body);
    // A client that goes away mid-body ends the request upstream.
    finished(req, (err) => {
      if (err) body.destroy(err);
    });
    body.once('close', () => req.unpipe(body));
    this.timeBody(req, body);
    return body;
  }

  private timeBody(req: IncomingMessage, body: PassThrough): void {
    const timer = setTimeout(() => {
      // The relay holding the body back (an upstream slow to take it) is not the client stalling.
      if (req.isPaused() || body.writableNeedDrain) timer.refresh();
      else req.socket.destroy();
    }, this.bodyTimeoutMs);
    const stop = () => clearTimeout(timer);
    req.on('data', () => timer.refresh());
    req.once('end', stop).once('close', stop);
    body.once('close', stop);
  }

  private async forwardUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    (socket as Socket).setTimeout?.(0);
    const dest = await this.route(req, socket);
    if (!dest || socket.destroyed) return;
    const { dispatcher, done } = this.upstreams.take(dest);
    let answered = false;
    const framing = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);
    dispatcher.dispatch(
      { path: req.url!, method: req.method!, headers: requestFields(req, dest.host, dest.requestId), upgrade: req.headers.upgrade!, body: null },
      {
        onConnect: () => undefined,
        onUpgrade: (statusCode, raw, up) => {
          done();
          answered = true;
          socket.write(headText(statusCode, '', raw ?? [], () => true));
          if (head.length) up.write(head);
          splice(socket, up);
        },
        // Refused: the answer goes as the upstream gave it, its body ended by the connection's end.
        onHeaders: (statusCode, raw, resume, statusText) => {
          if (statusCode < 200) return true;
          answered = true;
          socket.on('drain', resume);
          return socket.write(headText(statusCode, statusText, raw, (name) => !framing.has(name), 'connection: close\r\n'));
        },
        onData: (chunk) => socket.write(chunk),
        onComplete: () => {
          done();
          socket.end();
          this.linger(socket, req);
        },
        onError: (err) => {
          done();
          if (answered) socket.destroy();
          else this.refuse(socket, ...upstreamFailure(dest, err), req);
        },
      },
    );
  }

  /** Answers with the relay's own error, and closes the connection after it. */
  private refuse(socket: Duplex, status: number, message: string, req?: IncomingMessage, fields?: Record<string, string>, headers?: Record<string, string>): void {
    if (this.closing.has(socket) || socket.destroyed) return;
    socket.end(ownResponse(status, message, true, fields, headers));
    this.linger(socket, req);
  }

  /** Closes the connection once what was written has left, reading and dropping what the client still sends meanwhile. */
  private linger(socket: Duplex, req?: IncomingMessage): void {
    if (this.closing.has(socket)) return;
    this.closing.add(socket);
    if (socket.writable) socket.end();
    req?.resume();
    socket.resume();
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  }
}
