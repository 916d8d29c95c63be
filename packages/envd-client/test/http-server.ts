// A real HTTP server on 127.0.0.1 standing in for envd's HTTP endpoints; the
// test's handler reads the request as a stream, as envd would.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

export async function serve(handler: (req: IncomingMessage, res: ServerResponse) => unknown): Promise<TestServer> {
  const server = createServer((req, res) => {
    Promise.resolve(handler(req, res)).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`test server failed: ${String(err)}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Deterministic pseudo-random bytes, produced chunk by chunk without holding them all. */
export async function* generatedBytes(total: number, chunkSize = 64 * 1024, seed = 1): AsyncGenerator<Uint8Array> {
  let state = seed;
  for (let sent = 0; sent < total; sent += chunkSize) {
    const chunk = new Uint8Array(Math.min(chunkSize, total - sent));
    for (let i = 0; i < chunk.length; i++) {
      state = (state * 1103515245 + 12345) >>> 0;
      chunk[i] = state >>> 24;
    }
    yield chunk;
  }
}
