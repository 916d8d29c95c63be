// Who may do what: API keys on the control API, each sandbox's own envd
// token, signed file URLs bound to their path, traffic tokens, and keys
// stored only as hashes.
import { Code, ConnectError } from '@connectrpc/connect';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeFileSignature, fileSignaturePayload } from '@paddock/protocol';
import { API_KEY, envd, eventually, run, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await testServer();
});
afterAll(() => t.teardown());

test('the control API needs a valid X-API-Key everywhere but /health', async () => {
  for (const path of ['/v2/sandboxes', '/sandboxes', '/templates', '/snapshots']) {
    const none = await fetch(t.server.apiUrl + path);
    expect([none.status, await none.json()]).toEqual([401, { code: 401, message: 'missing X-API-Key header' }]);
    const wrong = await fetch(t.server.apiUrl + path, { headers: { 'X-API-Key': 'e2b_' + 'f'.repeat(40) } });
    expect([wrong.status, await wrong.json()]).toEqual([401, { code: 401, message: 'invalid API key' }]);
  }
  expect((await fetch(`${t.server.apiUrl}/health`)).status).toBe(204);
  expect((await fetch(`${t.server.apiUrl}/templates`, { headers: { 'x-api-key': API_KEY } })).status).toBe(200);
});

test('by default the proxy, like the API, listens on 127.0.0.1 only', async () => {
  // The harness sets neither apiHost nor proxyHost.
  expect(new URL(t.server.proxyUrl).hostname).toBe('127.0.0.1');
  expect(new URL(t.server.apiUrl).hostname).toBe('127.0.0.1');
  expect(t.server.config.proxyHost).toBe('127.0.0.1');
  // Through another address of this host, the proxy's port is closed.
  const external = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal);
  if (external) {
    const refused = await new Promise<string>((resolve) => {
      const sock = connect(t.server.config.proxyPort, external.address);
      sock.once('connect', () => {
        sock.destroy();
        resolve('connected');
      });
      sock.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    expect(refused).toBe('ECONNREFUSED');
  }
});

test('API keys are stored as hashes only', async () => {
  const db = readFileSync(join(t.home, 'paddock.db'));
  const wal = (() => {
    try {
      return readFileSync(join(t.home, 'paddock.db-wal'));
    } catch {
      return Buffer.alloc(0);
    }
  })();
  expect(db.includes(API_KEY)).toBe(false);
  expect(wal.includes(API_KEY)).toBe(false);
  expect((await t.server.keys.list('all'))[0]?.mask).toBe(`${API_KEY.slice(0, 8)}…${API_KEY.slice(-4)}`);
});

test("another sandbox's envd token does not open this sandbox", async () => {
  const a = await t.control.createSandbox({ templateID: 'base' });
  const b = await t.control.createSandbox({ templateID: 'base' });
  const err = await envd(t.server, b.sandboxID, a.envdAccessToken)
    .fs.stat({ path: '/' })
    .catch((e: unknown) => ConnectError.from(e));
  expect(err).toMatchObject({ code: Code.Unauthenticated });
  const files = await fetch(`${t.server.proxyUrl}/files?path=/etc/hostname`, {
    headers: { 'E2b-Sandbox-Id': b.sandboxID, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': a.envdAccessToken! },
  });
  expect(files.status).toBe(401);
  expect((await envd(t.server, b.sandboxID, b.envdAccessToken).fs.stat({ path: '/' })).entry?.path).toBe('/');
  await t.control.killSandbox(a.sandboxID);
  await t.control.killSandbox(b.sandboxID);
});

test('secure: false gives no envd token and envd answers without one; by default a request without the token is 401', async () => {
  const open = await t.control.createSandbox({ templateID: 'base', secure: false });
  const closed = await t.control.createSandbox({ templateID: 'base' });
  expect(open).not.toHaveProperty('envdAccessToken');
  expect(await t.control.getSandbox(open.sandboxID)).not.toHaveProperty('envdAccessToken');
  expect(closed.envdAccessToken).toEqual(expect.any(String));

  const headers = (id: string, extra: Record<string, string> = {}) => ({ 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', ...extra });
  const file = (id: string) => fetch(`${t.server.proxyUrl}/files?path=/etc/hostname`, { headers: headers(id) });
  const listProcesses = (id: string) =>
    fetch(`${t.server.proxyUrl}/process.Process/List`, {
      method: 'POST',
      headers: headers(id, { 'content-type': 'application/json', 'connect-protocol-version': '1' }),
      body: '{}',
    });

  // No X-Access-Token anywhere: RPCs, streams and files all work.
  expect(await run(t.server, open.sandboxID, undefined, 'echo open')).toEqual({ stdout: 'open\n', exitCode: 0 });
  expect((await file(open.sandboxID)).status).toBe(200);
  expect((await listProcesses(open.sandboxID)).status).toBe(200);

  // The same requests to a secure sandbox are refused.
  const deniedFile = await file(closed.sandboxID);
  expect([deniedFile.status, await deniedFile.json()]).toEqual([401, { code: 401, message: 'missing or invalid access token' }]);
  const deniedRpc = await listProcesses(closed.sandboxID);
  expect(deniedRpc.status).toBe(401);
  expect(await deniedRpc.json()).toMatchObject({ code: 'unauthenticated' });
  const err = await envd(t.server, closed.sandboxID, undefined)
    .fs.stat({ path: '/' })
    .catch((e: unknown) => ConnectError.from(e));
  expect(err).toMatchObject({ code: Code.Unauthenticated });
  expect((await run(t.server, closed.sandboxID, closed.envdAccessToken, 'echo closed')).stdout).toBe('closed\n');

  await t.control.killSandbox(open.sandboxID);
  await t.control.killSandbox(closed.sandboxID);
});

test('a signed URL reads its own path, without any header, and no other', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo one > ~/one.txt; echo two > ~/two.txt');
  const token = s.envdAccessToken!;
  const url = (path: string, signedFor = path, exp?: number) => {
    const q = new URLSearchParams({ path, signature: encodeFileSignature(createHash('sha256').update(fileSignaturePayload({ path: signedFor, operation: 'read', accessToken: token, expiration: exp })).digest()) });
    if (exp !== undefined) q.set('signature_expiration', String(exp));
    return `${t.server.proxyUrl}/files?${q}`;
  };
  const ok = await fetch(url('one.txt'));
  expect([ok.status, await ok.text()]).toEqual([200, 'one\n']);
  const other = await fetch(url('two.txt', 'one.txt'));
  expect([other.status, await other.json()]).toEqual([401, { code: 401, message: 'invalid signature' }]);
  const expired = await fetch(url('one.txt', 'one.txt', Math.floor(Date.now() / 1000) - 5));
  expect([expired.status, await expired.json()]).toEqual([401, { code: 401, message: 'signature is already expired' }]);
  const noSandbox = await fetch(`${t.server.proxyUrl}/files?path=one.txt`);
  expect(noSandbox.status).toBe(400);
  await t.control.killSandbox(s.sandboxID);
});

test('sandboxes are reachable by host name, and other ports need the traffic token when public traffic is off', async () => {
  const open = await t.control.createSandbox({ templateID: 'base' });
  const closed = await t.control.createSandbox({ templateID: 'base', network: { allowPublicTraffic: false } });
  expect(open.trafficAccessToken).toBeNull();
  expect(closed.trafficAccessToken).toEqual(expect.any(String));
  for (const s of [open, closed]) {
    const spawnServer = envd(t.server, s.sandboxID, s.envdAccessToken).proc.start({
      process: { cmd: '/bin/bash', args: ['-c', 'cd /tmp && echo app > index.html && exec python3 -m http.server 8080 --bind 127.0.0.1'] },
      stdin: false,
    });
    void (async () => {
      try {
        for await (const _ of spawnServer) {
          // keep the stream open while the app runs
        }
      } catch {
        // ended with the sandbox
      }
    })();
  }
  // fetch() drops a Host header; http.request sends it as given.
  const viaHost = (s: { sandboxID: string }, port: number, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; text: () => Promise<string> }>((resolve, reject) => {
      const req = request(`${t.server.proxyUrl}/index.html`, { agent: false, headers: { host: `${port}-${s.sandboxID}.${t.server.config.domain}`, ...headers } }, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: async () => body }));
      });
      req.on('error', reject);
      req.end();
    });
  await eventually(async () => (await viaHost(open, 8080)).status === 200, 'the app in the open sandbox');
  expect(await (await viaHost(open, 8080)).text()).toBe('app\n');
  expect((await viaHost(open, 49983)).status).toBe(404); // envd has no /index.html
  const denied = await viaHost(closed, 8080);
  expect(denied.status).toBe(403);
  await eventually(async () => (await viaHost(closed, 8080, { 'e2b-traffic-access-token': closed.trafficAccessToken! })).status === 200, 'the app with the traffic token');
  const nothing = await viaHost(open, 9999);
  expect(nothing.status).toBe(502);
  await t.control.killSandbox(open.sandboxID);
  await t.control.killSandbox(closed.sandboxID);
});

describe('a WebSocket upgrade passes through the proxy', () => {
  test('an Upgrade request reaches a server in the sandbox and bytes flow both ways', async () => {
    const s = await t.control.createSandbox({ templateID: 'base' });
    // A tiny upgrade server inside the sandbox: answers 101 and echoes.
    const script = [
      "const http=require('http');",
      "const srv=http.createServer((q,r)=>r.end('plain'));",
      "srv.on('upgrade',(req,sock)=>{sock.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: echo\\r\\nConnection: Upgrade\\r\\n\\r\\n');sock.on('data',d=>sock.write(d));});",
      'srv.listen(7000,"127.0.0.1");',
    ].join('');
    void (async () => {
      try {
        for await (const _ of envd(t.server, s.sandboxID, s.envdAccessToken).proc.start({ process: { cmd: 'node', args: ['-e', script] }, stdin: false })) {
          // running
        }
      } catch {
        // ended with the sandbox
      }
    })();
    const { connect } = await import('node:net');
    const port = Number(new URL(t.server.proxyUrl).port);
    const exchange = () =>
      new Promise<string>((resolve, reject) => {
        const sock = connect(port, '127.0.0.1');
        let got = '';
        sock.on('data', (d) => {
          got += d.toString();
          if (got.includes('\r\n\r\n') && !got.includes('ping')) sock.write('ping');
          if (got.includes('ping')) {
            sock.destroy();
            resolve(got);
          }
        });
        sock.on('error', reject);
        sock.on('close', () => resolve(got));
        sock.write(`GET /ws HTTP/1.1\r\nHost: 7000-${s.sandboxID}.${t.server.config.domain}\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n`);
      });
    let got = '';
    await eventually(async () => (got = await exchange()).startsWith('HTTP/1.1 101'), 'the upgrade');
    expect(got).toContain('ping');
    await t.control.killSandbox(s.sandboxID);
  });
});

test("links a sandbox's root plants never lead the proxy to a host socket or another sandbox's port", async () => {
  // A root-only service of the host on a unix socket, and a victim sandbox
  // that serves a private port (public traffic off).
  const secretDir = mkdtempSync(join(tmpdir(), 'paddock-secret-'));
  const secret = join(secretDir, 'secret.sock');
  let reached = 0;
  const hostService = createServer((s) => {
    reached++;
    s.end('HTTP/1.1 200 OK\r\ncontent-length: 11\r\nconnection: close\r\n\r\nhost-secret');
  });
  await new Promise<void>((r) => hostService.listen(secret, r));
  try {
    const victim = await t.control.createSandbox({ templateID: 'base', network: { allowPublicTraffic: false } });
    const attacker = await t.control.createSandbox({ templateID: 'base' });
    await run(t.server, victim.sandboxID, victim.envdAccessToken, 'mkdir -p /tmp/w && cd /tmp/w && echo victim-private > index.html && (setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)');
    // Where the victim's tunnel socket is (sock/) or was before it moved out of the sandbox's reach (run/).
    const victimDir = join(t.home, 'runtime', 'sandboxes', victim.sandboxID);
    const root = envd(t.server, attacker.sandboxID, attacker.envdAccessToken, 'root');
    // envd's own directory (/.paddock) is a read-only mount: links go wherever else the sandbox can write.
    const plant = [
      `for d in /run /run/sock /tmp/.paddock; do mkdir -p $d && ln -sfn ${secret} $d/envd.sock && ln -sfn ${victimDir}/sock/tunnel.sock $d/tunnel.sock && ln -sfn ${victimDir}/run/tunnel.sock $d/old-tunnel.sock; done`,
      '{ mkdir -p /.paddock/run 2>/dev/null && echo /.paddock-writable; true; }',
      'echo planted',
    ].join(' && ');
    let planted = '';
    for await (const r of root.proc.start({ process: { cmd: '/bin/bash', args: ['-c', plant] } })) {
      const ev = r.event?.event;
      if (ev?.case === 'data' && ev.value.output.case === 'stdout') planted += Buffer.from(ev.value.output.value).toString();
    }
    expect(planted).toBe('planted\n');
    // A burst of proxy requests opens new upstream connections.
    const answers = await Promise.all(
      Array.from({ length: 30 }, () => fetch(`${t.server.proxyUrl}/health`, { headers: { 'E2b-Sandbox-Id': attacker.sandboxID, 'E2b-Sandbox-Port': '49983' } }).then(async (r) => `${r.status} ${await r.text()}`)),
    );
    expect(answers.filter((a) => a !== '204 ')).toEqual([]);
    const ports = await Promise.all(
      Array.from({ length: 5 }, () => fetch(t.server.proxyUrl, { headers: { 'E2b-Sandbox-Id': attacker.sandboxID, 'E2b-Sandbox-Port': '8000' } }).then((r) => r.text())),
    );
    for (const body of ports) expect(body).not.toMatch(/victim-private|host-secret/);
    expect(reached).toBe(0);
    await t.control.killSandbox(attacker.sandboxID);
    await t.control.killSandbox(victim.sandboxID);
  } finally {
    hostService.close();
    rmSync(secretDir, { recursive: true, force: true });
  }
});
