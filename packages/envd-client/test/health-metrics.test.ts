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
