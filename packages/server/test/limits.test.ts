// Clients that stall or crowd cannot hold the server's connections: header,
// body and idle timeouts on the control API and the sandbox proxy, a cap on
// the connections of one address, and refused requests closed as soon as
// they are answered. Each server here has small limits so that the tests take
// seconds; every wait is bounded, and none measures speed.
import type { Socket } from 'node:net';
import { answeredConnection, untilClosed } from './raw-http.js';
import { API_KEY, eventually, run, testServer, type TestServer } from './harness.js';

const portOf = (url: string) => Number(new URL(url).port);
/** A request to envd's /health in `sandboxId`, through the proxy. */
const envdHealth = (sandboxId: string) => `GET /health HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: ${sandboxId}\r\nE2b-Sandbox-Port: 49983\r\n\r\n`;
const noContent = (text: string) => /^HTTP\/1\.1 204 No Content\r\n[^]*\r\n\r\n$/.test(text);
/** A POST whose head says 100 bytes of JSON follow, of which only `sent` comes. */
const slowPost = (path: string, headers: string, sent = '{') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n${sent}`;

describe('with header, body and idle timeouts of 1 s', () => {
  let t: TestServer;
  let api: number;
  let proxy: number;
  let sandbox: { sandboxID: string; envdAccessToken?: string };
  beforeAll(async () => {
    t = await testServer({ headerTimeoutMs: 1_000, bodyTimeoutMs: 1_000, idleTimeoutMs: 1_000 });
    api = portOf(t.server.apiUrl);
    proxy = portOf(t.server.proxyUrl);
    sandbox = await t.control.createSandbox({ templateID: 'base' });
  });
  afterAll(() => t.teardown());

  test('an API request whose body stops arriving is closed, with or without a key, on a route or not', async () => {
    const [unauthenticated, authenticated, nowhere] = await Promise.all([
      untilClosed(api, slowPost('/sandboxes', '')),
      untilClosed(api, slowPost('/sandboxes', `X-API-Key: ${API_KEY}\r\n`)),
      untilClosed(api, slowPost('/no/such/route', '')),
    ]);
    expect(unauthenticated).toMatch(/^HTTP\/1\.1 401 /);
    for (const text of [authenticated, nowhere]) {
      expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[^]*connection: close\r\n/);
      expect(JSON.parse(text.slice(text.indexOf('{')))).toEqual({
        code: 408,
        message: 'the request did not arrive in time: its head must arrive within 1000 ms, all of it within 2000 ms',
      });
    }
  });

  test('a request body through the proxy that stops arriving is cut off', async () => {
    const path = `/files?path=/tmp/slow.txt`;
    const head = `X-Access-Token: ${sandbox.envdAccessToken}\r\nE2b-Sandbox-Id: ${sandbox.sandboxID}\r\nE2b-Sandbox-Port: 49983\r\n`;
    const upload = `POST ${path} HTTP/1.1\r\nHost: x\r\n${head}Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 100\r\n\r\n-`;
    expect(await untilClosed(proxy, upload)).toBe('');
  });

  test('a head that stops arriving, or comes a byte at a time, is answered 408 and closed, on the API and the proxy', async () => {
    const partial = 'GET /health HTTP/1.1\r\nHost: x\r\n';
    // Each byte comes 20 ms after the last; the whole head would take some 5 s.
    const dripped = `GET /health HTTP/1.1\r\nHost: x\r\nx-pad: ${'p'.repeat(200)}\r\n\r\n`;
    const texts = await Promise.all([
      untilClosed(api, partial),
      untilClosed(api, dripped, { dripMs: 20 }),
      untilClosed(api),
      untilClosed(proxy, partial),
      untilClosed(proxy, dripped, { dripMs: 20 }),
      untilClosed(proxy),
    ]);
    for (const text of texts) expect(text).toMatch(/^HTTP\/1\.1 408 /);
  });

  test('a kept-alive connection is closed once idle, on the API and the proxy', async () => {
    const [viaApi, viaProxy] = await Promise.all([untilClosed(api, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n'), untilClosed(proxy, envdHealth(sandbox.sandboxID))]);
    expect(noContent(viaApi)).toBe(true);
    expect(noContent(viaProxy)).toBe(true);
  });

  test("a process's output streams through the proxy for longer than every timeout", async () => {
    const out = await run(t.server, sandbox.sandboxID, sandbox.envdAccessToken, 'for i in 1 2 3; do echo $i; sleep 1; done');
    expect(out).toEqual({ stdout: '1\n2\n3\n', exitCode: 0 });
  });
});

describe('with the default timeouts and a cap of 8 connections per address', () => {
  const cap = 8;
  let t: TestServer;
  let api: number;
  let proxy: number;
  beforeAll(async () => {
    t = await testServer({ maxConnectionsPerAddress: cap });
    api = portOf(t.server.apiUrl);
    proxy = portOf(t.server.proxyUrl);
  });
  afterAll(() => t.teardown());

  test('a request without a valid key is answered 401 and its connection closed at once, its body never sent', async () => {
    const [missing, invalid] = await Promise.all([
      untilClosed(api, slowPost('/sandboxes', '', '')),
      untilClosed(api, slowPost('/sandboxes', `X-API-Key: e2b_${'f'.repeat(40)}\r\n`, '')),
    ]);
    expect(missing).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n[^]*connection: close\r\n[^]*"missing X-API-Key header"/i);
    expect(invalid).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n[^]*connection: close\r\n[^]*"invalid API key"/i);
  });

  test("the proxy's own refusals are answered and their connections closed, though each request came whole", async () => {
    const closed = await t.control.createSandbox({ templateID: 'base', network: { allowPublicTraffic: false } });
    const refusals = await Promise.all([
      untilClosed(proxy, 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
      untilClosed(proxy, 'GET /files?path=x&signature=v1_bad HTTP/1.1\r\nHost: x\r\n\r\n'),
      untilClosed(proxy, `GET / HTTP/1.1\r\nHost: 8080-${closed.sandboxID}.${t.server.config.domain}\r\n\r\n`),
      untilClosed(proxy, 'GET / HTTP/1.1\r\nHost: x\r\nE2b-Sandbox-Id: nosuchsandbox\r\n\r\n'),
    ]);
    expect(refusals.map((text) => text.slice(0, 12))).toEqual(['HTTP/1.1 400', 'HTTP/1.1 401', 'HTTP/1.1 403', 'HTTP/1.1 502']);
    for (const text of refusals) expect(text).toMatch(/\r\nconnection: close\r\n/);
    await t.control.killSandbox(closed.sandboxID);
  });

  /** Connections from `from` that have had an answer to `request`, up to the cap; then three more, which are closed unanswered. */
  async function fill(port: number, request: string, from: string): Promise<Socket[]> {
    const held: Socket[] = [];
    for (let i = 0; i < cap; i++) held.push(await answeredConnection(port, request, noContent, from));
    // Past the cap from that address: closed unanswered, though each sends a request.
    expect(await Promise.all([1, 2, 3].map(() => untilClosed(port, request, { localAddress: from })))).toEqual(['', '', '']);
    return held;
  }

  /** Closes `held`, then waits for the server to let `from` in again. */
  async function release(held: Socket[], port: number, request: string, from: string): Promise<void> {
    for (const s of held) s.destroy();
    await eventually(async () => {
      const s = await answeredConnection(port, request, noContent, from).catch(() => undefined);
      s?.destroy();
      return s !== undefined;
    }, `a connection from ${from} to port ${port} after the others closed`);
  }

  test('over the cap, API connections from one address are closed as they open, while another address creates a sandbox; then they are let in again', async () => {
    const from = '127.0.0.2';
    const request = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
    const held = await fill(api, request, from);
    try {
      const created = await fetch(`${t.server.apiUrl}/sandboxes`, {
        method: 'POST',
        headers: { 'X-API-Key': API_KEY, 'Content-Type': 'application/json' },
        body: JSON.stringify({ templateID: 'base' }),
      });
      expect(created.status).toBe(201);
      await t.control.killSandbox(((await created.json()) as { sandboxID: string }).sandboxID);
      await release(held, api, request, from);
    } finally {
      for (const s of held) s.destroy();
    }
  });

  test('over the cap, proxy connections from one address are closed as they open, while another address is served; then they are let in again', async () => {
    const from = '127.0.0.2';
    const sandbox = await t.control.createSandbox({ templateID: 'base' });
    const request = envdHealth(sandbox.sandboxID);
    const held = await fill(proxy, request, from);
    try {
      (await answeredConnection(proxy, request, noContent)).destroy();
      await release(held, proxy, request, from);
    } finally {
      for (const s of held) s.destroy();
      await t.control.killSandbox(sandbox.sandboxID);
    }
  });
});
