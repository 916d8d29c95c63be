// Listening unix sockets that the host makes for a sandbox's envd
// (native/listen_unix.c): the host binds them in a directory of its own and
// passes the descriptors into the container, so the paths the host later
// connects to are never in a place a sandbox can write.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

interface RuntimeNative {
  listenUnix(path: string, backlog: number): number;
}

function load(): RuntimeNative {
  const file = join(import.meta.dirname, '../build/Release/runtime_native.node');
  if (!existsSync(file)) throw new Error(`the runtime's native addon was not found at '${file}'; run the runtime build`);
  return createRequire(import.meta.url)(file) as RuntimeNative;
}

let native: RuntimeNative | undefined;

/** Connections waiting for envd to accept: a burst of proxy requests queues here, not refused. */
const BACKLOG = 511;

/**
 * Binds a unix stream socket at `path` (mode 0600) and listens on it; gives
 * the descriptor, close-on-exec, which the caller passes on and closes.
 * Nothing in this process accepts on it.
 */
export function listenUnix(path: string): number {
  native ??= load();
  return native.listenUnix(path, BACKLOG);
}
