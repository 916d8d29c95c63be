// The relay's connections to where requests go, through undici: a pool per
// destination that keeps connections (envd's socket, a tunnel to a sandbox's
// port), a client for one request otherwise. The relay never dials an
// address itself: each connection is the one the destination's `open` gives.
// A sandbox's pools are let go together when it stops running here
// (`dropSandbox`): requests under way end as they would, and nothing more is
// sent on their connections.
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Client, Pool, type Dispatcher, type buildConnector } from 'undici';

export interface Destination {
  /** Names it in errors, e.g. `sandbox 'abc' on port 8080`. */
  name: string;
  /** What it is, for the proxy's metrics: envd, or a sandbox's own port. */
  target?: 'envd' | 'port';
  /** Connections opened for the same key are kept and reused. Without one, a connection serves one request. */
  poolKey?: string;
  /** The sandbox a kept connection leads into: its connections are let go together, and limited together. */
  sandbox?: string;
  /** A kept connection unused this long is closed (the relay's `poolIdleMs` otherwise). */
  idleMs?: number;
  /** Kept connections of this key at most; more at once serve one request each (unbounded otherwise). */
  maxKept?: number;
  /** The Host the request carries upstream, in place of the client's (a sandbox's maskRequestHost). */
  host?: string;
  /** Fields added to the response where the upstream sent none of that name (CORS for a browser's requests to envd). */
  responseHeaders?: Record<string, string>;
  /** The request's id, sent upstream as its only X-Request-Id field (a client's own is replaced). */
  requestId?: string;
  open(): Promise<Duplex>;
}

/** A destination's `open` failed: nothing was sent. */
export class Unreachable extends Error {}

/** The largest response head taken from an upstream, as the relay takes from clients. */
export const MAX_HEAD = 64 * 1024;
/** Requests carry their own Host; undici needs an origin all the same. */
const ORIGIN = 'http://localhost';

function connector(dest: Destination): buildConnector.connector {
  return (_options, callback) => {
    dest.open().then(
      (socket) => callback(null, socket as Socket),
      (err: Error) => callback(new Unreachable(err.message), null),
    );
  };
}

export class Upstreams {
  private readonly pools = new Map<string, Pool>();
  /** The pool keys of each sandbox's pools. */
  private readonly bySandbox = new Map<string, Set<string>>();
  private readonly options: Client.Options;

  /** `idleMs`: a kept connection is closed after this long unused. */
  constructor(idleMs: number) {
    this.options = {
      pipelining: 1,
      // A response may be as slow to begin, and as quiet, as it likes: a command's output, a watch.
      headersTimeout: 0,
      bodyTimeout: 0,
      maxHeaderSize: MAX_HEAD,
      keepAliveTimeout: idleMs,
      keepAliveMaxTimeout: idleMs,
      strictContentLength: true,
    };
  }

  /** Where `dest`'s request is dispatched, and what to call once its response is over. */
  /**
   * Where `dest`'s request is dispatched, and what to call once its response
   * is over. `reset`: the connection serves this request only.
   */
  take(dest: Destination): { dispatcher: Dispatcher; reset: boolean; done(): void } {
    const key = dest.poolKey;
    let pool = key === undefined ? undefined : this.pools.get(key);
    // Its kept connections all busy, and as many as it may keep: this request has one of its own.
    const full = pool && dest.maxKept !== undefined && pool.stats.free === 0 && pool.stats.connected >= dest.maxKept;
    if (key === undefined || full) {
      const client = new Client(ORIGIN, { ...this.options, connect: connector(dest) });
      return { dispatcher: client, reset: true, done: () => void client.close().catch(() => undefined) };
    }
    if (!pool) {
      const idle = dest.idleMs === undefined ? {} : { keepAliveTimeout: dest.idleMs, keepAliveMaxTimeout: dest.idleMs };
      const created = new Pool(ORIGIN, { ...this.options, ...idle, connections: null, connect: connector(dest) });
      // A pool with no connection left (its sandbox gone, or only idle) is dropped, not kept forever.
      const forget = () => {
        const s = created.stats;
        if (s.connected > 0 || s.queued > 0 || s.running > 0 || this.pools.get(key) !== created) return;
        this.forget(key, dest.sandbox);
        void created.close().catch(() => undefined);
      };
      created.on('disconnect', forget).on('connectionError', forget);
      this.pools.set(key, (pool = created));
      if (dest.sandbox !== undefined) {
        let keys = this.bySandbox.get(dest.sandbox);
        if (!keys) this.bySandbox.set(dest.sandbox, (keys = new Set()));
        keys.add(key);
      }
    }
    return { dispatcher: pool, reset: false, done: () => undefined };
  }

  private forget(key: string, sandbox: string | undefined): void {
    this.pools.delete(key);
    const keys = sandbox === undefined ? undefined : this.bySandbox.get(sandbox);
    keys?.delete(key);
    if (keys?.size === 0) this.bySandbox.delete(sandbox!);
  }

  /** Lets go of a sandbox's pools: their requests under way finish, then their connections close; later requests open new ones. */
  dropSandbox(sandbox: string): void {
    for (const key of this.bySandbox.get(sandbox) ?? []) {
      const pool = this.pools.get(key);
      this.pools.delete(key);
      void pool?.close().catch(() => undefined);
    }
    this.bySandbox.delete(sandbox);
  }

  /** Closes every kept connection; requests under way end with an error. */
  destroy(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => undefined);
    this.pools.clear();
    this.bySandbox.clear();
  }
}
