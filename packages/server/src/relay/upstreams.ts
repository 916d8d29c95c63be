// The relay's connections to where requests go, through undici: a pool per
// destination that keeps connections (envd's socket), a client for one
// request otherwise (a tunnel into a sandbox, opened per request). The relay
// never dials an address itself: each connection is the one the
// destination's `open` gives.
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Client, Pool, type Dispatcher, type buildConnector } from 'undici';

export interface Destination {
  /** Names it in errors, e.g. `sandbox 'abc' on port 8080`. */
  name: string;
  /** Connections opened for the same key are kept and reused. Without one, a connection serves one request. */
  poolKey?: string;
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
  take(dest: Destination): { dispatcher: Dispatcher; done(): void } {
    if (dest.poolKey === undefined) {
      const client = new Client(ORIGIN, { ...this.options, connect: connector(dest) });
      return { dispatcher: client, done: () => void client.close().catch(() => undefined) };
    }
    const key = dest.poolKey;
    let pool = this.pools.get(key);
    if (!pool) {
      const created = new Pool(ORIGIN, { ...this.options, connections: null, connect: connector(dest) });
      // A pool with no connection left (its sandbox gone, or only idle) is dropped, not kept forever.
      const forget = () => {
        const s = created.stats;
        if (s.connected > 0 || s.queued > 0 || s.running > 0 || this.pools.get(key) !== created) return;
        this.pools.delete(key);
        void created.close().catch(() => undefined);
      };
      created.on('disconnect', forget).on('connectionError', forget);
      this.pools.set(key, (pool = created));
    }
    return { dispatcher: pool, done: () => undefined };
  }

  /** Closes every kept connection; requests under way end with an error. */
  destroy(): void {
    for (const pool of this.pools.values()) void pool.destroy().catch(() => undefined);
    this.pools.clear();
  }
}
