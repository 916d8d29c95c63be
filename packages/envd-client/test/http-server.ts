// A real HTTP server on 127.0.0.1 standing in for envd's HTTP endpoints (the
// test's handler reads the request as a stream, as envd would), and a Node
// process of its own for what must run outside jest.
import { spawn, type SpawnOptions } from 'node:child_process';
import { once } from 'node:events';
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

/** Runs `node ...args` to its end and gives what it printed; it must exit 0 with nothing on stderr. */
export async function nodeOutput(args: string[], options: SpawnOptions = {}): Promise<string> {
  const child = spawn(process.execPath, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let errors = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (errors += d));
  // 'close', not 'exit': the output may still be on its way when the process exits.
  const [code] = (await once(child, 'close')) as [number];
  expect(errors).toBe('');
  expect(code).toBe(0);
  return out;
}
