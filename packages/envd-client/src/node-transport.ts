// The default Connect transport in Node: connect-node's, with the options
// every client of envd wants.
import type { Agent } from 'node:http';
import type { ClientSessionOptions } from 'node:http2';
import { connect as netConnect } from 'node:net';
import type { Interceptor, Transport } from '@connectrpc/connect';
import { createConnectTransport, type Http2SessionManager } from '@connectrpc/connect-node';

/** Options of `createNodeTransport`. */
export interface NodeTransportOptions {
  /** Base URL of envd. */
  baseUrl: string;
  /** Connect binary format (true) or JSON (false). */
  useBinaryFormat: boolean;
  /** Run on every call; the client's adds envd's headers. */
  interceptors?: Interceptor[];
  /** `1.1` (the default) or `2` (h2c with prior knowledge on plain http, as envd speaks it; ALPN on https). */
  httpVersion?: '1.1' | '2';
  /** A unix socket to reach envd through; `baseUrl` still gives the path and the Host header. */
  socketPath?: string;
  /** HTTP/1.1: Node's agent of the connections; default node:http's global one. */
  agent?: Agent;
  /** HTTP/2: the manager of the connection, for a caller that closes it (`abort()`); default one of the transport's own. */
  sessionManager?: Http2SessionManager;
}

/** node:http2's options that reach envd through `socketPath`. */
export function http2SocketOptions(socketPath: string | undefined): ClientSessionOptions | undefined {
  return socketPath === undefined ? undefined : { createConnection: () => netConnect(socketPath) };
}

/** connect-node's Connect transport to envd. */
export function createNodeTransport(options: NodeTransportOptions): Transport {
  const common = {
    baseUrl: options.baseUrl,
    useBinaryFormat: options.useBinaryFormat,
    interceptors: options.interceptors ?? [],
    // Ask for no compression: envd would spend its CPU compressing output
    // streams on their way to a client that is usually a hop away.
    acceptCompression: [],
  };
  if (options.httpVersion === '2') {
    return createConnectTransport({
      ...common,
      httpVersion: '2',
      sessionManager: options.sessionManager,
      nodeOptions: http2SocketOptions(options.socketPath),
    });
  }
  return createConnectTransport({ ...common, httpVersion: '1.1', nodeOptions: { socketPath: options.socketPath, agent: options.agent } });
}
