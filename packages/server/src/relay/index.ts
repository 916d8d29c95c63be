// The proxy's relay, by one switch: Node's http server and undici
// (./relay.ts), or the fast path (./fast), a relay that reads HTTP/1.1 heads
// itself and moves large bodies socket to socket in the kernel. The fast path
// stays because a large upload through the library path is more than twice
// as slow, and so is any relay that moves the bytes through JavaScript, a
// plain byte pipe included (tools/bench/proxy.mjs measures them side by
// side). Both take the same options and pass the same tests
// (test/relay.test.ts runs every case through each). Over TLS only the
// library relay serves: the pump moves bytes between file descriptors, and
// TLS bytes are made in user space.
import type { Server } from 'node:net';
import { FastRelay } from './fast/relay.js';
import { Relay, type RelayOptions } from './relay.js';

/** What the server needs of either relay. */
export interface SandboxRelay {
  readonly server: Server;
  /** Closes every client connection, streams and upgraded ones included. */
  destroyConnections(): void;
  /** Closes the client connections between requests; how many remain, busy with a request, a stream or an upgrade. */
  closeIdle(): number;
  /** Lets go of the connections kept into a sandbox that stopped running here (paused, killed): none serves another request. */
  dropSandbox(id: string): void;
}

export function createRelay({ fastPath, ...options }: RelayOptions & { fastPath: boolean }): SandboxRelay {
  return fastPath && !options.tls ? new FastRelay(options) : new Relay(options);
}
