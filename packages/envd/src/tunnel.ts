// The port tunnel: an HTTP CONNECT endpoint on a unix socket that only the
// host can reach. `CONNECT 127.0.0.1:PORT` opens a TCP connection to PORT
// inside the sandbox's network namespace and splices the two together. The
// sandbox proxy uses it to reach servers that sandboxes run.
import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

function refuse(socket: Duplex, status: number, reason: string): void {
  const body = JSON.stringify({ code: status, message: reason });
  socket.end(
    `HTTP/1.1 ${status} ${status === 400 ? 'Bad Request' : 'Bad Gateway'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export function createTunnelServer(): Server {
  const server = createServer((_req, res) => {
    res.writeHead(405, { 'Content-Type': 'application/json' }).end(JSON.stringify({ code: 405, message: 'use CONNECT 127.0.0.1:PORT' }));
  });
  server.on('connect', (req, client: Duplex, head: Buffer) => {
    const target = req.url ?? '';
    const i = target.lastIndexOf(':');
    const host = target.slice(0, i);
    const port = Number(target.slice(i + 1));
    if (i < 0 || !LOCAL_HOSTS.has(host) || !Number.isInteger(port) || port < 1 || port > 65535) {
      refuse(client, 400, `tunnel target '${target}' must be 127.0.0.1:PORT`);
      return;
    }
    const upstream: Socket = connect({ host: host.replace(/^\[|\]$/g, ''), port });
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.once('error', (err) => {
      if (!connected) refuse(client, 502, `nothing is listening on port ${port} in the sandbox (${err.message})`);
      else client.destroy();
    });
    client.once('error', () => upstream.destroy());
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  return server;
}
