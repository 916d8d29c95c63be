// The dashboard's sign-in: a key is exchanged for an HttpOnly, SameSite
// cookie and a CSRF token; the cookie stands for the key on every route,
// a state-changing request with it needs the token, signing out (or
// deleting the key) ends it; the page is served with a strict policy, and
// not at all with the dashboard off.
import { API_KEY, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await testServer();
});
afterAll(() => t.teardown());

interface Answer {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the assertions say what a body holds
  body: any;
}

async function call(method: string, path: string, init: { headers?: Record<string, string>; body?: unknown } = {}, base = t.server.apiUrl): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}), ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

/** Signs in with the test key: the cookie (`name=value`), the Set-Cookie line, and the session. */
async function signIn() {
  const res = await call('POST', '/dashboard/session', { body: { key: API_KEY } });
  expect(res.status).toBe(201);
  const setCookie = res.headers.get('set-cookie')!;
  return { cookie: setCookie.split(';')[0]!, setCookie, session: res.body as { csrfToken: string; keyID: string; keyName: string; expiresAt: string } };
}

test('a wrong key is refused and sets no cookie; a missing one names the field', async () => {
  const wrong = await call('POST', '/dashboard/session', { body: { key: 'e2b_0000000000000000000000000000000000000bad' } });
  expect(wrong).toMatchObject({ status: 401, body: { code: 401, message: 'invalid API key' } });
  expect(wrong.headers.get('set-cookie')).toBeNull();
  const missing = await call('POST', '/dashboard/session', { body: {} });
  expect(missing.status).toBe(400);
  expect(missing.body.message).toMatch(/key/);
});

test('signing in sets an HttpOnly, SameSite=Strict cookie holding neither the key nor the CSRF token', async () => {
  const { cookie, setCookie, session } = await signIn();
  const attrs = setCookie.split(';').map((a) => a.trim().toLowerCase());
  expect(attrs).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'path=/']));
  expect(attrs.find((a) => a.startsWith('max-age='))).toBe('max-age=43200');
  // Plain HTTP here; over TLS the cookie is Secure as well.
  expect(attrs).not.toContain('secure');
  const value = cookie.split('=')[1]!;
  expect(value.length).toBeGreaterThanOrEqual(43);
  expect(setCookie).not.toContain(API_KEY);
  expect(value).not.toBe(session.csrfToken);
  expect(session).toMatchObject({ keyName: 'default', csrfToken: expect.stringMatching(/^[\w-]{43}$/) });
  expect(Date.parse(session.expiresAt) - Date.now()).toBeGreaterThan(11 * 3600_000);
  // The cookie alone reads, and the session answers with its token for a page loaded again.
  expect(await call('GET', '/dashboard/session', { headers: { cookie } })).toMatchObject({ status: 200, body: session });
  expect(await call('GET', '/v2/sandboxes', { headers: { cookie } })).toMatchObject({ status: 200, body: [] });
});

test('a state-changing request with the cookie needs the session CSRF token', async () => {
  const { cookie, session } = await signIn();
  const other = await signIn();
  const before = (await t.control.listApiKeys()).length;
  const attempts: Record<string, string>[] = [{ cookie }, { cookie, 'x-csrf-token': 'not-the-token' }, { cookie, 'x-csrf-token': other.session.csrfToken }];
  for (const headers of attempts) {
    const refused = await call('POST', '/api-keys', { headers, body: { name: 'by-csrf' } });
    expect(refused).toMatchObject({ status: 403, body: { code: 403, message: expect.stringMatching(/X-CSRF-Token/) } });
  }
  expect(await call('DELETE', '/sandboxes/nosuchsandbox0000000', { headers: { cookie } })).toMatchObject({ status: 403 });
  expect(await t.control.listApiKeys()).toHaveLength(before);
  const made = await call('POST', '/api-keys', { headers: { cookie, 'x-csrf-token': session.csrfToken }, body: { name: 'from-dashboard' } });
  expect(made).toMatchObject({ status: 201, body: { name: 'from-dashboard' } });
  await t.control.deleteApiKey(made.body.id);
});

test('signing out ends the session and clears the cookie', async () => {
  const { cookie, session } = await signIn();
  expect((await call('DELETE', '/dashboard/session', { headers: { cookie } })).status).toBe(403);
  const out = await call('DELETE', '/dashboard/session', { headers: { cookie, 'x-csrf-token': session.csrfToken } });
  expect(out.status).toBe(204);
  expect(out.headers.get('set-cookie')).toMatch(/^paddock_session=; Max-Age=0; Path=\/; HttpOnly; SameSite=Strict$/);
  for (const [method, path] of [['GET', '/dashboard/session'], ['GET', '/v2/sandboxes']]) {
    expect(await call(method, path, { headers: { cookie } })).toMatchObject({ status: 401, body: { message: 'the dashboard session has ended; sign in again' } });
  }
});

test("deleting a session's key ends the session", async () => {
  const made = await t.control.createApiKey({ name: 'short-lived' });
  const res = await call('POST', '/dashboard/session', { body: { key: made.key } });
  const cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  expect((await call('GET', '/v2/sandboxes', { headers: { cookie } })).status).toBe(200);
  await t.control.deleteApiKey(made.id);
  expect(await call('GET', '/v2/sandboxes', { headers: { cookie } })).toMatchObject({ status: 401, body: { message: expect.stringMatching(/deleted/) } });
});

test('the page is served under /dashboard/ with a policy that keeps it to its own scripts and never framed', async () => {
  const page = await call('GET', '/dashboard/');
  expect({ status: page.status, body: page.body }).toMatchObject({ status: 200 });
  expect(page.headers.get('content-type')).toMatch(/text\/html/);
  const csp = page.headers.get('content-security-policy')!;
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toContain(`http://*.${t.server.config.domain}`);
  expect(page.headers.get('x-frame-options')).toBe('DENY');
  const script = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(page.body)?.[1];
  expect(script).toBeDefined();
  const bundle = await call('GET', script!);
  expect(bundle.status).toBe(200);
  expect(bundle.headers.get('cache-control')).toContain('immutable');
  expect((await call('GET', '/dashboard/nosuch.js')).status).toBe(404);
});

test('with the dashboard off, neither the page nor sign-in is there, and no cookie stands for a key', async () => {
  const { cookie } = await signIn();
  const off = await testServer({ dashboard: false, network: false });
  try {
    const base = off.server.apiUrl;
    expect((await call('GET', '/dashboard/', {}, base)).status).toBe(404);
    expect(await call('POST', '/dashboard/session', { body: { key: API_KEY } }, base)).toMatchObject({ status: 404, body: { message: expect.stringMatching(/dashboard is off/) } });
    expect((await call('GET', '/v2/sandboxes', { headers: { cookie } }, base)).status).toBe(401);
  } finally {
    await off.teardown();
  }
});
