import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EnvdClient, EnvdHttpError, type Metrics } from '../src/index.js';
import { sendJson, serve, type TestServer } from './http-server.js';

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('health', () => {
  test('204 means running', async () => {
    server = await serve((_req, res) => res.writeHead(204).end());
    await expect(new EnvdClient({ envdUrl: server.url }).health()).resolves.toBe(true);
  });

  test('502 (the proxy: sandbox not running) means not running', async () => {
    server = await serve((_req, res) => sendJson(res, 502, { code: 502, message: 'sandbox sbx1 is not running' }));
    await expect(new EnvdClient({ envdUrl: server.url }).health()).resolves.toBe(false);
  });

  test('any other failure is thrown, e.g. a 404', async () => {
    server = await serve((_req, res) => sendJson(res, 404, { code: 404, message: 'no route' }));
    const err = await new EnvdClient({ envdUrl: server.url }).health().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnvdHttpError);
    expect(err).toMatchObject({ kind: 'not_found', message: 'GET /health failed with 404: no route' });
  });

  test('carries the sandbox routing headers through a shared URL with a path prefix', async () => {
    const seen: [string | undefined, string | undefined, string | undefined][] = [];
    server = await serve((req, res) => {
      seen.push([req.url, req.headers['e2b-sandbox-id'] as string, req.headers['e2b-sandbox-port'] as string]);
      res.writeHead(204).end();
    });
    await new EnvdClient({ envdUrl: `${server.url}/sandbox/`, sandboxId: 'sbx1' }).health();
    expect(seen).toEqual([['/sandbox/health', 'sbx1', '49983']]);
  });

  test('no server at all is a network error', async () => {
    server = await serve(() => undefined);
    const url = server.url;
    await server.close();
    server = undefined;
    const err = await new EnvdClient({ envdUrl: url }).health().catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'network' });
    expect((err as Error).message).toMatch(/^GET \/health failed: .*ECONNREFUSED/);
  });
});

describe('metrics', () => {
  test('returns the sample as envd sends it, with the access token sent', async () => {
    const sample: Metrics = { ts: 1_700_000_000, cpu_count: 2, cpu_used_pct: 12.5, mem_total: 1024, mem_used: 512, disk_used: 1, disk_total: 10 };
    let token: string | undefined;
    server = await serve((req, res) => {
      token = req.headers['x-access-token'] as string;
      sendJson(res, 200, sample);
    });
    await expect(new EnvdClient({ envdUrl: server.url, accessToken: 'tok' }).metrics()).resolves.toEqual(sample);
    expect(token).toBe('tok');
  });

  test('401 is unauthorized; a body that is not an object is an invalid response', async () => {
    server = await serve((req, res) =>
      req.headers['x-access-token'] ? sendJson(res, 200, [1, 2]) : sendJson(res, 401, { code: 401, message: 'missing access token' }),
    );
    await expect(new EnvdClient({ envdUrl: server.url }).metrics()).rejects.toMatchObject({ kind: 'unauthorized', status: 401 });
    await expect(new EnvdClient({ envdUrl: server.url, accessToken: 't' }).metrics()).rejects.toMatchObject({
      kind: 'invalid_response',
    });
  });
});

describe('init', () => {
  test('posts the request as JSON with the access token; 204 resolves, a refusal is an EnvdHttpError', async () => {
    const seen: { method?: string; url?: string; type?: string; token?: string; body: string }[] = [];
    server = await serve(async (req, res) => {
      let body = '';
      for await (const chunk of req) body += (chunk as Buffer).toString();
      seen.push({ method: req.method, url: req.url, type: req.headers['content-type'], token: req.headers['x-access-token'] as string, body });
      if (JSON.parse(body).defaultUser === 'nobody') sendJson(res, 400, { code: 400, message: 'user nobody does not exist' });
      else res.writeHead(204).end();
    });
    const c = new EnvdClient({ envdUrl: server.url, accessToken: 'old' });
    await expect(c.init({ accessToken: 'new', envVars: { A: '1' }, timestamp: '2026-01-01T00:00:00.000Z' })).resolves.toBeUndefined();
    expect(seen[0]).toEqual({
      method: 'POST',
      url: '/init',
      type: 'application/json',
      token: 'old',
      body: JSON.stringify({ accessToken: 'new', envVars: { A: '1' }, timestamp: '2026-01-01T00:00:00.000Z' }),
    });
    await expect(c.init({ defaultUser: 'nobody' })).rejects.toMatchObject({ kind: 'bad_request', message: 'POST /init failed with 400: user nobody does not exist' });
  });
});

describe('over a unix socket', () => {
  test('health, metrics and files reach the server listening on socketPath; close() ends the connections', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'envd-client-socket-'));
    const socketPath = join(dir, 'envd.sock');
    const connections: Socket[] = [];
    const http = createServer((req, res) => {
      if (req.url === '/health') res.writeHead(204).end();
      else if (req.url?.startsWith('/files')) res.writeHead(200, { 'content-length': '2' }).end('hi');
      else sendJson(res, 200, { ts: 1, cpu_count: 1, cpu_used_pct: 0, mem_total: 1, mem_used: 1, disk_used: 0, disk_total: 1 });
    });
    http.on('connection', (socket: Socket) => connections.push(socket));
    await new Promise<void>((resolve) => http.listen(socketPath, resolve));
    try {
      const c = new EnvdClient({ envdUrl: 'http://localhost', socketPath });
      expect(await c.health()).toBe(true);
      expect((await c.metrics()).cpu_count).toBe(1);
      expect(await c.download('/a.txt')).toBe('hi');
      expect(connections.some((s) => !s.destroyed)).toBe(true);
      await c.close();
      await Promise.all(connections.filter((s) => !s.closed).map((s) => once(s, 'close')));
      expect(connections.every((s) => s.destroyed)).toBe(true);
    } finally {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
