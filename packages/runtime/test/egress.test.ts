// The egress proxy and the sandboxes' resolver on real sockets. Loopback has
// a whole /8: the proxy and resolver listen on one address, "sandboxes"
// connect from others by binding their source address, and a fake internet
// (an HTTP and an HTTPS server, a DNS server for the test names) listens on
// yet others.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage, type RequestListener } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import * as dnsPacket from 'dns-packet';
import {
  EgressProxy,
  SandboxResolver,
  hostUpstreams,
  nameserversOf,
  upstreamResolve,
  type EgressDecision,
  type EgressRules,
} from '../src/egress/index.js';

const PROXY = '127.0.0.2';
/** Everything denied but a few names and one address. */
const SANDBOX = '127.0.0.3';
/** Everything allowed but the first fake host's address. */
const OPEN_SANDBOX = '127.0.0.4';
/** Internet access off, although its allowOut names a host. */
const OFFLINE = '127.0.0.7';
/** An address that is no sandbox's. */
const STRANGER = '127.0.0.8';
const HOST_A = '127.0.0.5';
const HOST_B = '127.0.0.6';
/** Stands for a private or host address: `blocked` refuses it. */
const PRIVATE = '127.0.0.99';
const DNS = '127.0.0.20';
/** An address where nothing listens. */
const DEAD = '127.0.0.9';
const TTL = 123;

const RECORDS: Record<string, string> = {
  'allowed.test': HOST_A,
  'other.test': HOST_A,
  'wild.test': HOST_A,
  'a.wild.test': HOST_A,
  'deep.b.wild.test': HOST_A,
  'open.test': HOST_B,
  'inner.test': PRIVATE,
  'dead.test': DEAD,
};

const SANDBOX_RULES: EgressRules = {
  allowOut: ['allowed.test', '*.wild.test', 'inner.test', 'dead.test', HOST_B],
  denyOut: ['0.0.0.0/0'],
  allowInternet: true,
};
const rules = new Map<string, EgressRules>([
  [SANDBOX, SANDBOX_RULES],
  [OPEN_SANDBOX, { allowOut: [], denyOut: [`${HOST_A}/32`], allowInternet: true }],
  [OFFLINE, { allowOut: ['allowed.test'], denyOut: [], allowInternet: false }],
]);
const blocked = (ip: string) => (ip === PRIVATE ? 'in a private range' : ip === PROXY ? 'the host' : undefined);

const BIG = randomBytes(8 << 20);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let dir: string;
let cert: Buffer;
const closers: (() => Promise<unknown>)[] = [];
let webPort: number;
let tlsPort: number;
let dnsPort: number;
const asked: string[] = [];
let proxy: EgressProxy;
let resolver: SandboxResolver;
const decisions: EgressDecision[] = [];

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

const closeServer = (s: Server) => () => new Promise<void>((resolve) => s.close(() => resolve()));

/** Servers made by `make` on every host, all on one port. */
async function onEveryHost(make: () => Server, hosts: readonly string[]): Promise<number> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const started: Server[] = [];
    let port = 0;
    try {
      for (const host of hosts) {
        const s = make();
        port = await listen(s, host, port);
        started.push(s);
      }
      for (const s of started) closers.push(closeServer(s));
      return port;
    } catch {
      await Promise.all(started.map((s) => closeServer(s)()));
    }
  }
  throw new Error(`no port was free on all of ${hosts.join(', ')}`);
}

const web: RequestListener = (req, res) => {
  if (req.url === '/exchange') {
    const hash = createHash('sha256');
    req.on('data', (c: Buffer) => hash.update(c));
    req.on('end', () => {
      res.writeHead(200, { 'content-length': BIG.length, 'x-got': hash.digest('hex'), connection: 'close' });
      res.end(BIG);
    });
    return;
  }
  const name = (req.socket as TLSSocket).servername;
  res.end(`${name ? `sni ${name} ` : ''}host ${req.headers.host} at ${req.socket.localAddress}`);
};

/** A DNS server for the test names, on UDP and TCP, that notes what it was asked. */
async function startFakeDns(): Promise<number> {
  const answer = (msg: Buffer): Buffer => {
    const q = dnsPacket.decode(msg);
    const question = q.questions![0]!;
    asked.push(question.name);
    const address = RECORDS[question.name.toLowerCase()];
    return dnsPacket.encode({
      id: q.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | (address ? 0 : 3),
      questions: q.questions!,
      answers: address && question.type === 'A' ? [{ type: 'A', name: question.name, ttl: TTL, data: address }] : [],
    });
  };
  const udp = createSocket('udp4');
  udp.on('message', (msg, rinfo) => udp.send(answer(msg), rinfo.port, rinfo.address));
  await new Promise<void>((resolve) => udp.bind({ address: DNS, port: 0 }, () => resolve()));
  closers.push(() => new Promise<void>((resolve) => udp.close(() => resolve())));
  const port = udp.address().port;
  const tcp = createServer((socket) => {
    socket.on('data', (chunk: Buffer) => socket.write(dnsPacket.streamEncode(dnsPacket.decode(answer(chunk.subarray(2))))));
    socket.on('error', () => {});
  });
  await listen(tcp, DNS, port);
  closers.push(closeServer(tcp));
  return port;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paddock-egress-'));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-subj', '/CN=allowed.test',
    '-addext', 'subjectAltName=DNS:allowed.test,DNS:other.test,DNS:open.test,DNS:inner.test,DNS:*.wild.test',
  ], { stdio: 'pipe' });
  cert = readFileSync(join(dir, 'cert.pem'));
  const key = readFileSync(join(dir, 'key.pem'));
  webPort = await onEveryHost(() => createHttpServer(web), [HOST_A, HOST_B, PRIVATE]);
  tlsPort = await onEveryHost(() => createHttpsServer({ key, cert }, web), [HOST_A, HOST_B, PRIVATE]);
  dnsPort = await startFakeDns();
  proxy = new EgressProxy({
    address: PROXY,
    httpPort: 0,
    tlsPort: 0,
    rulesFor: (source) => rules.get(source),
    blocked,
    resolve: upstreamResolve([`${DNS}:${dnsPort}`]),
    upstreamPorts: { http: webPort, tls: tlsPort },
    maxHeadBytes: 4096,
    headTimeoutMs: 1000,
    onDecision: (d) => decisions.push(d),
  });
  await proxy.start();
  closers.push(() => proxy.close());
  resolver = new SandboxResolver({ address: PROXY, port: 0, upstream: [`${DNS}:${dnsPort}`], rulesFor: (s) => rules.get(s) });
  await resolver.start();
  closers.push(() => resolver.close());
});

afterAll(async () => {
  for (const close of closers.reverse()) await close();
  rmSync(dir, { recursive: true, force: true });
});

interface Reply {
  status: number;
  body: string;
  headers: IncomingMessage['headers'];
}

function collect(res: IncomingMessage): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString(), headers: res.headers }));
    res.on('error', reject);
  });
}

/** A plain HTTP request from a sandbox for `host`, through the proxy or straight to an address. */
function get(from: string, host: string, to: { address: string; port: number } = { address: PROXY, port: proxy.httpPort }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: to.address, port: to.port, localAddress: from, headers: { host }, agent: false, timeout: 5000 }, (res) =>
      collect(res).then(resolve, reject),
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** An HTTPS request through the proxy that trusts only the fake host's certificate and checks it for `name`. */
function httpsGet(from: string, name: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: PROXY, port: proxy.tlsPort, servername: name, ca: cert, localAddress: from, headers: { host: name }, agent: false, timeout: 5000 },
      (res) => collect(res).then(resolve, reject),
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** Raw bytes to a proxy port from a source address; everything read back until the proxy closes. */
function raw(
  from: string,
  port: number,
  data: string | Buffer,
  opts: { end?: boolean; timeoutMs?: number } = {},
): Promise<{ bytes: Buffer; text: string; error?: string; ms: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks: Buffer[] = [];
    let error: string | undefined;
    const socket = connect({ host: PROXY, port, localAddress: from, allowHalfOpen: true });
    const timer = setTimeout(() => {
      error = 'timeout';
      socket.destroy();
    }, opts.timeoutMs ?? 5000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', () => socket.end());
    socket.on('error', (err: NodeJS.ErrnoException) => (error ??= err.code ?? err.message));
    socket.on('close', () => {
      clearTimeout(timer);
      const bytes = Buffer.concat(chunks);
      resolve({ bytes, text: bytes.toString('latin1'), error, ms: Date.now() - started });
    });
    socket.write(data);
    if (opts.end) socket.end();
  });
}

describe('egress proxy, HTTP by Host', () => {
  test('a name in allowOut is passed to the address the proxy resolved', async () => {
    const r = await get(SANDBOX, 'allowed.test');
    expect(r).toMatchObject({ status: 200, body: `host allowed.test at ${HOST_A}` });
    expect(decisions.at(-1)).toMatchObject({ source: SANDBOX, protocol: 'http', name: 'allowed.test', allowed: true, address: HOST_A });
  });

  test('a name not in allowOut under deny-all gets a 403 naming it and why', async () => {
    const r = await get(SANDBOX, 'nowhere.test');
    expect(r.status).toBe(403);
    expect(r.body).toMatch(/^egress to nowhere\.test refused: could not resolve it \(ENOTFOUND\)/);
  });

  test('a name that shares its address with an allowed name stays denied', async () => {
    const r = await get(SANDBOX, 'other.test');
    expect(r.status).toBe(403);
    expect(r.body).toBe(`egress to other.test refused: other.test is not in allowOut and ${HOST_A} is in denyOut\n`);
  });

  test('a wildcard allows any subdomain, however deep, and not the bare domain', async () => {
    expect(await get(SANDBOX, 'a.wild.test')).toMatchObject({ status: 200, body: `host a.wild.test at ${HOST_A}` });
    expect(await get(SANDBOX, 'DEEP.b.wild.test.')).toMatchObject({ status: 200 });
    const bare = await get(SANDBOX, 'wild.test');
    expect(bare.status).toBe(403);
    expect(bare.body).toContain('wild.test is not in allowOut');
  });

  test('a name in no list is judged by the IP rules on the addresses the proxy resolved', async () => {
    // open.test resolves to HOST_B, which SANDBOX's allowOut names as an address.
    expect(await get(SANDBOX, 'open.test')).toMatchObject({ status: 200, body: `host open.test at ${HOST_B}` });
    // OPEN_SANDBOX allows everything but HOST_A.
    expect(await get(OPEN_SANDBOX, 'open.test')).toMatchObject({ status: 200 });
    const denied = await get(OPEN_SANDBOX, 'allowed.test');
    expect(denied.status).toBe(403);
    expect(denied.body).toContain(`${HOST_A} is in denyOut`);
  });

  test('a Host that is an IP literal is judged as that address', async () => {
    expect(await get(SANDBOX, `${HOST_B}:80`)).toMatchObject({ status: 200, body: `host ${HOST_B}:80 at ${HOST_B}` });
    expect((await get(SANDBOX, HOST_A)).status).toBe(403);
    const priv = await get(OPEN_SANDBOX, PRIVATE);
    expect(priv.status).toBe(403);
    expect(priv.body).toContain(`${PRIVATE} is in a private range`);
  });

  test('an allowed name that resolves to a blocked address is refused', async () => {
    const r = await get(SANDBOX, 'inner.test');
    expect(r.status).toBe(403);
    expect(r.body).toBe(`egress to inner.test refused: ${PRIVATE} is in a private range\n`);
  });

  test('an allowed name whose address does not answer gets a 502 naming the address', async () => {
    const r = await get(SANDBOX, 'dead.test');
    expect(r.status).toBe(502);
    expect(r.body).toBe(`egress to dead.test: could not connect: ${DEAD}:${webPort} ECONNREFUSED\n`);
  });

  test('a sandbox over its connection limit is closed at once; the limit frees as connections end', async () => {
    const limited = new EgressProxy({
      address: PROXY,
      httpPort: 0,
      tlsPort: 0,
      rulesFor: (source) => rules.get(source),
      blocked,
      resolve: upstreamResolve([`${DNS}:${dnsPort}`]),
      upstreamPorts: { http: webPort, tls: tlsPort },
      maxConnectionsPerSource: 2,
    });
    await limited.start();
    const held = [0, 1].map(() => connect({ host: PROXY, port: limited.httpPort, localAddress: SANDBOX }));
    try {
      await Promise.all(held.map((s) => new Promise((resolve) => s.once('connect', resolve))));
      held[0]!.write('GET / HTTP/1.1\r\n');
      const over = await raw(SANDBOX, limited.httpPort, 'GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n');
      expect(over.bytes.length).toBe(0);
      expect(over.error).not.toBe('timeout');
      // Another sandbox has a limit of its own.
      expect(await get(OPEN_SANDBOX, 'open.test', { address: PROXY, port: limited.httpPort })).toMatchObject({ status: 200 });
      await new Promise((resolve) => {
        held[0]!.once('close', resolve);
        held[0]!.destroy();
      });
      // The proxy sees the close a moment after the client.
      let status = 0;
      for (let i = 0; i < 50 && status !== 200; i++) {
        status = await get(SANDBOX, 'allowed.test', { address: PROXY, port: limited.httpPort }).then(
          (r) => r.status,
          async () => {
            await new Promise((resolve) => setTimeout(resolve, 20));
            return 0;
          },
        );
      }
      expect(status).toBe(200);
    } finally {
      for (const s of held) s.destroy();
      await limited.close();
    }
  });

  test('with internet access off nothing passes, not even a name in allowOut', async () => {
    const r = await get(OFFLINE, 'allowed.test');
    expect(r.status).toBe(403);
    expect(r.body).toContain('internet access is off');
  });

  test('a connection from an address that is no sandbox is closed unanswered', async () => {
    const r = await raw(STRANGER, proxy.httpPort, 'GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n');
    expect(r.bytes.length).toBe(0);
    // Closed at once (a reset when the request was already in the proxy's buffer), not left to time out.
    expect(r.error).not.toBe('timeout');
    expect(decisions.some((d) => d.source === STRANGER)).toBe(false);
  });

  test('two Host headers, a folded line, an absolute target for another host: 400 naming the fault', async () => {
    const cases: [string, string][] = [
      ['GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: other.test\r\n\r\n', 'request has more than one Host header'],
      ['GET / HTTP/1.1\r\nhost: allowed.test\r\nHOST: allowed.test\r\n\r\n', 'request has more than one Host header'],
      ['GET / HTTP/1.1\r\nHost: allowed.test\r\nX-A: b\r\n c\r\n\r\n', 'request head has a folded header line'],
      ['GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n', "request target names 'other.test' but Host names 'allowed.test'"],
      ['GET / HTTP/1.1\r\nX: y\r\n\r\n', 'request has no Host header'],
      ['GET / HTTP/1.1\nHost: allowed.test\r\n\r\n', 'request head has a bare CR or LF'],
      ['GET / HTTP/1.1\r\nHost: allowed.test/x\r\n\r\n', "Host 'allowed.test/x' is not a host name or address"],
      ['CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n', 'CONNECT is not passed on'],
    ];
    for (const [head, why] of cases) {
      const r = await raw(SANDBOX, proxy.httpPort, head);
      expect(r.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(r.text.slice(r.text.indexOf('\r\n\r\n') + 4)).toBe(`${why}\n`);
    }
    // The absolute form naming the Host's own host is fine.
    const same = await raw(SANDBOX, proxy.httpPort, 'GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n');
    expect(same.text).toMatch(/^HTTP\/1\.1 200 OK/);
  });

  test('a head that is slow or too large is cut off at its bound', async () => {
    const slow = await raw(SANDBOX, proxy.httpPort, 'GET / HTTP/1.1\r\nHost: allowed.test\r\n');
    expect(slow.text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[^]*request head did not arrive within 1000 ms\n$/);
    expect(slow.ms).toBeLessThan(4000);
    const big = await raw(SANDBOX, proxy.httpPort, `GET / HTTP/1.1\r\nHost: allowed.test\r\nX-Pad: ${'a'.repeat(5000)}\r\n\r\n`);
    expect(big.text).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n[^]*larger than 4096 bytes\n$/);
  });

  test('bytes flow both ways with back-pressure and half-close', async () => {
    const upload = randomBytes(8 << 20);
    const head = `POST /exchange HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: ${upload.length}\r\n\r\n`;
    // The client shuts its sending side once the upload is written and still reads the whole answer.
    const r = await raw(SANDBOX, proxy.httpPort, Buffer.concat([Buffer.from(head), upload]), { end: true, timeoutMs: 30000 });
    expect(r.error).toBeUndefined();
    const split = r.bytes.indexOf('\r\n\r\n');
    const responseHead = r.bytes.subarray(0, split).toString();
    expect(responseHead).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(responseHead).toContain(`x-got: ${sha(upload)}`);
    const body = r.bytes.subarray(split + 4);
    expect(body.length).toBe(BIG.length);
    expect(sha(body)).toBe(sha(BIG));
  });

  test('after a rules change, open connections the new rules deny are reset', async () => {
    const socket = connect({ host: PROXY, port: proxy.httpPort, localAddress: SANDBOX });
    const closed = new Promise<string | undefined>((resolve) => {
      let code: string | undefined;
      socket.on('error', (err: NodeJS.ErrnoException) => (code = err.code));
      socket.on('close', () => resolve(code));
    });
    const firstAnswer = new Promise<string>((resolve) => socket.once('data', (c: Buffer) => resolve(c.toString())));
    socket.write('GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n');
    expect(await firstAnswer).toMatch(/^HTTP\/1\.1 200 OK/);
    try {
      expect(proxy.reconsider(SANDBOX)).toBe(0);
      rules.set(SANDBOX, { ...SANDBOX_RULES, allowOut: ['*.wild.test'] });
      expect(proxy.reconsider(SANDBOX)).toBe(1);
      expect(await closed).toBe('ECONNRESET');
    } finally {
      rules.set(SANDBOX, SANDBOX_RULES);
      socket.destroy();
    }
  });
});

describe('egress proxy, TLS by SNI', () => {
  test('an allowed name passes untouched: the client verifies the real server certificate end to end', async () => {
    const r = await httpsGet(SANDBOX, 'allowed.test');
    expect(r).toMatchObject({ status: 200, body: `sni allowed.test host allowed.test at ${HOST_A}` });
    expect(decisions.at(-1)).toMatchObject({ protocol: 'tls', name: 'allowed.test', allowed: true, address: HOST_A });
    expect(await httpsGet(SANDBOX, 'a.wild.test')).toMatchObject({ status: 200, body: `sni a.wild.test host a.wild.test at ${HOST_A}` });
  });

  test('a denied name is refused with an access_denied alert', async () => {
    await expect(httpsGet(SANDBOX, 'other.test')).rejects.toThrow(/alert access denied/);
    expect(decisions.at(-1)).toMatchObject({ protocol: 'tls', name: 'other.test', allowed: false });
    await expect(httpsGet(SANDBOX, 'inner.test')).rejects.toThrow(/alert access denied/);
    expect(decisions.at(-1)!.reason).toBe(`${PRIVATE} is in a private range`);
    await expect(httpsGet(OFFLINE, 'allowed.test')).rejects.toThrow(/alert access denied/);
  });

  test('a name in no list is judged by the IP rules', async () => {
    expect(await httpsGet(SANDBOX, 'open.test')).toMatchObject({ status: 200, body: `sni open.test host open.test at ${HOST_B}` });
  });

  test('an unknown source, a stream that is not TLS and a slow hello are closed', async () => {
    const stranger = await raw(STRANGER, proxy.tlsPort, 'x');
    expect(stranger.bytes.length).toBe(0);
    expect(stranger.error).not.toBe('timeout');
    const notTls = await raw(SANDBOX, proxy.tlsPort, 'GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n');
    expect([...notTls.bytes]).toEqual([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31]);
    // A record header announcing more than is ever sent.
    const slow = await raw(SANDBOX, proxy.tlsPort, Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
    expect(slow.ms).toBeLessThan(4000);
    expect(slow.error).toBeUndefined();
  });
});

describe('sandbox resolver', () => {
  /** Node's resolver (c-ares) asking from a sandbox's address; a new one each time, so nothing is cached. */
  function ask(from: string, opts: { port?: number; timeout?: number } = {}): Resolver {
    const r = new Resolver({ timeout: opts.timeout ?? 3000, tries: 1 });
    r.setServers([`${PROXY}:${opts.port ?? resolver.port}`]);
    r.setLocalAddress(from);
    return r;
  }

  test('an allowed name is answered with the upstream record and its TTL', async () => {
    expect(await ask(SANDBOX).resolve4('allowed.test', { ttl: true })).toEqual([{ address: HOST_A, ttl: TTL }]);
    expect(await ask(SANDBOX).resolve4('x.wild.test', { ttl: true }).catch((e: NodeJS.ErrnoException) => e.code)).toBe('ENOTFOUND');
  });

  test('a name the sandbox may not reach is REFUSED without asking upstream', async () => {
    asked.length = 0;
    await expect(ask(SANDBOX).resolve4('other.test')).rejects.toMatchObject({ code: 'EREFUSED' });
    await expect(ask(SANDBOX).resolve4('exfiltrate-this.example.com')).rejects.toMatchObject({ code: 'EREFUSED' });
    expect(asked).toEqual([]);
    // Without deny-all, every name is forwarded.
    expect(await ask(OPEN_SANDBOX).resolve4('other.test')).toEqual([HOST_A]);
  });

  test('with internet access off every name is REFUSED', async () => {
    await expect(ask(OFFLINE).resolve4('allowed.test')).rejects.toMatchObject({ code: 'EREFUSED' });
  });

  test('a query from an address that is no sandbox is REFUSED', async () => {
    await expect(ask(STRANGER).resolve4('allowed.test')).rejects.toMatchObject({ code: 'EREFUSED' });
  });

  test('an upstream that is down or silent gives SERVFAIL within a bounded time', async () => {
    const silent: UdpSocket = createSocket('udp4');
    await new Promise<void>((resolve) => silent.bind({ address: DNS, port: 0 }, () => resolve()));
    const down = createSocket('udp4');
    await new Promise<void>((resolve) => down.bind({ address: DNS, port: 0 }, () => resolve()));
    const downPort = down.address().port;
    await new Promise<void>((resolve) => down.close(() => resolve()));
    const failing = new SandboxResolver({
      address: PROXY,
      port: 0,
      upstream: [`${DNS}:${downPort}`, `${DNS}:${silent.address().port}`],
      rulesFor: (s) => rules.get(s),
      timeoutMs: 500,
    });
    await failing.start();
    try {
      const started = Date.now();
      await expect(ask(SANDBOX, { port: failing.port, timeout: 5000 }).resolve4('allowed.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
      const ms = Date.now() - started;
      expect(ms).toBeGreaterThanOrEqual(400);
      expect(ms).toBeLessThan(3000);
    } finally {
      await failing.close();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  test('a resolver whose port is taken fails to start with the bind error', async () => {
    const second = new SandboxResolver({ address: PROXY, port: resolver.port, upstream: [], rulesFor: () => undefined });
    await expect(second.start()).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await second.close();
  });

  test('TCP queries work, several on one connection', async () => {
    const socket = connect({ host: PROXY, port: resolver.port, localAddress: SANDBOX });
    const replies = new Promise<dnsPacket.Packet[]>((resolve, reject) => {
      let buffer = Buffer.alloc(0);
      const got: dnsPacket.Packet[] = [];
      const timer = setTimeout(() => reject(new Error('no TCP answers in time')), 5000);
      socket.on('data', (c: Buffer) => {
        buffer = Buffer.concat([buffer, c]);
        while (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
          got.push(dnsPacket.streamDecode(buffer));
          buffer = buffer.subarray(2 + buffer.readUInt16BE(0));
        }
        if (got.length === 2) {
          clearTimeout(timer);
          resolve(got);
        }
      });
      socket.on('error', reject);
    });
    const query = (id: number, name: string) =>
      dnsPacket.streamEncode({ id, type: 'query', flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', class: 'IN', name }] });
    socket.write(Buffer.concat([query(7, 'allowed.test'), query(8, 'other.test')]));
    try {
      const [allowed, denied] = (await replies).sort((a, b) => a.id! - b.id!) as (dnsPacket.DecodedPacket & { rcode: string })[];
      expect(allowed).toMatchObject({ id: 7, rcode: 'NOERROR', answers: [{ type: 'A', name: 'allowed.test', ttl: TTL, data: HOST_A }] });
      expect(denied).toMatchObject({ id: 8, rcode: 'REFUSED', answers: [] });
    } finally {
      socket.destroy();
    }
  });
});

describe('upstream servers', () => {
  test('loopback stubs are used only when no other server is known', () => {
    expect(nameserversOf('# c\nnameserver 127.0.0.53\noptions edns0\nnameserver 192.0.2.1\nnameserver fe80::1%eth0\n')).toEqual([
      '127.0.0.53',
      '192.0.2.1',
      'fe80::1%eth0',
    ]);
    const stub = join(dir, 'stub.conf');
    const real = join(dir, 'real.conf');
    writeFileSync(stub, 'nameserver 127.0.0.53\n');
    writeFileSync(real, 'nameserver 192.0.2.1\nnameserver 192.0.2.2\n');
    expect(hostUpstreams([stub, real])).toEqual(['192.0.2.1', '192.0.2.2']);
    expect(hostUpstreams([stub, join(dir, 'missing.conf')])).toEqual(['127.0.0.53']);
  });
});

test('per-connection cost of the proxy against a direct connection', async () => {
  // Rounds alternate so that load from others on the machine falls on both
  // ways alike; the medians of the rounds are compared.
  const rounds = 8;
  const n = 100;
  const round = async (to: { address: string; port: number }) => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < n; i++) expect((await get(SANDBOX, 'allowed.test', to)).status).toBe(200);
    return Number(process.hrtime.bigint() - started) / 1e6 / n;
  };
  const direct: number[] = [];
  const proxied: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const d = await round({ address: HOST_A, port: webPort });
    const p = await round({ address: PROXY, port: proxy.httpPort });
    // The first round warms both up.
    if (r > 0) {
      direct.push(d);
      proxied.push(p);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const [d, p] = [median(direct), median(proxied)];
  console.log(
    `egress proxy, HTTP requests each on a new connection (median of ${rounds} rounds of ${n}): direct ${d.toFixed(3)} ms, ` +
      `through the proxy ${p.toFixed(3)} ms, cost ${(p - d).toFixed(3)} ms per connection (x${(p / d).toFixed(2)})`,
  );
});
