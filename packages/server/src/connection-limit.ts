// A cap on the connections one client address holds open at once, on a
// listening server: one client cannot take all of the server's file
// descriptors and leave none for the others.
import type { Server, Socket } from 'node:net';

/** Closes each connection, as it opens, beyond `max` open from one address. */
export function limitConnectionsPerAddress(server: Server, max: number): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    // Without an address the connection has already gone.
    const address = socket.remoteAddress;
    const n = address === undefined ? max : (open.get(address) ?? 0);
    if (address === undefined || n >= max) {
      socket.destroy();
      return;
    }
    open.set(address, n + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left > 0) open.set(address, left);
      else open.delete(address);
    });
  });
}
