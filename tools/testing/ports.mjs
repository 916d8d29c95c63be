// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick):
// for a server a test starts on a port it must know before it listens, or
// for a port a test needs nothing to listen on.
import { createServer } from 'node:net';

export async function freePort() {
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
