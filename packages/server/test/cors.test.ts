// Cross-origin requests, as the official SDK makes them from a web page:
// preflights of the control API and of envd through the proxy are
// answered (the proxy's without routing: a preflight names the
// E2b-Sandbox-* headers, not their values), answers carry the fields a page
// needs to read them, and configured origins are the only ones let in. What
// a page (or any client) sends reaches a sandbox without Paddock's own
// credentials.
import { request } from 'node:http';
import { API_KEY, run, testServer, type TestServer } from './harness.js';

const ORIGIN = 'https://app.example';
const SDK_HEADERS = 'content-type, connect-protocol-version, e2b-sandbox-id, e2b-sandbox-port, x-access-token';

/** A request with exactly these headers (fetch would drop Host and may drop Origin). */
function call(url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers as Record<string, string>, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

describe.each([
  ['the fast path', true],
  ['the library path', false],
])('through %s', (_name, proxyFastPath) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await testServer({ proxyFastPath });
  });
  afterAll(() => t.teardown());

  test("a sandbox's service never sees Paddock's credentials: no X-API-Key, no bearer Paddock key, no dashboard cookie; its own fields pass", async () => {
    const s = await t.control.createSandbox({ templateID: 'base' });
    const echo = [
      'import http.server, json',
      'class H(http.server.BaseHTTPRequestHandler):',
      '    def do_GET(self):',
      '        body = json.dumps([[k.lower(), v] for k, v in self.headers.items()]).encode()',
      "        self.send_response(200); self.send_header('content-length', str(len(body))); self.end_headers(); self.wfile.write(body)",
      '    def log_message(self, *args): pass',
      "http.server.HTTPServer(('0.0.0.0', 8080), H).serve_forever()",
    ].join('\n');
    await run(t.server, s.sandboxID, s.envdAccessToken, `cat > /tmp/echo.py <<'PY'\n${echo}\nPY\nsetsid -f python3 /tmp/echo.py >/dev/null 2>&1`);
    const ask = (headers: Record<string, string>) => call(`${t.server.proxyUrl}/`, { headers: { host: `8080-${s.sandboxID}.localhost`, ...headers } });
    let up = await ask({});
    for (let i = 0; i < 100 && up.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      up = await ask({});
    }
    expect(up.status).toBe(200);
    const seen = async (headers: Record<string, string>) => {
      const res = await ask(headers);
      expect(res.status).toBe(200);
      return Object.fromEntries(JSON.parse(res.body) as Array<[string, string]>);
    };
    const withKey = await seen({ 'x-api-key': API_KEY, cookie: 'theme=dark; paddock_session=s3cret; lang=en', 'x-own': 'kept' });
    expect(withKey['x-api-key']).toBeUndefined();
    expect(withKey.cookie).toBe('theme=dark; lang=en');
    expect(withKey['x-own']).toBe('kept');
    expect(await seen({ authorization: `Bearer ${API_KEY}`, cookie: 'paddock_session=s3cret' })).not.toHaveProperty('authorization');
    expect(await seen({ authorization: `Bearer ${API_KEY}` })).not.toHaveProperty('cookie');
    // A service's own credentials are its business.
    expect((await seen({ authorization: 'Basic dXNlcjpwYXNz' })).authorization).toBe('Basic dXNlcjpwYXNz');
    expect((await seen({ authorization: 'Bearer its-own-token' })).authorization).toBe('Bearer its-own-token');
    await t.control.killSandbox(s.sandboxID);
  });

  test('the control API answers preflights and cross-origin calls for any origin', async () => {
    const pre = await call(`${t.server.apiUrl}/sandboxes`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-api-key, content-type' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-allow-headers': 'x-api-key, content-type' });
    expect(pre.headers['access-control-allow-methods']).toContain('POST');
    const list = await call(`${t.server.apiUrl}/v2/sandboxes`, { headers: { origin: ORIGIN, 'x-api-key': API_KEY } });
    expect(list.status).toBe(200);
    expect(list.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-expose-headers': 'X-Next-Token, X-Request-Id' });
  });

  test("the proxy answers envd's preflights itself, and envd's answers and its own refusals carry the fields a page needs", async () => {
    const pre = await call(`${t.server.proxyUrl}/process.Process/Start`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': SDK_HEADERS },
    });
    expect(pre).toMatchObject({ status: 204, body: '' });
    expect(pre.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-allow-headers': SDK_HEADERS, 'access-control-max-age': '7200' });

    const s = await t.control.createSandbox({ templateID: 'base' });
    const stat = await call(`${t.server.proxyUrl}/filesystem.Filesystem/Stat`, {
      method: 'POST',
      headers: { origin: ORIGIN, 'content-type': 'application/json', 'connect-protocol-version': '1', 'e2b-sandbox-id': s.sandboxID, 'e2b-sandbox-port': '49983', 'x-access-token': s.envdAccessToken! },
      body: JSON.stringify({ path: '/home/user' }),
    });
    expect(stat.status).toBe(200);
    expect(stat.headers['access-control-allow-origin']).toBe('*');
    expect(stat.headers['access-control-expose-headers']).toContain('Grpc-Status');
    // Without an Origin, nothing is added.
    const plain = await call(`${t.server.proxyUrl}/filesystem.Filesystem/Stat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'connect-protocol-version': '1', 'e2b-sandbox-id': s.sandboxID, 'e2b-sandbox-port': '49983', 'x-access-token': s.envdAccessToken! },
      body: JSON.stringify({ path: '/home/user' }),
    });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    await t.control.killSandbox(s.sandboxID);

    const gone = await call(`${t.server.proxyUrl}/filesystem.Filesystem/Stat`, { method: 'POST', headers: { origin: ORIGIN, 'e2b-sandbox-id': s.sandboxID, 'e2b-sandbox-port': '49983' } });
    expect([gone.status, gone.headers['access-control-allow-origin'], JSON.parse(gone.body).message]).toEqual([502, '*', 'The sandbox was not found']);
    // A preflight for a sandbox's own port is its service's to answer: it is routed (here, to no sandbox).
    const own = await call(`${t.server.proxyUrl}/`, { method: 'OPTIONS', headers: { host: `8080-${s.sandboxID}.localhost`, origin: ORIGIN, 'access-control-request-method': 'GET' } });
    expect(own.status).toBe(502);
  });
});

test('with configured origins, only those are let in', async () => {
  const t = await testServer({ corsOrigins: [ORIGIN] });
  try {
    const preflight = (url: string, origin: string) =>
      call(url, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': SDK_HEADERS } });
    const ok = await preflight(`${t.server.proxyUrl}/process.Process/Start`, ORIGIN);
    expect([ok.status, ok.headers['access-control-allow-origin'], ok.headers.vary]).toEqual([204, ORIGIN, 'Origin']);
    const other = await preflight(`${t.server.proxyUrl}/process.Process/Start`, 'https://evil.example');
    expect([other.status, JSON.parse(other.body).message]).toEqual([403, "origin 'https://evil.example' may not call this server (PADDOCK_CORS_ORIGINS)"]);
    const api = await preflight(`${t.server.apiUrl}/sandboxes`, 'https://evil.example');
    expect(api.headers['access-control-allow-origin']).toBeUndefined();
    expect((await preflight(`${t.server.apiUrl}/sandboxes`, ORIGIN)).headers['access-control-allow-origin']).toBe(ORIGIN);
  } finally {
    await t.teardown();
  }
});
