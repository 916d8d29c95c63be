// The proxy's fast path (see ../index.ts): an HTTP/1.1 relay that moves
// bytes. It reads a request's head itself, asks `route` where the request
// goes, and then copies the request and the response between the two
// connections as they are, counting body bytes only to know where each
// message ends. Nothing is decoded and re-encoded on the way: a body leaves
// in the pieces it came in, and a stream (process output, a watch) reaches
// the client the moment its bytes do.
//
// A body of known length, once it is large enough to be worth it, is handed
// to a native pump (./pump.ts) that moves it socket to socket in the kernel;
// the relay takes over again at the body's end. So is a chunked response from
// inside a large chunk: the pump goes on through the chunks after it while
// their framing is plain, and hands the rest back right after a chunk's data.
//
// Connections to a destination that has a pool key are kept and reused; others
// are opened for one request and closed after it. An Upgrade request gets a
// fresh connection and, once forwarded, the two sockets are spliced.
//
// A client connection is timed while the relay waits for the client: for a
// request head, for the bytes of a request body, and between requests. Not
// while a response is under way: a stream may be quiet for as long as it
// likes. An answer of the relay's own (a request `route` refuses, an
// upstream that fails) closes the connection: the rest of the request is not
// passed on, and a refused client keeps no connection.
import { createServer, type Server, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  BodyCounter,
  HeadChunks,
  HttpError,
  field,
  headEnd,
  parseRequestHead,
  parseResponseHead,
  requestFraming,
  responseFraming,
  tokens,
  type Field,
  type RequestHead,
  type ResponseHead,
} from './http1.js';
import { loadPump, pumpable, startPump, type Pump, type PumpResult } from './pump.js';
import { limitConnectionsPerAddress } from '../../connection-limit.js';
import { REQUEST_ID, dropped, hostFault, withoutCredentials } from '../headers.js';
import { ownResponse, ProxyError, type RelayOptions, type RequestView } from '../relay.js';
import { MAX_HEAD, type Destination } from '../upstreams.js';

/** Client bytes held while a request is routed or a response is under way, before reading stops. */
const MAX_HELD = 1024 * 1024;
const MAX_IDLE_PER_KEY = 64;
/** Idle connections kept into one sandbox, envd's and its ports' together. */
const MAX_IDLE_PER_SANDBOX = 64;
/** Bodies with at least this much still to come go through the pump. */
const PUMP_MIN = 64 * 1024;
/**
 * A chunked response goes through the pump from inside a chunk of at least
 * this size: one that streams bulk (a command's output comes in chunks of 64
 * KiB and more). One of small chunks (a watch's events, lines typed one by
 * one) stays with the relay, and does not start a pump for each.
 */
const CHUNKED_PUMP_MIN = 32 * 1024;
/**
 * Fields that stay as sent, though hop-by-hop: the body goes on in its own
 * framing, trailers and all, and the upstream answers 100-continue itself.
 */
const AS_SENT = new Set(['transfer-encoding', 'trailer', 'expect']);

function passedOn(fields: Field[]): Field[] {
  const drop = dropped(fields.filter((f) => f.lower === 'connection').map((f) => f.value));
  return fields.filter((f) => AS_SENT.has(f.lower) || !drop(f.lower));
}

/** The head as routing sees it, with a repeated field's values joined as Node joins them. */
function viewOf(head: RequestHead): RequestView {
  const headers: Record<string, string> = {};
  for (const f of head.fields) headers[f.lower] = f.lower in headers ? `${headers[f.lower]}, ${f.value}` : f.value;
  return { method: head.method, url: head.target, headers };
}

/** The head for the upstream; `host` replaces the Host field's value. An upgrade's keeps its hop-by-hop fields. */
function requestHeadText(h: RequestHead, close: boolean, host?: string, upgrade = false, requestId?: string): string {
  let s = `${h.method} ${h.target} HTTP/1.${h.minor}\r\n`;
  for (const f of upgrade ? h.fields : passedOn(h.fields)) {
    if (requestId !== undefined && f.lower === REQUEST_ID) continue;
    const value = withoutCredentials(f.lower, f.value);
    if (value !== undefined) s += `${f.name}: ${host !== undefined && f.lower === 'host' ? host : value}\r\n`;
  }
  if (requestId !== undefined) s += `${REQUEST_ID}: ${requestId}\r\n`;
  return s + (close && !upgrade ? 'connection: close\r\n\r\n' : '\r\n');
}

function responseHeadText(h: ResponseHead, close: boolean, extra?: Record<string, string>): string {
  let s = `HTTP/1.1 ${h.status} ${h.reason}\r\n`;
  for (const f of passedOn(h.fields)) s += `${f.name}: ${f.value}\r\n`;
  if (extra) for (const [k, v] of Object.entries(extra)) if (!h.fields.some((f) => f.lower === k.toLowerCase())) s += `${k}: ${v}\r\n`;
  return s + (close ? 'connection: close\r\n\r\n' : '\r\n');
}

function errorResponse(status: number, message: string, close: boolean, fields?: Record<string, string>, headers?: Record<string, string>): string {
  return ownResponse(status, message, close, fields, headers);
}

/**
 * Upstream connections kept between requests: idle ones by key, and, per
 * sandbox, the ones lent out to an exchange. An idle connection that speaks
 * or closes is dropped. When a sandbox stops running here its idle
 * connections close, and the ones lent out close when their exchange ends.
 */
class Pool {
  private readonly idle = new Map<string, Duplex[]>();
  private readonly drops = new WeakMap<Duplex, () => void>();
  /** Per sandbox: its idle connections (all keys), and those lent out. */
  private readonly sandboxes = new Map<string, { idle: Set<Duplex>; lent: Set<Duplex> }>();

  constructor(private readonly idleMs: number) {}

  private of(sandbox: string): { idle: Set<Duplex>; lent: Set<Duplex> } {
    let s = this.sandboxes.get(sandbox);
    if (!s) this.sandboxes.set(sandbox, (s = { idle: new Set(), lent: new Set() }));
    return s;
  }

  private tidy(sandbox: string): void {
    const s = this.sandboxes.get(sandbox);
    if (s && s.idle.size === 0 && s.lent.size === 0) this.sandboxes.delete(sandbox);
  }

  /** An idle connection of `dest`'s key, lent out to the caller, or undefined. */
  take(dest: Destination): Duplex | undefined {
    const key = dest.poolKey!;
    const list = this.idle.get(key);
    const sock = list?.pop();
    if (!sock) return undefined;
    if (list!.length === 0) this.idle.delete(key);
    const drop = this.drops.get(sock)!;
    this.drops.delete(sock);
    sock.off('data', drop).off('end', drop).off('close', drop).off('error', drop).off('timeout', drop);
    (sock as Socket).setTimeout?.(0);
    if (dest.sandbox !== undefined) {
      const s = this.of(dest.sandbox);
      s.idle.delete(sock);
      s.lent.add(sock);
    }
    return sock;
  }

  /** A connection just opened for `dest`, lent out: it may come back (`put`) unless its sandbox is dropped meanwhile. */
  lend(dest: Destination, sock: Duplex): void {
    if (dest.sandbox !== undefined) this.of(dest.sandbox).lent.add(sock);
  }

  /** A lent connection that does not come back. */
  forget(dest: Destination, sock: Duplex): void {
    if (dest.sandbox === undefined) return;
    this.sandboxes.get(dest.sandbox)?.lent.delete(sock);
    this.tidy(dest.sandbox);
  }

  put(dest: Destination, sock: Duplex): void {
    const key = dest.poolKey!;
    const sandbox = dest.sandbox;
    const s = sandbox === undefined ? undefined : this.sandboxes.get(sandbox);
    let list = this.idle.get(key);
    // Lent before its sandbox was dropped, or one too many: closed, not kept.
    if ((sandbox !== undefined && !s?.lent.delete(sock)) || (list?.length ?? 0) >= (dest.maxKept ?? MAX_IDLE_PER_KEY) || (s && s.idle.size >= MAX_IDLE_PER_SANDBOX)) {
      sock.destroy();
      if (sandbox !== undefined) this.tidy(sandbox);
      return;
    }
    if (!list) this.idle.set(key, (list = []));
    const drop = () => {
      const l = this.idle.get(key);
      const i = l?.indexOf(sock) ?? -1;
      if (i >= 0) l!.splice(i, 1);
      if (l?.length === 0) this.idle.delete(key);
      this.drops.delete(sock);
      if (sandbox !== undefined) {
        this.sandboxes.get(sandbox)?.idle.delete(sock);
        this.tidy(sandbox);
      }
      sock.destroy();
    };
    this.drops.set(sock, drop);
    sock.on('data', drop).on('end', drop).on('close', drop).on('error', drop).on('timeout', drop);
    (sock as Socket).setTimeout?.(dest.idleMs ?? this.idleMs);
    sock.resume();
    list.push(sock);
    s?.idle.add(sock);
  }

  /** A sandbox stopped running here: its idle connections close, and those lent out will not come back. */
  dropSandbox(sandbox: string): void {
    const s = this.sandboxes.get(sandbox);
    if (!s) return;
    this.sandboxes.delete(sandbox);
    for (const sock of s.idle) this.drops.get(sock)?.();
  }

  /** Idle connections kept, for tests: of one sandbox, or all. */
  idleCount(sandbox?: string): number {
    if (sandbox !== undefined) return this.sandboxes.get(sandbox)?.idle.size ?? 0;
    let n = 0;
    for (const l of this.idle.values()) n += l.length;
    return n;
  }

  destroy(): void {
    for (const list of this.idle.values()) for (const s of list) s.destroy();
    this.idle.clear();
    this.sandboxes.clear();
  }
}

/** One request and its response. */
interface Exchange {
  head: RequestHead;
  /** The head as it came, for an upgrade, which is passed on untouched. */
  rawHead: Buffer;
  upgrade: boolean;
  /** The client connection closes after the response. */
  closeAfter: boolean;
  request: BodyCounter;
  requestDone: boolean;
  dest?: Destination;
  up?: Duplex;
  /** The upstream connection may serve another request afterwards. */
  reusable: boolean;
  /** The response head while it arrives. */
  upHead: HeadChunks;
  response?: BodyCounter;
  /** Some of the response has been written to the client. */
  answered: boolean;
  responseDone: boolean;
  /** Moving the rest of the request body or of the response body. */
  bodyPump?: Pump;
  detach?: () => void;
}

export class FastRelay {
  readonly server: Server;
  private readonly clients = new Map<Socket, ClientConnection>();
  private readonly pool: Pool;
  readonly idleTimeoutMs: number;
  readonly headTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** Bodies of known length the pump moved whole, runs of chunks it moved to their end, and every byte it moved. */
  readonly pumped = { bodies: 0, chunkRuns: 0, bytes: 0 };

  constructor(readonly options: RelayOptions) {
    // Here rather than at the first large body: a server without its addon fails as it starts.
    loadPump();
    this.idleTimeoutMs = options.idleTimeoutMs ?? 65_000;
    this.headTimeoutMs = options.headTimeoutMs ?? 20_000;
    this.bodyTimeoutMs = options.bodyTimeoutMs ?? 30_000;
    this.pool = new Pool(options.poolIdleMs ?? 30_000);
    this.server = createServer({ noDelay: true }, (socket) => {
      this.clients.set(socket, new ClientConnection(socket, this, this.pool));
      socket.once('close', () => this.clients.delete(socket));
    });
    this.server.on('close', () => this.pool.destroy());
    if (options.maxConnectionsPerAddress !== undefined) limitConnectionsPerAddress(this.server, options.maxConnectionsPerAddress);
  }

  /** Closes every client connection, streams and upgraded ones included. */
  destroyConnections(): void {
    for (const s of this.clients.keys()) s.destroy();
  }

  dropSandbox(id: string): void {
    this.pool.dropSandbox(id);
  }

  closeIdle(): number {
    let busy = 0;
    for (const [socket, conn] of this.clients) {
      if (conn.idle) socket.destroy();
      else busy++;
    }
    return busy;
  }
}

class ClientConnection {
  /** The next request's head while it arrives. */
  private readonly head = new HeadChunks();
  /** The head may be complete: worth joining and parsing. */
  private headFound = false;
  /** Runs while a head is awaited, from its first byte or the connection's opening. */
  private headClock: NodeJS.Timeout | undefined;
  /** Client bytes after a head, not yet handled, in order: body bytes, then pipelined requests. */
  private queue: Buffer[] = [];
  private queued = 0;
  private ex: Exchange | undefined;
  private closed = false;
  private driving = false;
  private again = false;
  /** The client is paused until the upstream connection drains. */
  private waitingDrain = false;
  /** The upstream connection is paused until the client drains. */
  private upPaused = false;
  /** The next request waits until the client has taken the answers so far. */
  private waitingClientDrain = false;
  private upgraded = false;
  private readonly onData = (chunk: Buffer) => {
    if (this.closed) return;
    if (this.ex) {
      this.queue.push(chunk);
      this.queued += chunk.length;
    } else {
      this.toHead(chunk);
    }
    this.drive();
  };

  constructor(
    private readonly socket: Socket,
    private readonly relay: FastRelay,
    private readonly pool: Pool,
  ) {
    this.startHeadClock();
    socket.on('data', this.onData);
    socket.on('timeout', () => {
      const ex = this.ex;
      if (ex?.requestDone) return;
      // While the relay itself holds the body back (routing, a slow upstream), the client is not the one that stalls.
      if (ex && (!ex.up || this.waitingDrain)) this.startBodyClock();
      // Idle between requests, a body that stopped coming, or a connection done with.
      else socket.destroy();
    });
    socket.on('drain', () => {
      if (this.upPaused) {
        this.upPaused = false;
        this.ex?.up?.resume();
      }
      if (this.waitingClientDrain) {
        this.waitingClientDrain = false;
        socket.resume();
        this.drive();
      }
    });
    socket.on('end', () => {
      if (this.upgraded) return;
      // A client that stops sending mid-exchange has gone: its request is abandoned, as node's server does.
      if (this.ex) socket.destroy();
      else socket.end();
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.closed = true;
      this.stopHeadClock();
      const ex = this.ex;
      this.ex = undefined;
      if (ex) this.release(ex, false);
    });
  }

  /** Between requests: no exchange, nothing of a next request arrived, not upgraded. */
  get idle(): boolean {
    return !this.ex && !this.upgraded && this.queued === 0 && this.head.size === 0;
  }

  private drive(): void {
    if (this.driving) {
      this.again = true;
      return;
    }
    this.driving = true;
    try {
      do {
        this.again = false;
        this.step();
      } while (this.again && !this.closed);
    } finally {
      this.driving = false;
    }
  }

  /** Moves what it can of the queue on. Sets `again` when the state changed so that more may move. */
  private step(): void {
    if (this.closed) return;
    const ex = this.ex;
    if (!ex) {
      if (this.socket.writableNeedDrain) {
        // Answers the client does not read are not piled up: the next request waits.
        this.waitingClientDrain = true;
        this.socket.pause();
      } else if (this.head.size) {
        this.readHead();
      }
      return;
    }
    if (ex.requestDone || !ex.up) {
      // Pipelined requests wait for this response; body bytes wait for the
      // connection. A body the pump can take stays in the kernel meanwhile.
      if (this.queued > MAX_HELD || (!ex.requestDone && this.pumpSized(ex))) this.socket.pause();
      return;
    }
    while (this.queue.length && !ex.requestDone && !this.waitingDrain) {
      const chunk = this.queue[0]!;
      let n: number;
      try {
        n = ex.request.take(chunk);
      } catch (err) {
        this.fatal(err as HttpError, ex);
        return;
      }
      if (n === chunk.length) this.queue.shift();
      else this.queue[0] = chunk.subarray(n);
      this.queued -= n;
      if (n && !ex.up.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        this.waitingDrain = true;
        this.socket.pause();
      }
      if (ex.request.done) ex.requestDone = true;
    }
    if (!ex.requestDone && !this.waitingDrain && this.queue.length === 0) {
      // What Node read before the client was paused goes first, through the
      // queue: read() hands it to onData, and the loop goes round again.
      if (this.socket.readableLength > 0 && this.pumpSized(ex)) this.socket.read();
      else this.pumpRequest(ex);
    }
    // Paused while too much was held: reading goes on.
    if (!this.waitingDrain && !this.waitingClientDrain && this.socket.isPaused()) this.socket.resume();
    if (ex.requestDone) {
      this.socket.setTimeout(0);
      if (ex.responseDone) this.finish(ex);
    }
  }

  private toHead(chunk: Buffer): void {
    if (this.head.size === 0) this.startHeadClock();
    if (this.head.push(chunk)) this.headFound = true;
  }

  /** From here the head clock alone times the connection, until the head has been read. */
  private startHeadClock(): void {
    if (this.headClock || this.closed) return;
    this.socket.setTimeout(0);
    this.headClock = setTimeout(() => {
      this.headClock = undefined;
      if (this.ex || this.closed) return;
      // A head that is here whole waits only for the client to take the answers before it.
      if (this.headFound) this.socket.destroy();
      else this.refuse(408, 'the request head took too long to arrive');
    }, this.relay.headTimeoutMs);
    this.headClock.unref();
  }

  private stopHeadClock(): void {
    clearTimeout(this.headClock);
    this.headClock = undefined;
  }

  /** (Re)starts the wait for the next byte of a request body that is still coming. */
  private startBodyClock(): void {
    if (this.ex && !this.ex.requestDone && !this.closed) this.socket.setTimeout(this.relay.bodyTimeoutMs);
  }

  private readHead(): void {
    if (!this.headFound) {
      if (this.head.size > MAX_HEAD) this.refuse(431, `the request head is larger than ${MAX_HEAD} bytes`);
      return;
    }
    this.stopHeadClock();
    this.headFound = false;
    const buf = this.head.take();
    // The first CRLFCRLF ends the head, and one is there.
    const end = headEnd(buf);
    let head: RequestHead;
    let request: BodyCounter;
    try {
      if (end > MAX_HEAD) throw new HttpError(431, `the request head is larger than ${MAX_HEAD} bytes`);
      head = parseRequestHead(buf, end);
      if (head.method === 'CONNECT') throw new HttpError(405, 'CONNECT is not supported');
      const host = hostFault(
        head.fields.map((f) => f.lower),
        head.minor,
      );
      if (host) throw new HttpError(400, host);
      request = new BodyCounter(requestFraming(head), 400);
    } catch (err) {
      this.refuse((err as HttpError).status ?? 400, (err as Error).message);
      return;
    }
    const connection = tokens(head, 'connection');
    const ex: Exchange = {
      head,
      rawHead: buf.subarray(0, end),
      upgrade: connection.includes('upgrade') && field(head, 'upgrade') !== undefined,
      // After an upgrade that is refused, what the client sends next is not HTTP.
      closeAfter: head.minor === 0 || connection.includes('close') || connection.includes('upgrade'),
      request,
      requestDone: request.done,
      reusable: head.minor === 1,
      upHead: new HeadChunks(),
      answered: false,
      responseDone: false,
    };
    this.queue = end < buf.length ? [buf.subarray(end)] : [];
    this.queued = buf.length - end;
    this.ex = ex;
    // While the request is still coming, a client may not hold the connection by stalling.
    if (ex.requestDone) this.socket.setTimeout(0);
    else this.startBodyClock();
    let routed: Promise<Destination>;
    try {
      routed = this.relay.options.route(viewOf(head));
    } catch (err) {
      routed = Promise.reject(err);
    }
    routed
      .then(
        (dest) => this.connect(ex, dest),
        (err: Error) =>
          err instanceof ProxyError
            ? this.answerOwn(ex, err.status, err.message, err.fields, err.headers)
            : this.answerOwn(ex, err instanceof HttpError ? err.status : 502, err.message),
      )
      .catch(() => this.socket.destroy());
    this.again = true;
  }

  /** Answers a request whose framing is unknown, and closes. */
  private refuse(status: number, message: string): void {
    this.stopHeadClock();
    this.closed = true;
    this.head.take();
    this.queue = [];
    this.queued = 0;
    this.socket.setTimeout(5_000);
    this.socket.end(errorResponse(status, message, true));
  }

  private async connect(ex: Exchange, dest: Destination): Promise<void> {
    if (this.ex !== ex) return;
    ex.dest = dest;
    if (!dest.poolKey || ex.upgrade) ex.reusable = false;
    let up = ex.reusable ? this.pool.take(dest) : undefined;
    if (!up) {
      try {
        up = await dest.open();
      } catch (err) {
        this.answerOwn(ex, 502, `${dest.name} did not answer: ${(err as Error).message}`);
        return;
      }
      if (ex.reusable) this.pool.lend(dest, up);
    }
    if (this.ex !== ex) {
      if (ex.reusable) this.pool.forget(dest, up);
      up.destroy();
      return;
    }
    ex.up = up;
    const onData = (chunk: Buffer) => this.onUpstreamData(ex, chunk);
    const onEnd = () => {
      if (ex.response?.framing.kind === 'close' && !ex.responseDone) this.responseComplete(ex);
      else if (!ex.responseDone) this.upstreamFailed(ex, 'closed the connection before the response was complete');
    };
    const onClose = () => {
      if (!ex.responseDone) this.upstreamFailed(ex, 'closed the connection before the response was complete');
    };
    const onError = (err: Error) => this.upstreamFailed(ex, `failed: ${err.message}`);
    const onDrain = () => {
      if (!this.waitingDrain) return;
      this.waitingDrain = false;
      this.startBodyClock();
      this.socket.resume();
      this.drive();
    };
    up.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onError).on('drain', onDrain);
    // The body waited while the request was routed; from here on the client is timed again.
    this.startBodyClock();
    ex.detach = () => up.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onError).off('drain', onDrain);
    (up as Socket).setNoDelay?.(true);
    // The head and the body bytes already here leave in one write. An upgrade's head goes as it came.
    (up as Socket).cork?.();
    if (ex.upgrade && dest.host === undefined && dest.requestId === undefined && ex.head.fields.every((f) => withoutCredentials(f.lower, f.value) === f.value)) up.write(ex.rawHead);
    else up.write(requestHeadText(ex.head, !dest.poolKey, dest.host, ex.upgrade, dest.requestId), 'latin1');
    this.drive();
    (up as Socket).uncork?.();
    // Now that the head has left, the rest of a large body can go through the pump.
    this.drive();
  }

  /** The rest of the request's body is long enough, and of known length, for the pump. */
  private pumpSized(ex: Exchange): boolean {
    const left = ex.request.lengthLeft;
    return left !== undefined && left >= PUMP_MIN;
  }

  private pumpRequest(ex: Exchange): void {
    if (ex.bodyPump || !this.pumpSized(ex) || !pumpable(this.socket, ex.up!)) return;
    const left = ex.request.lengthLeft!;
    ex.bodyPump = startPump(this.socket, ex.up!, left, this.relay.bodyTimeoutMs, (r) => {
      ex.bodyPump = undefined;
      this.pumpEnded(ex.request, r);
      if (r.code === null) {
        ex.requestDone = true;
        this.drive();
      } else if (r.side === 'to' && r.code !== 'ETIMEDOUT') {
        this.upstreamFailed(ex, `failed: write ${r.code}`);
      } else {
        // The client went away, or stalled past the body timeout, mid-request.
        this.socket.destroy();
      }
    });
    // The pump keeps the body timeout: Node does not see the reads it makes.
    if (ex.bodyPump) this.socket.setTimeout(0);
  }

  private pumpResponse(ex: Exchange): void {
    const body = ex.response!;
    const left = body.lengthLeft;
    const chunkLeft = body.chunkDataLeft(CHUNKED_PUMP_MIN);
    const sized = left !== undefined && left >= PUMP_MIN;
    if (ex.bodyPump || this.upPaused || !(sized || chunkLeft > 0) || !pumpable(ex.up!, this.socket)) return;
    const failed = (r: PumpResult) => {
      if (r.side === 'from') this.upstreamFailed(ex, r.code === 'EOF' ? 'closed the connection before the response was complete' : `failed: read ${r.code}`);
      else this.socket.destroy();
    };
    if (sized) {
      ex.bodyPump = startPump(ex.up!, this.socket, left, 0, (r) => {
        ex.bodyPump = undefined;
        this.pumpEnded(body, r);
        if (r.code === null) this.responseComplete(ex);
        else failed(r);
      });
      return;
    }
    // The pump stops right after a chunk's data, with the rest of the framing (the last chunk at the latest) for the relay.
    ex.bodyPump = startPump(
      ex.up!,
      this.socket,
      chunkLeft,
      0,
      (r) => {
        ex.bodyPump = undefined;
        this.relay.pumped.bytes += r.moved;
        if (r.code !== null) return failed(r);
        this.relay.pumped.chunkRuns++;
        body.skipToChunkEnd();
      },
      true,
    );
  }

  private pumpEnded(body: BodyCounter, r: PumpResult): void {
    body.skip(r.moved);
    this.relay.pumped.bytes += r.moved;
    if (r.code === null) this.relay.pumped.bodies++;
  }

  /** After a 101: the two connections are joined, byte for byte, until either ends. */
  private splice(ex: Exchange, response: Buffer): void {
    const up = ex.up!;
    ex.detach?.();
    ex.up = undefined;
    this.ex = undefined;
    this.upgraded = true;
    this.closed = true; // for the HTTP side of this connection
    this.socket.off('data', this.onData);
    this.socket.setTimeout(0);
    this.socket.write(response);
    for (const chunk of this.queue) up.write(chunk);
    this.queue = [];
    this.queued = 0;
    this.upPaused = this.waitingDrain = this.waitingClientDrain = false;
    up.pipe(this.socket);
    this.socket.pipe(up);
    up.resume();
    this.socket.resume();
    up.on('error', () => this.socket.destroy());
    up.once('close', () => this.socket.destroy());
    this.socket.once('close', () => up.destroy());
  }

  private onUpstreamData(ex: Exchange, chunk: Buffer): void {
    if (ex.responseDone) {
      ex.reusable = false; // bytes nobody asked for
      return;
    }
    try {
      if (!ex.response) {
        this.onResponseHead(ex, chunk);
        return;
      }
      const n = ex.response.take(chunk);
      if (n < chunk.length) ex.reusable = false;
      if (n) this.toClient(ex, n === chunk.length ? chunk : chunk.subarray(0, n));
      if (ex.response.done) this.responseComplete(ex);
      else this.pumpResponse(ex);
    } catch (err) {
      this.upstreamFailed(ex, `sent a bad response: ${(err as Error).message}`);
    }
  }

  private onResponseHead(ex: Exchange, chunk: Buffer): void {
    const tooLarge = () => new HttpError(502, `the response head is larger than ${MAX_HEAD} bytes`);
    if (!ex.upHead.push(chunk)) {
      if (ex.upHead.size > MAX_HEAD) throw tooLarge();
      return;
    }
    let buf = ex.upHead.take();
    for (;;) {
      const end = headEnd(buf);
      if (end < 0) {
        // After an interim answer: the next head is still to come.
        ex.upHead.push(buf);
        if (ex.upHead.size > MAX_HEAD) throw tooLarge();
        return;
      }
      const head = parseResponseHead(buf, end);
      if (head.status === 101) {
        if (!ex.upgrade) throw new HttpError(502, 'switched protocols on a request that asked for no upgrade');
        if (!ex.requestDone) throw new HttpError(502, 'switched protocols before the request was complete');
        this.splice(ex, buf);
        return;
      }
      buf = buf.subarray(end);
      if (head.status < 200) {
        // 100 Continue and the like: passed on, and the real answer follows.
        ex.answered = true;
        this.socket.write(responseHeadText(head, false), 'latin1');
        if (buf.length === 0) return;
        continue;
      }
      const framing = responseFraming(head, ex.head.method);
      if (framing.kind === 'close') ex.closeAfter = true;
      if (framing.kind === 'close' || head.minor === 0 || tokens(head, 'connection').includes('close')) ex.reusable = false;
      const response = (ex.response = new BodyCounter(framing, 502));
      const rest = buf;
      const n = response.take(rest);
      if (n < rest.length) ex.reusable = false;
      ex.answered = true;
      this.socket.cork();
      this.socket.write(responseHeadText(head, ex.closeAfter, ex.dest?.responseHeaders), 'latin1');
      if (n) this.toClient(ex, n === rest.length ? rest : rest.subarray(0, n));
      this.socket.uncork();
      if (response.done) this.responseComplete(ex);
      else this.pumpResponse(ex);
      return;
    }
  }

  private toClient(ex: Exchange, bytes: Buffer): void {
    if (!this.socket.write(bytes) && !this.upPaused) {
      this.upPaused = true;
      ex.up!.pause();
    }
  }

  private responseComplete(ex: Exchange): void {
    ex.responseDone = true;
    if (!ex.requestDone) {
      // Answered before the whole request was sent: the rest of it is not read, and the connection closes.
      ex.closeAfter = true;
      ex.reusable = false;
    }
    this.finish(ex);
  }

  /** `what` says what went wrong after the destination's name. */
  private upstreamFailed(ex: Exchange, what: string): void {
    if (this.ex !== ex || ex.responseDone) return;
    ex.reusable = false;
    this.release(ex, false);
    if (ex.answered) {
      this.socket.destroy();
      return;
    }
    this.answerOwn(ex, 502, `${ex.dest!.name} ${what}`);
  }

  /**
   * Answers with the relay's own error, and closes the connection after it.
   * The rest of the request is not passed on, nor waited for.
   */
  private answerOwn(ex: Exchange, status: number, message: string, fields?: Record<string, string>, headers?: Record<string, string>): void {
    if (this.ex !== ex || this.closed) return;
    ex.answered = true;
    ex.responseDone = true;
    ex.closeAfter = true;
    this.socket.write(errorResponse(status, message, true, fields, headers));
    this.finish(ex);
  }

  /** Lets go of the upstream connection: back to the pool, or closed. */
  private release(ex: Exchange, keep: boolean): void {
    const up = ex.up;
    if (!up) return;
    this.relay.pumped.bytes += ex.bodyPump?.cancel() ?? 0;
    ex.bodyPump = undefined;
    ex.up = undefined;
    ex.detach?.();
    if (keep && ex.reusable && ex.requestDone && ex.dest?.poolKey && !this.waitingDrain) this.pool.put(ex.dest, up);
    else {
      if (ex.dest?.poolKey) this.pool.forget(ex.dest, up);
      up.destroy();
    }
    this.upPaused = false;
    if (this.waitingDrain) {
      this.waitingDrain = false;
      this.socket.resume();
    }
  }

  private finish(ex: Exchange): void {
    this.release(ex, true);
    this.ex = undefined;
    if (ex.closeAfter) {
      this.closed = true;
      this.queue = [];
      this.queued = 0;
      this.socket.setTimeout(5_000);
      this.socket.end();
      // What the client still sends is read and dropped until it closes, 5 s
      // at most: one still writing its request then reads this answer rather
      // than a reset.
      this.socket.resume();
      return;
    }
    this.socket.setTimeout(this.relay.idleTimeoutMs);
    this.socket.resume();
    // What came after this request is the next one's head, maybe whole.
    const left = this.queue;
    this.queue = [];
    this.queued = 0;
    for (const chunk of left) this.toHead(chunk);
    this.again = true;
    this.drive();
  }

  private fatal(err: HttpError, ex: Exchange): void {
    // The request's own framing is broken: nothing after it can be trusted.
    this.release(ex, false);
    this.ex = undefined;
    if (ex.answered) this.socket.destroy();
    else this.refuse(err.status ?? 400, err.message);
  }
}
