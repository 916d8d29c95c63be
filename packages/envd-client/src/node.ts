// The Node build's client: envd's HTTP routes over undici, its Connect
// services over connect-node (HTTP/1.1 or h2c, a unix socket if asked),
// instead of the browser build's fetch and connect-web.
import { Agent as NodeAgent } from 'node:http';
import type { Readable } from 'node:stream';
import { Http2SessionManager } from '@connectrpc/connect-node';
import type { Dispatcher } from 'undici';
import {
  EnvdClient as WebEnvdClient,
  type DownloadFormat,
  type DownloadOptions,
  type EnvdClientOptions,
  type EnvdLink,
  type TransportOptions,
  type WebDownloadFormat,
} from './envd-client.js';
import { fetchSender } from './http.js';
import { defaultDispatcher, nodeStreamOf, socketDispatcher, undiciSender } from './http-node.js';
import { createNodeTransport, http2SocketOptions } from './node-transport.js';

/** Options of the Node build's `new EnvdClient`: the browser build's, and an undici dispatcher. */
export interface NodeEnvdClientOptions extends EnvdClientOptions {
  /** undici dispatcher for the HTTP routes when no `fetch` is given (a `ProxyAgent`, say). Default: one agent all clients share. */
  dispatcher?: Dispatcher;
}

/**
 * Client of one sandbox's envd, in Node: HTTP routes over undici, Connect services over connect-node (HTTP/1.1
 * or h2c, a unix socket if asked). Same API as the browser build's.
 */
export class EnvdClient extends WebEnvdClient {
  /** @param options - Where envd is and how to reach it; the Node build also takes a `dispatcher`. */
  constructor(options: NodeEnvdClientOptions) {
    super(options);
  }

  /** `GET /files`: the file at `path`. An empty file gives an empty result. */
  override download(path: string, options?: DownloadOptions & { format?: 'text' }): Promise<string>;
  override download(path: string, options: DownloadOptions & { format: 'bytes' }): Promise<Uint8Array>;
  override download(path: string, options: DownloadOptions & { format: 'blob' }): Promise<Blob>;
  override download(path: string, options: DownloadOptions & { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  override download(path: string, options: DownloadOptions & { format: 'node-stream' }): Promise<Readable>;
  override download(path: string, options: DownloadOptions & { format: WebDownloadFormat }): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array>>;
  override download(path: string, options: DownloadOptions & { format: DownloadFormat }): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array> | Readable>;
  override download(path: string, options: DownloadOptions & { format?: DownloadFormat } = {}): Promise<unknown> {
    return super.download(path, options as DownloadOptions & { format: WebDownloadFormat });
  }

  protected override connect(base: EnvdClientOptions, transportOptions: TransportOptions): EnvdLink {
    const options: NodeEnvdClientOptions = base;
    const owned: EnvdLink['owned'] = [];
    const { socketPath } = options;
    let dispatcher = options.dispatcher;
    if (socketPath !== undefined && dispatcher === undefined && options.fetch === undefined) {
      dispatcher = socketDispatcher(socketPath);
      owned.push(dispatcher);
    }
    const send = options.fetch ? fetchSender(options.fetch, nodeStreamOf) : undiciSender(dispatcher ?? defaultDispatcher());
    if (options.createTransport) return { send, transport: options.createTransport(transportOptions), owned };
    if (options.httpVersion === '2') {
      // A connection of the client's own, which `close()` ends.
      const sessionManager = new Http2SessionManager(options.envdUrl, {}, http2SocketOptions(socketPath));
      owned.push({ close: async () => sessionManager.abort() });
      return { send, transport: createNodeTransport({ ...transportOptions, httpVersion: '2', socketPath, sessionManager }), owned };
    }
    // Connections to a socket are the client's own; others are shared through node:http's global agent.
    const agent = socketPath === undefined ? undefined : new NodeAgent({ keepAlive: true });
    if (agent) owned.push({ close: async () => agent.destroy() });
    return { send, transport: createNodeTransport({ ...transportOptions, socketPath, agent }), owned };
  }
}
