// A real HTTP server on 127.0.0.1 standing in for the parts of the service
// that are not in this package's reach yet (the control API, the sandbox
// proxy's answers for a dead sandbox). It keeps every request it gets, and
// each test sets how it answers.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  url: URL;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body as received, for binary framing. */
  raw: Buffer;
  /** The body parsed as JSON, when it is JSON. */
  json: unknown;
}

export type Answer = (req: SeenRequest, res: ServerResponse) => void;

export interface StandInServer {
  url: string;
  seen: SeenRequest[];
  /** How the server answers from now on; by default 500 for everything. */
  answer(handler: Answer): void;
  close(): Promise<void>;
}

export async function startStandIn(): Promise<StandInServer> {
  const seen: SeenRequest[] = [];
  let handler: Answer = (_req, res) => reply(res, 500, { code: 500, message: 'no answer set for this test' });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const body = raw.toString('utf8');
      let json: unknown;
      try {
        json = body ? JSON.parse(body) : undefined;
      } catch {
        json = undefined;
      }
      const request = { method: req.method ?? '', url: new URL(req.url ?? '/', 'http://stand-in'), headers: req.headers, body, raw, json };
      seen.push(request);
      handler(request, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    answer: (next) => {
      handler = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Answers with a JSON body, or with no body for 204. */
export function reply(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  if (body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}
