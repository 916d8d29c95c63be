// The Node build's client: envd's HTTP routes over undici, its Connect
// services over connect-node (HTTP/1.1 or h2c, a unix socket if asked),
// instead of the browser build's fetch and connect-web.
import { Agent as NodeAgent } from 'node:http';
import { Http2SessionManager } from '@connectrpc/connect-node';
import { EnvdClient as WebEnvdClient, type EnvdClientOptions, type EnvdLink, type TransportOptions } from './envd-client.js';
import { fetchSender } from './http.js';
import { defaultDispatcher, nodeStreamOf, socketDispatcher, undiciSender } from './http-node.js';
import { createNodeTransport, http2SocketOptions } from './node-transport.js';

/**
 * Client of one sandbox's envd, in Node: HTTP routes over undici, Connect services over connect-node (HTTP/1.1
 * or h2c, a unix socket if asked). Same API as the browser build's.
 */
export class EnvdClient extends WebEnvdClient {
  protected override connect(options: EnvdClientOptions, transportOptions: TransportOptions): EnvdLink {
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
