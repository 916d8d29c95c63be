// The byte relay behind the sandbox proxy, against real HTTP servers on
// loopback: framing (lengths, chunks, HEAD, 1xx, 204/304, close-delimited),
// keep-alive and pooling, pipelining, upgrades, back-pressure, failures on
// either side, and the answers to malformed requests.
import { createHash, randomBytes } from 'node:crypto';
import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { BodyCounter, HeadChunks, HttpError, headEnd, parseRequestHead, requestFraming, responseFraming, parseResponseHead } from '../src/relay/http1.js';
import { pumpable, startPump } from '../src/relay/pump.js';
import { Relay, type Destination, type RelayOptions } from '../src/relay/relay.js';
import { answeredConnection, rawExchange, untilClosed } from './raw-http.js';

const listening = async <T extends NetServer>(s: T): Promise<number> => {
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return (s.address() as AddressInfo).port;
};
const closing = (s: NetServer) => new Promise<void>((r) => s.close(() => r()));

/** Upstreams the tests route to, by the `x-to` header. */
let upstreams: Map<string, { port: number; pooled: boolean }>;
let relay: Relay;
let relayPort: number;
let opened: string[]; // destinations whose connection was opened, in order
let servers: NetServer[];
/** Relays with limits of their own, in front of the same upstreams. */
let limited: Relay[];
/** Routing waits for this. */
let gate: Promise<void>;

async function upstream(name: string, handler: (req: IncomingMessage, res: ServerResponse) => void, pooled = true): Promise<Server> {
  const s = createServer({ keepAliveTimeout: 60_000 }, handler);
  servers.push(s);
  upstreams.set(name, { port: await listening(s), pooled });
  return s;
}

async function rawUpstream(name: string, onConnection: (sock: Socket) => void, pooled = true): Promise<NetServer> {
  const s = createNetServer(onConnection);
  servers.push(s);
  upstreams.set(name, { port: await listening(s), pooled });
  return s;
}

beforeEach(async () => {
  upstreams = new Map();
  opened = [];
  servers = [];
  limited = [];
  gate = Promise.resolve();
  relay = new Relay({
    poolIdleMs: 5_000,
    async route(head): Promise<Destination> {
      const to = head.fields.find((f) => f.lower === 'x-to')?.value ?? '';
      await gate;
      if (to === 'forbidden') throw new HttpError(403, 'not for you');
      const u = upstreams.get(to);
      if (!u) throw new HttpError(502, `no upstream '${to}'`);
      return {
        name: `upstream '${to}'`,
        poolKey: u.pooled ? to : undefined,
        open: () =>
          new Promise((resolve, reject) => {
            const sock = connect(u.port, '127.0.0.1');
            sock.once('connect', () => {
              opened.push(to);
              resolve(sock);
            });
            sock.once('error', reject);
          }),
      };
    },
  });
  relayPort = await listening(relay.server);
});

afterEach(async () => {
  for (const r of [relay, ...limited]) {
    r.destroyConnections();
    await closing(r.server);
  }
  for (const s of servers) {
    (s as Server).closeAllConnections?.();
    await closing(s);
  }
});

const raw = (bytes: string | Buffer, done?: (text: string) => boolean) => rawExchange(relayPort, bytes, done);

interface Reply {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

function send(path: string, opts: { to: string; method?: string; body?: Buffer | string; headers?: Record<string, string>; agent?: Agent }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { port: relayPort, host: '127.0.0.1', path, method: opts.method ?? 'GET', agent: opts.agent ?? false, headers: { 'x-to': opts.to, ...opts.headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/**
 * An upstream writes `part` over and over, with `headers` (no length: a
 * chunked stream), to a raw client that goes away once it has `enough`
 * bytes; resolves once the upstream saw its response closed.
 */
async function clientLeavesMidResponse(part: Buffer, headers: Record<string, string>, enough: number): Promise<void> {
  let ended!: () => void;
  const aborted = new Promise<void>((resolve) => (ended = resolve));
  await upstream('endless', (_req, res) => {
    res.writeHead(200, headers);
    const more = () => {
      while (!res.destroyed && res.write(part));
    };
    res.on('drain', more);
    more();
    res.once('close', ended);
  });
  await raw('GET /out HTTP/1.1\r\nHost: h\r\nx-to: endless\r\n\r\n', (t) => t.length > enough);
  await aborted;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

const echo = (req: IncomingMessage, res: ServerResponse) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    res.setHeader('x-method', req.method!);
    res.setHeader('x-headers', JSON.stringify(req.headers));
    res.setHeader('x-sha', sha(body));
    res.end(body);
  });
};

/** An echo upstream; the set holds each connection it was asked on. */
async function echoUpstream(name: string): Promise<Set<unknown>> {
  const sockets = new Set<unknown>();
  await upstream(name, (req, res) => {
    sockets.add(req.socket);
    echo(req, res);
  });
  return sockets;
}

/**
 * Sends `parts` of an upload that never completes to a relay with a 300 ms
 * body timeout, in front of upstream 'a'. Resolves with what the client got
 * before the relay closed its connection, once the upstream saw its request close.
 */
async function stalledUpload(...parts: (string | Buffer)[]): Promise<string> {
  const quickPort = await limitedRelay({ bodyTimeoutMs: 300 });
  let aborted!: () => void;
  const upstreamSaw = new Promise<void>((r) => (aborted = r));
  await upstream('a', (req) => {
    req.resume();
    req.once('close', aborted);
  });
  const got = await new Promise<string>((resolve, reject) => {
    const sock = connect(quickPort, '127.0.0.1');
    let text = '';
    sock.on('data', (d: Buffer) => (text += d.toString()));
    sock.on('error', reject);
    sock.on('close', () => resolve(text));
    for (const part of parts) sock.write(part);
  });
  await upstreamSaw;
  return got;
}

/** Starts a relay with these limits, routing as the others do; gives its port. */
async function limitedRelay(options: Omit<RelayOptions, 'route'>): Promise<number> {
  const r = new Relay({ ...options, route: relay.options.route });
  limited.push(r);
  return listening(r.server);
}

describe('messages pass through whole', () => {
  test('requests and responses with bodies, on one kept-alive client connection and one pooled upstream connection', async () => {
    const sockets = await echoUpstream('a');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const first = await send('/x?y=1', { to: 'a', method: 'POST', body: 'hello', agent });
    expect([first.status, first.body.toString(), first.headers['x-method']]).toEqual([200, 'hello', 'POST']);
    const second = await send('/x', { to: 'a', agent });
    expect([second.status, second.body.length]).toEqual([200, 0]);
    expect(sockets.size).toBe(1);
    expect(opened).toEqual(['a']);
    agent.destroy();
  });

  test('hop-by-hop fields stay behind, in both directions', async () => {
    await upstream('a', (req, res) => {
      res.setHeader('keep-alive', 'timeout=5');
      res.setHeader('connection', 'x-secret');
      res.setHeader('x-secret', 'upstream');
      res.setHeader('x-kept', 'yes');
      echo(req, res);
    });
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nConnection: keep-alive, x-private\r\nx-private: 1\r\nTE: trailers\r\nx-public: 2\r\n\r\n', (t) => {
      const end = t.indexOf('\r\n\r\n');
      return end > 0 && t.length >= end + 4 + Number(/content-length: (\d+)/i.exec(t)?.[1] ?? 0);
    });
    const seen = JSON.parse(/x-headers: (.*)\r\n/.exec(r.text)![1]!) as Record<string, string>;
    expect(seen['x-public']).toBe('2');
    expect(seen['x-private']).toBeUndefined();
    expect(seen['te']).toBeUndefined();
    expect(seen['connection']).toBeUndefined();
    expect(r.text).toMatch(/x-kept: yes/i);
    expect(r.text).not.toMatch(/keep-alive: timeout/i);
    expect(r.text).not.toMatch(/x-secret/i);
  });

  test('a chunked request body, with an extension and a trailer, arrives as sent', async () => {
    await upstream('a', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => res.end(JSON.stringify({ body: Buffer.concat(chunks).toString(), trailers: req.trailers })));
    });
    const r = await raw('POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-check: ok\r\n\r\n', (t) => t.includes('}'));
    expect(r.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(r.text.slice(r.text.indexOf('{')))).toEqual({ body: 'hello world', trailers: { 'x-check': 'ok' } });
  });

  test('8 MiB each way, through back-pressure on both sides, arrives intact', async () => {
    await upstream('a', echo);
    const body = randomBytes(8 * 1024 * 1024);
    const r = await send('/big', { to: 'a', method: 'PUT', body });
    expect(r.headers['x-sha']).toBe(sha(body));
    expect(r.body.equals(body)).toBe(true);
  });

  test('a body that arrives while its request is still being routed is held back, then passed on whole', async () => {
    await upstream('a', echo);
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    const body = randomBytes(6 * 1024 * 1024);
    const reply = send('/held', { to: 'a', method: 'PUT', body });
    // Far more than the relay holds (1 MiB) is on its way before the route is known.
    setTimeout(open, 300);
    const r = await reply;
    expect(r.headers['x-sha']).toBe(sha(body));
    expect(r.body.equals(body)).toBe(true);
    // It waited in the kernel, not in the relay: all of it but what came with the head
    // and one more read went through the pump, and so did the whole answer.
    expect(relay.pumped.bodies).toBe(2);
    expect(relay.pumped.bytes).toBeGreaterThan(2 * body.length - 256 * 1024);
  });

  test('a streamed response reaches the client piece by piece, before the upstream ends it', async () => {
    let next!: () => void;
    await upstream('a', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first;');
      next = () => res.end('second');
    });
    const got = await new Promise<string>((resolve, reject) => {
      const req = request({ port: relayPort, host: '127.0.0.1', agent: false, headers: { 'x-to': 'a' } }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
          // The second piece is written only once the first one has arrived here.
          if (text === 'first;') next();
        });
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end();
    });
    expect(got).toBe('first;second');
  });

  test('HEAD, 204 and 304 carry no body, and the next request on the connection is read right', async () => {
    await upstream('a', (req, res) => {
      if (req.url === '/204') res.writeHead(204).end();
      else if (req.url === '/304') res.writeHead(304, { etag: '"x"' }).end();
      else res.end('body!');
    });
    const ask = (method: string, path: string) => `${method} ${path} HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n`;
    const r = await raw(ask('HEAD', '/') + ask('GET', '/204') + ask('GET', '/304') + ask('GET', '/'), (t) => t.endsWith('body!'));
    const statuses = [...r.text.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => m[1]);
    expect(statuses).toEqual(['200', '204', '304', '200']);
    expect(r.text.split('body!').length).toBe(2); // only the GET's body
  });

  test('pipelined requests with bodies are answered in order', async () => {
    await upstream('a', echo);
    const post = (body: string) => `POST /p HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const r = await raw(post('one') + post('two') + post('three'), (t) => t.endsWith('three'));
    expect(r.text.match(/\r\n\r\n(one|two|three)/g)!.map((s) => s.trim())).toEqual(['one', 'two', 'three']);
  });

  test('Expect: 100-continue gets the interim answer before the body is sent', async () => {
    await upstream('a', echo);
    const got = await new Promise<string>((resolve, reject) => {
      const sock = connect(relayPort, '127.0.0.1');
      let text = '';
      sock.on('data', (d: Buffer) => {
        text += d.toString();
        if (text === 'HTTP/1.1 100 Continue\r\n\r\n') sock.write('hello');
        if (text.endsWith('hello')) {
          sock.destroy();
          resolve(text);
        }
      });
      sock.on('error', reject);
      sock.write('PUT / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n');
    });
    expect(got).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
  });

  test('a response delimited by the end of the connection is passed on whole, and the client connection closes after it', async () => {
    await rawUpstream('old', (sock) => {
      sock.once('data', () => sock.end('HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nuntil the end'));
    });
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: old\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/connection: close\r\n/);
    expect(r.text.endsWith('\r\n\r\nuntil the end')).toBe(true);
  });

  test('an HTTP/1.0 request is answered and its connection closed', async () => {
    await upstream('a', (_req, res) => res.end('ten'));
    const r = await raw('GET / HTTP/1.0\r\nx-to: a\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nten$/);
  });

  test('an Upgrade is forwarded as sent and the connections are spliced', async () => {
    await rawUpstream(
      'ws',
      (sock) => {
        let head = '';
        sock.on('data', (d: Buffer) => {
          if (!head.includes('\r\n\r\n')) {
            head += d.toString();
            if (head.includes('\r\n\r\n')) sock.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\nx-saw: ${head.includes('Upgrade: echo') ? 'upgrade' : 'none'}\r\n\r\n`);
            return;
          }
          sock.write(d);
        });
      },
      false,
    );
    const r = await new Promise<string>((resolve, reject) => {
      const sock = connect(relayPort, '127.0.0.1');
      let text = '';
      sock.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.endsWith('\r\n\r\n')) sock.write('ping');
        if (text.endsWith('ping')) {
          sock.destroy();
          resolve(text);
        }
      });
      sock.on('error', reject);
      sock.write('GET /ws HTTP/1.1\r\nHost: h\r\nx-to: ws\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n');
    });
    expect(r).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n[^]*x-saw: upgrade\r\n\r\nping$/);
  });
});

describe('bodies of known length go through the pump', () => {
  test('a large upload and its answer arrive intact, the connections stay usable, and the pump moved both', async () => {
    const sockets = await echoUpstream('a');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (const size of [3 * 1024 * 1024, 5 * 1024 * 1024 + 17]) {
      const body = randomBytes(size);
      const r = await send('/up', { to: 'a', method: 'POST', body, agent });
      expect(r.headers['x-sha']).toBe(sha(body));
      expect(r.body.equals(body)).toBe(true);
    }
    // A small request after them, on the same two connections, is read right.
    const small = await send('/small', { to: 'a', method: 'POST', body: 'tail', agent });
    expect(small.body.toString()).toBe('tail');
    expect(sockets.size).toBe(1);
    expect(opened).toEqual(['a']);
    // Each of the four large bodies (two requests, two answers) went through the pump.
    expect(relay.pumped.bodies).toBe(4);
    expect(relay.pumped.bytes).toBeGreaterThan(12 * 1024 * 1024);
    agent.destroy();
  });

  test('a pump that cannot start leaves the sockets as they were, and the relay moves the body itself', () => {
    const started: string[] = [];
    class FakeHandle {
      reading = true;
      constructor(readonly fd: number) {}
      readStart() {
        started.push('start');
        return 0;
      }
      readStop() {
        started.push('stop');
        return 0;
      }
    }
    const withHandle = (fd: number) => Object.assign(new PassThrough(), { _handle: new FakeHandle(fd) });
    // Descriptors that are not open: the native start fails at its first dup.
    const from = withHandle(2_000_000);
    from.resume();
    const to = withHandle(2_000_001);
    expect(pumpable(from, to)).toBe(true);
    expect(startPump(from, to, 1 << 20, 0, () => started.push('done'))).toBeUndefined();
    // Reading stopped for the attempt and started again after it, through the handle's own readStart.
    expect(started).toEqual(['stop', 'start']);
    expect(Object.hasOwn(from._handle, 'readStart')).toBe(false);
    expect(from._handle.reading).toBe(true);
  });

  test("to and from an upstream on a unix socket, as envd's is", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-unix-'));
    const path = join(dir, 'up.sock');
    const s = createServer(echo);
    await new Promise<void>((r) => s.listen(path, () => r()));
    const viaUnix = new Relay({
      route: async () => ({
        name: 'unix upstream',
        poolKey: path,
        open: () =>
          new Promise((resolve, reject) => {
            const sock = connect(path);
            sock.once('connect', () => resolve(sock));
            sock.once('error', reject);
          }),
      }),
    });
    const port = await listening(viaUnix.server);
    try {
      const body = randomBytes(4 * 1024 * 1024 + 3);
      const r = await new Promise<Reply>((resolve, reject) => {
        const req = request({ port, host: '127.0.0.1', method: 'PUT', path: '/', agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.end(body);
      });
      expect(r.headers['x-sha']).toBe(sha(body));
      expect(r.body.equals(body)).toBe(true);
      expect(viaUnix.pumped.bodies).toBe(2);
    } finally {
      viaUnix.destroyConnections();
      await closing(viaUnix.server);
      s.closeAllConnections();
      await closing(s);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a body pumped into a unix socket is taken whole while the other end has read none of it, as far as net.core.wmem_max lets the send buffer grow', async () => {
    // The pump raises a unix destination's send buffer to hold the body. Left
    // at net.core.wmem_default (208 KiB on most hosts), this pump would wait
    // for the reader after about that much, and never end here. On a host
    // whose wmem_max is no larger than its wmem_default the body is that
    // small, and the test shows little.
    const length = Math.min(1 << 20, Number(readFileSync('/proc/sys/net/core/wmem_max', 'utf8')));
    const dir = mkdtempSync(join(tmpdir(), 'relay-sndbuf-'));
    const path = join(dir, 'up.sock');
    const sockets: Socket[] = [];
    const accepted = (server: NetServer) => new Promise<Socket>((resolve) => server.once('connection', (s: Socket) => resolve(s)));
    // Neither server reads what it accepts until told to.
    const reader = createNetServer({ pauseOnConnect: true });
    const source = createNetServer({ pauseOnConnect: true });
    try {
      await new Promise<void>((r) => reader.listen(path, () => r()));
      const port = await listening(source);
      const readerSide = accepted(reader);
      const to = connect(path);
      const fromSide = accepted(source);
      const sender = connect(port, '127.0.0.1');
      const [r, from] = await Promise.all([readerSide, fromSide]);
      sockets.push(r, from, to, sender);
      await new Promise<void>((resolve) => (to.connecting ? to.once('connect', () => resolve()) : resolve()));
      const body = randomBytes(length);
      sender.end(body);
      expect(pumpable(from, to)).toBe(true);
      const ended = new Promise((resolve) => startPump(from, to, length, 0, resolve));
      // Only a guard against waiting forever for a pump that stalled; not a measure of speed.
      const stalled = new Promise((resolve) => setTimeout(() => resolve('stalled: the reader was never asked for room'), 10_000).unref());
      expect(await Promise.race([ended, stalled])).toEqual({ code: null, moved: length, side: null });
      // And it all arrives, in order, once the reader reads.
      const got: Buffer[] = [];
      let have = 0;
      await new Promise<void>((resolve) => {
        r.on('data', (c: Buffer) => {
          got.push(c);
          if ((have += c.length) === length) resolve();
        });
        r.resume();
      });
      expect(Buffer.concat(got).equals(body)).toBe(true);
    } finally {
      for (const s of sockets) s.destroy();
      await closing(reader);
      await closing(source);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a request pipelined right behind a large body is read after it', async () => {
    await upstream('a', echo);
    const body = Buffer.alloc(2 * 1024 * 1024, 'b');
    const r = await raw(
      Buffer.concat([Buffer.from(`PUT /one HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: ${body.length}\r\n\r\n`), body, Buffer.from('GET /two HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n')]),
      (t) => t.includes('x-method: GET') && t.endsWith('\r\n\r\n'),
    );
    expect(r.text).toContain(`x-sha: ${sha(body)}`);
    expect(r.text).toMatch(/x-method: GET\r\n[^]*Content-Length: 0\r\n\r\n$/);
    expect(relay.pumped.bodies).toBeGreaterThanOrEqual(1);
  });

  test('a client that goes away mid-upload ends the request upstream, and the relay goes on', async () => {
    let got = 0;
    let closedUpstream!: () => void;
    const upstreamClosed = new Promise<void>((r) => (closedUpstream = r));
    await upstream('a', (req) => {
      req.on('data', (c: Buffer) => (got += c.length));
      req.socket.once('close', closedUpstream);
    });
    const sock = connect(relayPort, '127.0.0.1');
    sock.write(`POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`);
    sock.write(Buffer.alloc(1024 * 1024, 1));
    await new Promise((r) => setTimeout(r, 200));
    sock.destroy();
    await upstreamClosed;
    expect(got).toBeGreaterThan(0);
    expect(got).toBeLessThanOrEqual(1024 * 1024);
    await upstream('b', (_req, res) => res.end('still here'));
    expect((await send('/', { to: 'b' })).body.toString()).toBe('still here');
  });

  test('an answer that comes before the upload is whole is passed on at once', async () => {
    let upstreamSide: Socket | undefined;
    await rawUpstream('early', (sock) =>
      sock.once('data', () => {
        // Reads nothing more: the rest of the body stays in flight.
        upstreamSide = sock;
        sock.pause();
        sock.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big!');
      }),
    );
    const body = Buffer.alloc(16 * 1024 * 1024, 'x');
    const r = await raw(Buffer.concat([Buffer.from(`PUT / HTTP/1.1\r\nHost: h\r\nx-to: early\r\nContent-Length: ${body.length}\r\n\r\n`), body]), (t) => t.endsWith('too big!'));
    expect(r.text).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big!$/);
    // The pump was stopped mid-body, and the relay closed that upstream connection.
    expect(relay.pumped.bodies).toBe(0);
    upstreamSide!.resume();
    await new Promise((r) => upstreamSide!.once('close', r));
  });

  test('an upload that stalls while the pump has it is cut off after the body timeout', async () => {
    const head = `POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: ${4 * 1024 * 1024}\r\n\r\n`;
    expect(await stalledUpload(head, Buffer.alloc(512 * 1024, 2))).toBe('');
  });

  test('an upstream that stops mid-download cuts the client off, and its connection is not kept', async () => {
    await rawUpstream('short', (sock) =>
      sock.once('data', () => {
        sock.write(`HTTP/1.1 200 OK\r\ncontent-length: ${8 * 1024 * 1024}\r\n\r\n`);
        sock.end(Buffer.alloc(2 * 1024 * 1024, 'y'));
      }),
    );
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: short\r\n\r\n');
    expect(r.closed).toBe(true);
    const body = r.text.slice(r.text.indexOf('\r\n\r\n') + 4);
    expect(body.length).toBe(2 * 1024 * 1024);
    expect(relay.pumped.bodies).toBe(0);
  });

  test('a client that goes away mid-download ends the response upstream', async () => {
    const part = Buffer.alloc(1024 * 1024, 'z');
    await clientLeavesMidResponse(part, { 'content-length': String(64 * part.length) }, 2 * part.length);
  });
});

describe('chunked responses go through the pump from inside a large chunk', () => {
  /** One chunk as it goes on the wire: its size (as written) and extension, then its data and CRLF. */
  const chunk = (data: Buffer, size = data.length.toString(16), ext = '') => Buffer.concat([Buffer.from(`${size}${ext}\r\n`, 'latin1'), data, Buffer.from('\r\n')]);
  const fill = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff));
  const bodyOf = (text: string) => text.slice(text.indexOf('\r\n\r\n') + 4);
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('the framing arrives byte for byte as sent: small and large chunks, sizes in any case with leading zeros, an extension, a size line cut in two, a trailer', async () => {
    // Sent piece by piece, so that the chunk boundaries fall both where the pump reads the framing and where the relay does.
    const pieces: Buffer[] = [];
    for (let i = 0; i < 24; i++) {
      pieces.push(chunk(fill(20, i)), chunk(fill(64 * 1024 + i, i)));
      // 0x1900A, written 0001900A.
      if (i === 6) pieces.push(chunk(fill(100 * 1024 + 10, 1), `000${(100 * 1024 + 10).toString(16).toUpperCase()}`));
      if (i === 9) pieces.push(chunk(fill(16, 2), '10', ';name=value'));
      if (i === 13) {
        const c = chunk(fill(40 * 1024, 3));
        pieces.push(c.subarray(0, 2), c.subarray(2));
      }
    }
    pieces.push(Buffer.from('0\r\nx-trailer: t\r\n\r\n', 'latin1'));
    const sent = Buffer.concat(pieces);
    await rawUpstream('chunks', (sock) =>
      sock.once('data', async () => {
        sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
        for (const [i, piece] of pieces.entries()) {
          sock.write(piece);
          if (i % 5 === 0) await pause(2);
        }
      }),
    );
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: chunks\r\n\r\n', (t) => t.endsWith('x-trailer: t\r\n\r\n'));
    expect(Buffer.from(bodyOf(r.text), 'latin1').equals(sent)).toBe(true);
    expect(relay.pumped.chunkRuns).toBeGreaterThanOrEqual(1);
    expect(relay.pumped.bytes).toBeGreaterThan(sent.length / 2);
  });

  test('streamed output reaches a client that reads slowly whole, and both connections serve the next request', async () => {
    const parts = Array.from({ length: 48 }, (_, i) => randomBytes(i % 3 === 0 ? 17 : 96 * 1024 + i));
    const whole = Buffer.concat(parts);
    const sockets = new Set<Socket>();
    await upstream('stream', (req, res) => {
      sockets.add(req.socket);
      if (req.url === '/small') {
        res.end('tail');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let i = 0;
      const more = () => {
        while (i < parts.length) if (!res.write(parts[i++]!)) return;
        res.end();
      };
      res.on('drain', more);
      more();
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const body = await new Promise<Buffer>((resolve, reject) => {
      const req = request({ port: relayPort, host: '127.0.0.1', path: '/out', agent, headers: { 'x-to': 'stream' } }, (res) => {
        const got: Buffer[] = [];
        // Nothing is read for a while: the upstream feels it, through the pump.
        res.pause();
        setTimeout(() => res.resume(), 200);
        res.on('data', (c: Buffer) => got.push(c));
        res.on('end', () => resolve(Buffer.concat(got)));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    expect(sha(body)).toBe(sha(whole));
    const small = await send('/small', { to: 'stream', agent });
    expect(small.body.toString()).toBe('tail');
    expect(sockets.size).toBe(1);
    expect(opened).toEqual(['stream']);
    expect(relay.pumped.chunkRuns).toBeGreaterThanOrEqual(1);
    expect(relay.pumped.bytes).toBeGreaterThan(whole.length / 2);
    agent.destroy();
  });

  test('bytes other than CRLF after the data of a chunk the pump took cut the client off there, even with good framing after them', async () => {
    let upstreamClosed!: () => void;
    const closed = new Promise<void>((r) => (upstreamClosed = r));
    // The second chunk's data is followed by 'XX', where its CRLF belongs, and then by framing that would parse.
    const good = Buffer.concat([chunk(fill(64 * 1024, 1)), Buffer.from(`${(64 * 1024).toString(16)}\r\n`), fill(64 * 1024, 2)]);
    const rest = Buffer.from('XX10\r\n0123456789abcdef\r\n0\r\n\r\n', 'latin1');
    await rawUpstream('bad', (sock) => {
      sock.once('close', upstreamClosed);
      sock.once('data', () => {
        sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
        sock.write(Buffer.concat([good, rest]));
      });
    });
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: bad\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(Buffer.from(bodyOf(r.text), 'latin1').equals(good)).toBe(true);
    await closed;
  });

  test('an upstream that ends inside a chunk the pump is moving cuts the client off', async () => {
    await rawUpstream('short', (sock) =>
      sock.once('data', () => {
        sock.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
        sock.end(Buffer.concat([Buffer.from(`${(1024 * 1024).toString(16)}\r\n`), fill(300 * 1024, 5)]));
      }),
    );
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: short\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(bodyOf(r.text).length).toBe(`${(1024 * 1024).toString(16)}\r\n`.length + 300 * 1024);
  });

  test('a client that goes away mid-stream ends the response upstream', async () => {
    const part = Buffer.alloc(128 * 1024, 'z');
    await clientLeavesMidResponse(part, {}, 4 * part.length);
    expect(relay.pumped.bytes).toBeGreaterThan(0);
  });
});

describe('connections to upstreams', () => {
  test('one with no pool key serves one request and is closed after it', async () => {
    const closed: string[] = [];
    await upstream(
      'fresh',
      (req, res) => {
        req.socket.once('close', () => closed.push('closed'));
        res.end(req.headers.connection);
      },
      false,
    );
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect((await send('/', { to: 'fresh', agent })).body.toString()).toBe('close');
    expect((await send('/', { to: 'fresh', agent })).body.toString()).toBe('close');
    expect(opened).toEqual(['fresh', 'fresh']);
    agent.destroy();
  });

  test('a pooled connection the upstream has closed is not used again', async () => {
    const s = await upstream('a', (_req, res) => res.end('ok'));
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect((await send('/', { to: 'a', agent })).body.toString()).toBe('ok');
    const gone = new Promise((r) => s.once('connection', r));
    s.closeAllConnections(); // the idle pooled connection
    expect((await send('/', { to: 'a', agent })).body.toString()).toBe('ok');
    await gone;
    expect(opened).toEqual(['a', 'a']);
    agent.destroy();
  });

  test('bytes after a complete response keep that connection out of the pool', async () => {
    let n = 0;
    await rawUpstream('sloppy', (sock) => {
      sock.on('data', () => sock.write(`HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n${++n < 10 ? 'r' + n : ''}JUNK`));
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    expect((await send('/', { to: 'sloppy', agent })).body.toString()).toBe('r1');
    expect((await send('/', { to: 'sloppy', agent })).body.toString()).toBe('r2');
    expect(opened).toEqual(['sloppy', 'sloppy']);
    agent.destroy();
  });
});

describe('what a client cannot do', () => {
  test('Connection cannot take away the fields a message is framed by', async () => {
    await upstream('a', echo);
    const r = await raw('POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: 5\r\nConnection: content-length, host\r\n\r\nhello', (t) => t.endsWith('hello'));
    const seen = JSON.parse(/x-headers: (.*)\r\n/.exec(r.text)![1]!) as Record<string, string>;
    expect([seen['content-length'], seen['host']]).toEqual(['5', 'h']);
  });

  test('a head sent a byte at a time is read whole', async () => {
    await upstream('a', (_req, res) => res.end('ok'));
    const text = await new Promise<string>((resolve, reject) => {
      const sock = connect(relayPort, '127.0.0.1');
      sock.setNoDelay(true);
      let got = '';
      sock.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.endsWith('ok')) {
          sock.destroy();
          resolve(got);
        }
      });
      sock.on('error', reject);
      const bytes = Buffer.from('GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n');
      let i = 0;
      const next = () => {
        if (i < bytes.length) sock.write(bytes.subarray(i, ++i), () => setImmediate(next));
      };
      next();
    });
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });

  test('answers a client does not read do not pile up: the next request waits', async () => {
    // Far more than the kernel's buffers hold, in answers the relay moves itself (not through the pump).
    const count = 2_000;
    await upstream('a', (_req, res) => res.end(`${'y'.repeat(16 * 1024)}END.`));
    const sock = connect(relayPort, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.pause();
    sock.write('GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n'.repeat(count));
    // Everything the relay has not sent yet sits in its side of the connection.
    const [serverSide] = [...(relay as unknown as { clients: Set<Socket> }).clients];
    let most = 0;
    for (let i = 0; i < 50; i++) {
      most = Math.max(most, serverSide!.writableLength);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThan(64 * 1024);
    let answers = 0;
    let text = '';
    await new Promise<void>((resolve) => {
      sock.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        const parts = text.split('END.');
        answers += parts.length - 1;
        text = parts[parts.length - 1]!;
        if (answers === count) resolve();
      });
      sock.resume();
    });
    sock.destroy();
    expect(answers).toBe(count);
  });

  test('a request body that stalls is cut off after the body timeout', async () => {
    expect(await stalledUpload('POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: 10\r\n\r\n12')).toBe('');
  });

  test("a refusal while a large body is still held answers at once and closes", async () => {
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    const body = Buffer.alloc(4 * 1024 * 1024, 'x');
    setTimeout(open, 300);
    const r = await raw(Buffer.concat([Buffer.from(`PUT / HTTP/1.1\r\nHost: h\r\nx-to: forbidden\r\nContent-Length: ${body.length}\r\n\r\n`), body]));
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[^]*connection: close\r\n/);
  });

  test('a refused upgrade is an ordinary answer, and the connection closes after it', async () => {
    await upstream('a', (_req, res) => res.writeHead(426, { 'content-type': 'text/plain' }).end('no'), false);
    const r = await raw('GET /ws HTTP/1.1\r\nHost: h\r\nx-to: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nNOT HTTP');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 426 Upgrade Required\r\n[^]*connection: close\r\n\r\n2\r\nno\r\n0\r\n\r\n$/);
  });
});

describe('limits on clients', () => {
  const okReply = (t: string) => /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nok$/.test(t);

  test('a connection that sends nothing, and a head that stops arriving, are answered 408 and closed after the head timeout', async () => {
    const port = await limitedRelay({ headTimeoutMs: 300 });
    const [silent, partial] = await Promise.all([untilClosed(port), untilClosed(port, 'GET / HTTP/1.1\r\nHost: h\r\n')]);
    for (const text of [silent, partial]) {
      expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n[^]*connection: close\r\n[^]*"the request head took too long to arrive"/);
    }
  });

  test('a head sent a byte at a time, too slowly to end in time, is answered 408 and closed', async () => {
    const port = await limitedRelay({ headTimeoutMs: 300 });
    // One byte each 20 ms: every gap is far shorter than the timeout, the whole head far longer.
    const text = await untilClosed(port, `GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nx-pad: ${'p'.repeat(100)}\r\n\r\n`, { dripMs: 20 });
    expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  });

  test('a kept-alive connection is closed after the idle timeout', async () => {
    await upstream('a', (_req, res) => res.end('ok'));
    const port = await limitedRelay({ idleTimeoutMs: 300 });
    const text = await untilClosed(port, 'GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n');
    expect(okReply(text)).toBe(true);
  });

  test('a response that streams for longer than every timeout is not cut off', async () => {
    await upstream('ticks', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      let n = 0;
      const tick = setInterval(() => {
        if (++n < 8) res.write(`tick ${n};`);
        else {
          clearInterval(tick);
          res.end('done');
        }
      }, 150);
      res.once('close', () => clearInterval(tick));
    });
    const port = await limitedRelay({ headTimeoutMs: 200, bodyTimeoutMs: 200, idleTimeoutMs: 200 });
    const text = await new Promise<string>((resolve, reject) => {
      const sock = connect(port, '127.0.0.1');
      let got = '';
      sock.on('data', (d: Buffer) => {
        got += d.toString();
        if (got.endsWith('0\r\n\r\n')) {
          sock.destroy();
          resolve(got);
        }
      });
      sock.on('error', reject);
      sock.on('close', () => resolve(got));
      sock.write('GET / HTTP/1.1\r\nHost: h\r\nx-to: ticks\r\n\r\n');
    });
    expect(text).toMatch(/tick 1;[^]*tick 7;[^]*done\r\n0\r\n\r\n$/);
  });

  test('a body that waits while its request is routed is not timed meanwhile', async () => {
    await upstream('a', echo);
    let open!: () => void;
    gate = new Promise((r) => (open = r));
    const port = await limitedRelay({ bodyTimeoutMs: 200 });
    // Routing takes three body timeouts; the body came whole with the head.
    setTimeout(open, 600);
    const r = await rawExchange(port, 'POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nContent-Length: 5\r\n\r\nhello', (t) => t.endsWith('hello'));
    expect(r.text).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nhello$/);
  });

  test('connections beyond the cap from one address are closed as they open; other addresses, and later connections, are served', async () => {
    await upstream('a', (_req, res) => res.end('ok'));
    const port = await limitedRelay({ maxConnectionsPerAddress: 2 });
    const ask = 'GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n';
    const held = (from: string) => answeredConnection(port, ask, okReply, from);
    const first = [await held('127.0.0.1'), await held('127.0.0.1')];
    // A third from the same address is closed unanswered, though it sends a request.
    expect(await untilClosed(port, ask)).toBe('');
    // Another address has a cap of its own.
    const other = await held('127.0.0.2');
    first[0]!.destroy();
    // Once the relay has seen that one close, a new connection is served again.
    let again: Socket | undefined;
    for (let i = 0; i < 50 && !again; i++) {
      again = await held('127.0.0.1').catch(() => undefined);
      if (!again) await new Promise((r) => setTimeout(r, 50));
    }
    expect(again).toBeDefined();
    for (const s of [first[1]!, other, again!]) s.destroy();
  });
});

describe('what an upstream cannot do', () => {
  test('a response with both Transfer-Encoding and Content-Length reaches the client without the length', async () => {
    await rawUpstream('both', (sock) =>
      sock.once('data', () => sock.write('HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n')),
    );
    const r = await send('/', { to: 'both' });
    expect([r.status, r.body.toString(), r.headers['content-length']]).toEqual([200, 'hello', undefined]);
  });

  test('a response head sent a byte at a time, after a 100 Continue, is read whole', async () => {
    await rawUpstream('slow', (sock) =>
      sock.once('data', async () => {
        const bytes = Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        for (let i = 0; i < bytes.length; i++) {
          sock.write(bytes.subarray(i, i + 1));
          await new Promise((r) => setImmediate(r));
        }
      }),
    );
    const r = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: slow\r\n\r\n', (t) => t.endsWith('ok'));
    expect(r.text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK\r\ncontent-length: 2\r\n\r\nok$/);
  });

  test('a status outside 100-999 is a bad response', async () => {
    await rawUpstream('odd', (sock) => sock.once('data', () => sock.write('HTTP/1.1 099 Odd\r\ncontent-length: 0\r\n\r\n')));
    const r = await send('/', { to: 'odd' });
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body.toString()).message).toBe("upstream 'odd' sent a bad response: malformed status line 'HTTP/1.1 099 Odd'");
  });
});

describe('failures', () => {
  test("the route's own answer closes the connection: what follows it is not read", async () => {
    await upstream('a', (_req, res) => res.end('after'));
    const r = await raw('POST / HTTP/1.1\r\nHost: h\r\nx-to: forbidden\r\nContent-Length: 4\r\n\r\nbody' + 'GET / HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n[^]*connection: close\r\n\r\n\{"code":403,"message":"not for you"\}$/);
    expect(opened).toEqual([]);
  });

  test("the route's own answer to a request whose body has not come closes the connection at once", async () => {
    // The client sends nothing more, and does not close: the relay does.
    const r = await raw('POST / HTTP/1.1\r\nHost: h\r\nx-to: nowhere\r\nContent-Length: 100\r\n\r\n');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n[^]*connection: close\r\n\r\n\{"code":502,"message":"no upstream 'nowhere'"\}$/);
  });

  test('an upstream that cannot be reached is a 502 that names it', async () => {
    const s = await upstream('down', () => undefined);
    await closing(s);
    servers.splice(servers.indexOf(s), 1);
    const r = await send('/', { to: 'down' });
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body.toString()).message).toMatch(/^upstream 'down' did not answer: connect ECONNREFUSED/);
  });

  test('an upstream that closes before answering is a 502; one that stops mid-body cuts the client off', async () => {
    await rawUpstream('mute', (sock) => sock.once('data', () => sock.destroy()));
    const mute = await send('/', { to: 'mute' });
    expect(mute.status).toBe(502);
    expect(JSON.parse(mute.body.toString()).message).toBe("upstream 'mute' closed the connection before the response was complete");

    await rawUpstream('half', (sock) => sock.once('data', () => sock.end('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly ten..')));
    const half = await raw('GET / HTTP/1.1\r\nHost: h\r\nx-to: half\r\n\r\n');
    expect(half.closed).toBe(true);
    expect(half.text).toMatch(/content-length: 100\r\n\r\nonly ten\.\.$/);
  });

  test('a malformed response head is a 502', async () => {
    await rawUpstream('garbage', (sock) => sock.once('data', () => sock.write('HTTP/1.1 200 OK\r\nbad header line\r\n\r\n')));
    const r = await send('/', { to: 'garbage' });
    expect(r.status).toBe(502);
    expect(JSON.parse(r.body.toString()).message).toBe("upstream 'garbage' sent a bad response: the response has a malformed header line 'bad header line'");
  });

  test('a client that goes away mid-response ends the request upstream', async () => {
    let ended!: () => void;
    const aborted = new Promise<void>((resolve) => (ended = resolve));
    await upstream('a', (_req, res) => {
      res.writeHead(200);
      res.write('streaming');
      res.once('close', ended);
    });
    await raw('GET /stream HTTP/1.1\r\nHost: h\r\nx-to: a\r\n\r\n', (t) => t.includes('streaming'));
    await aborted;
  });
});

describe('malformed requests get a clear error and a closed connection', () => {
  const cases: [string, string, number, RegExp][] = [
    ['a bad request line', 'GET /\r\nHost: h\r\n\r\n', 400, /malformed request line 'GET \/'/],
    ['HTTP/2.0', 'GET / HTTP/2.0\r\nHost: h\r\n\r\n', 505, /HTTP\/2\.0 is not supported/],
    ['a bare LF', 'GET / HTTP/1.1\nHost: h\r\n\r\n', 400, /does not end in CRLF/],
    ['a folded header', 'GET / HTTP/1.1\r\nHost: h\r\nx-a: 1\r\n  2\r\n\r\n', 400, /folded header line/],
    ['space before the colon', 'GET / HTTP/1.1\r\nHost : h\r\n\r\n', 400, /malformed header line 'Host : h'/],
    ['two content-lengths', 'POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', 400, /two different content-lengths/],
    ['a bad content-length', 'POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n', 400, /content-length '-1' is not a number/],
    ['content-length with chunked', 'POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, /both content-length and transfer-encoding/],
    ['gzip transfer-encoding', 'POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n', 501, /transfer-encoding 'gzip, chunked' is not supported/],
    ['CONNECT', 'CONNECT h:443 HTTP/1.1\r\nHost: h\r\n\r\n', 405, /CONNECT is not supported/],
    ['a control character', 'GET / HTTP/1.1\r\nx-a: a\x01b\r\n\r\n', 400, /header 'x-a' has a control character/],
  ];
  test.each(cases)('%s', async (_what, bytes, status, message) => {
    const r = await raw(bytes);
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(r.text).toMatch(/connection: close\r\n/);
    expect(JSON.parse(r.text.slice(r.text.indexOf('{'))).message).toMatch(message);
  });

  test('a bad chunk in a body that is under way', async () => {
    await upstream('a', echo);
    const r = await raw('POST / HTTP/1.1\r\nHost: h\r\nx-to: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
    expect(r.closed).toBe(true);
    expect(r.text).toMatch(/^HTTP\/1\.1 400 [^]*bad chunked body: chunk size is not a hex number/);
  });

  test('a head larger than 64 KiB', async () => {
    const r = await raw(`GET / HTTP/1.1\r\nx-big: ${'a'.repeat(70 * 1024)}\r\n\r\n`);
    expect(r.text).toMatch(/^HTTP\/1\.1 431 [^]*larger than 65536 bytes/);
  });
});

describe('framing, piece by piece', () => {
  const chunked = Buffer.from('4;a=b\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nx-t: 1\r\n\r\nNEXT');
  test('a chunked body ends at the same byte however it is split', () => {
    for (let size = 1; size <= chunked.length; size++) {
      const c = new BodyCounter({ kind: 'chunked' }, 400);
      let taken = 0;
      for (let at = 0; at < chunked.length && !c.done; at += size) taken += c.take(chunked.subarray(at, at + size));
      expect([size, taken, c.done]).toEqual([size, chunked.length - 'NEXT'.length, true]);
    }
  });

  test('the end of a head is noticed in the chunk that completes it, however it is split', () => {
    const bytes = Buffer.from('GET / HTTP/1.1\r\nHost: h\r\n\r\nBODY');
    const end = bytes.indexOf('\r\n\r\n') + 4;
    for (let size = 1; size <= bytes.length; size++) {
      const chunks = new HeadChunks();
      let seenAfter = -1;
      for (let at = 0; at < bytes.length; at += size) {
        if (chunks.push(bytes.subarray(at, at + size)) && seenAfter < 0) seenAfter = Math.min(at + size, bytes.length);
      }
      expect([size, seenAfter]).toEqual([size, Math.min(Math.ceil(end / size) * size, bytes.length)]);
      expect(headEnd(chunks.take())).toBe(end);
    }
  });

  test('broken chunked bodies are refused with what is wrong', () => {
    const bad: [string, RegExp][] = [
      ['5\r\nhello!\r\n', /chunk data is longer than its size/],
      ['5\nhello\r\n', /chunk size line does not end in CRLF/],
      ['fffffffffffffff\r\n', /chunk size is too large/],
      ['5 \r\n', /unexpected byte after chunk size/],
      ['0\r\nx: 1\n\r\n', /trailer line does not end in CRLF/],
      ['0\r\n\nGET / HTTP/1.1\r\n\r\n', /trailer section has a line that does not end in CRLF/],
    ];
    for (const [body, message] of bad) {
      const c = new BodyCounter({ kind: 'chunked' }, 400);
      expect(() => c.take(Buffer.from(body))).toThrow(message);
    }
  });

  test('bytes of a body of known length that moved elsewhere are counted by skip', () => {
    const b = new BodyCounter({ kind: 'length', length: 10 }, 400);
    expect(b.take(Buffer.from('abc'))).toBe(3);
    expect(b.lengthLeft).toBe(7);
    b.skip(5);
    expect([b.lengthLeft, b.done]).toEqual([2, false]);
    expect(() => b.skip(3)).toThrow('cannot skip 3 bytes of this body');
    b.skip(2);
    expect(b.done).toBe(true);
    expect(new BodyCounter({ kind: 'chunked' }, 400).lengthLeft).toBeUndefined();
  });

  test("the counter gives what is left of a large chunk's data, and after the pump takes over again at a chunk's CRLF, which it checks", () => {
    const c = new BodyCounter({ kind: 'chunked' }, 400);
    // Inside a small chunk, or at a size line: nothing to hand over.
    expect(c.take(Buffer.from('4\r\nwi'))).toBe(5);
    expect(c.chunkDataLeft(3)).toBe(2);
    expect(c.chunkDataLeft(5)).toBe(0);
    expect(c.take(Buffer.from('ki\r\n'))).toBe(4);
    expect(c.chunkDataLeft(0)).toBe(0);
    expect(() => c.skipToChunkEnd()).toThrow('not inside the data of a chunk');
    // Inside a chunk of 0x8000 bytes: what is left of it; then the pump took it and more.
    expect(c.take(Buffer.from('8000\r\nabc'))).toBe(9);
    expect(c.chunkDataLeft(0x8000)).toBe(0x8000 - 3);
    c.skipToChunkEnd();
    expect(c.chunkDataLeft(0)).toBe(0);
    // Its CRLF comes next, and is checked.
    expect(() => new BodyCounter({ kind: 'chunked' }, 400).skipToChunkEnd()).toThrow('not inside the data of a chunk');
    const tail = Buffer.from('\r\n0\r\n\r\nNEXT');
    expect(c.take(tail)).toBe(tail.length - 4);
    expect(c.done).toBe(true);
    const d = new BodyCounter({ kind: 'chunked' }, 400);
    d.take(Buffer.from('8000\r\nabc'));
    d.skipToChunkEnd();
    expect(() => d.take(Buffer.from('XX0\r\n\r\n'))).toThrow(/chunk data is longer than its size/);
    expect(new BodyCounter({ kind: 'length', length: 1 << 20 }, 400).chunkDataLeft(0)).toBe(0);
  });

  test('how bodies are delimited', () => {
    const req = (text: string) => {
      const b = Buffer.from(text);
      return parseRequestHead(b, headEnd(b));
    };
    const res = (text: string) => {
      const b = Buffer.from(text);
      return parseResponseHead(b, headEnd(b));
    };
    expect(requestFraming(req('GET / HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'length', length: 0 });
    expect(requestFraming(req('POST / HTTP/1.1\r\ncontent-length: 5, 5\r\n\r\n'))).toEqual({ kind: 'length', length: 5 });
    expect(requestFraming(req('POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n'))).toEqual({ kind: 'chunked' });
    expect(() => requestFraming(req('POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n'))).toThrow('an HTTP/1.0 request cannot be chunked');
    expect(responseFraming(res('HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n'), 'HEAD')).toEqual({ kind: 'length', length: 0 });
    expect(responseFraming(res('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n'), 'GET')).toEqual({ kind: 'chunked' });
    expect(responseFraming(res('HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n'), 'GET')).toEqual({ kind: 'close' });
    expect(responseFraming(res('HTTP/1.1 200 OK\r\n\r\n'), 'GET')).toEqual({ kind: 'close' });
    expect(responseFraming(res('HTTP/1.0 200\r\ncontent-length: 3\r\n\r\n'), 'GET')).toEqual({ kind: 'length', length: 3 });
    expect(() => res('HTTP/1.1 2000 OK\r\n\r\n')).toThrow("malformed status line 'HTTP/1.1 2000 OK'");
  });
});
