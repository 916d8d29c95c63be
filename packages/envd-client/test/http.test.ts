// The HTTP routes over undici, the default in Node, against raw TCP servers
// that write the answers byte for byte: kept connections and their loss,
// every body framing, answers no Node server would send, content codings,
// and TLS. Behaviours that fetch gives too are in download.test.ts and
// upload.test.ts, run through both.
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { Agent } from 'undici';
import { EnvdArgumentError, EnvdClient, EnvdHttpError } from '../src/index.js';
import { nodeOutput, sendJson, serve } from './http-server.js';

interface RawServer {
  url: string;
  /** Every connection accepted, in order. */
  connections: Socket[];
  /** Every request head read (request line and headers). */
  requests: string[];
  close(): Promise<void>;
}

type Answer = (socket: Socket, head: string, n: number) => unknown;

let server: RawServer | undefined;
/** Each test's own agent, so that no connection is carried from one test to the next. */
let dispatcher: Agent;
beforeEach(() => {
  dispatcher = new Agent({ headersTimeout: 0, bodyTimeout: 0 });
});
afterEach(async () => {
  await dispatcher.destroy();
  await server?.close();
  server = undefined;
});

/** A TCP server that reads request heads (the tests send no bodies) and leaves each answer to `answer`. */
async function rawServer(answer: Answer): Promise<RawServer> {
  const connections: Socket[] = [];
  const requests: string[] = [];
  const tcp = createServer((socket) => {
    connections.push(socket);
    socket.setNoDelay(true);
    socket.on('error', () => {});
    let pending = '';
    socket.on('data', (bytes) => {
      pending += bytes.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        requests.push(head);
        void answer(socket, head, requests.length);
      }
    });
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  server = {
    url: `http://127.0.0.1:${(tcp.address() as AddressInfo).port}`,
    connections,
    requests,
    close: () => {
      for (const socket of connections) socket.destroy();
      return new Promise((resolve) => tcp.close(() => resolve()));
    },
  };
  return server;
}

/** Writes `text` a byte at a time, each in a write of its own a turn of the event loop apart. */
async function dribble(socket: Socket, text: string): Promise<void> {
  for (const char of text) {
    socket.write(char, 'latin1');
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The connections that carried a request (undici may open one ahead that it never uses). */
const used = (s: RawServer): Socket[] => s.connections.filter((c) => c.bytesRead > 0);

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

function client(url: string): EnvdClient {
  return new EnvdClient({ envdUrl: url, dispatcher });
}

function download(url: string, signal?: AbortSignal): Promise<string> {
  return client(url).download('f.txt', { signal });
}

async function failure(promise: Promise<unknown>): Promise<EnvdHttpError> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EnvdHttpError);
  return err as EnvdHttpError;
}

describe('kept connections', () => {
  // A request made the moment the one before it ended can find its connection
  // not yet back in undici's pool, and open a second: never more.
  test('downloads one after another share kept connections, and each request names the host', async () => {
    const s = await rawServer((socket, _head, n) => socket.write(ok(`answer ${n}`)));
    for (let i = 1; i <= 5; i++) expect(await download(s.url)).toBe(`answer ${i}`);
    expect(used(s).length).toBeLessThanOrEqual(2);
    expect(s.requests[0]).toMatch(/^GET \/files\?path=f\.txt HTTP\/1\.1\r\n/);
    expect(s.requests[0]).toMatch(new RegExp(`\r\nhost: ${new URL(s.url).host}`, 'i'));
  });

  test('clients without a dispatcher of their own share connections too', async () => {
    const s = await rawServer((socket, _head, n) => socket.write(ok(`answer ${n}`)));
    for (let i = 1; i <= 5; i++) expect(await new EnvdClient({ envdUrl: s.url }).download('f.txt')).toBe(`answer ${i}`);
    expect(used(s).length).toBeLessThanOrEqual(2);
  });

  test('uploads of 1 MiB one after another share kept connections', async () => {
    let connections = 0;
    const http = await serve((req, res) => {
      req.resume();
      req.on('end', () => sendJson(res, 200, [{ name: 'a.bin', path: '/home/user/a.bin', type: 'file' }]));
    });
    http.server.on('connection', () => connections++);
    try {
      const c = client(http.url);
      for (let i = 0; i < 5; i++) await c.upload('a.bin', new Uint8Array(1024 * 1024), { encoding: 'octet-stream' });
      expect(connections).toBeLessThanOrEqual(2);
    } finally {
      await http.close();
    }
  });

  test('a connection the server closed while idle is noticed: the next download opens another', async () => {
    const s = await rawServer((socket, _head, n) => {
      socket.write(ok(`answer ${n}`));
      if (n === 1) socket.end();
    });
    expect(await download(s.url)).toBe('answer 1');
    await once(s.connections[0]!, 'close');
    expect(await download(s.url)).toBe('answer 2');
    expect(used(s)).toHaveLength(2);
  });

  test('a connection lost unanswered is a network error, sent once', async () => {
    const s = await rawServer((socket) => socket.destroy());
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/^GET \/files failed: /);
    expect(s.requests).toHaveLength(1);
  });

  test('downloads at once go side by side, on a connection each', async () => {
    const waiting: (() => void)[] = [];
    const s = await rawServer((socket, _head, n) => {
      // Nobody answers until all ten are in: ten at once cannot share a connection.
      waiting.push(() => void socket.write(ok(`answer ${n}`)));
      if (waiting.length === 10) for (const go of waiting) go();
    });
    const answers = await Promise.all(Array.from({ length: 10 }, () => download(s.url)));
    expect(new Set(answers).size).toBe(10);
    expect(used(s)).toHaveLength(10);
  });

  test('an abort in the middle of a body drops that connection; the next download opens another', async () => {
    const s = await rawServer((socket, _head, n) => {
      if (n === 1) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part');
      else socket.write(ok('whole'));
    });
    const c = client(s.url);
    const controller = new AbortController();
    const stream = await c.download('f.txt', { format: 'stream', signal: controller.signal });
    const reader = stream.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('only part');
    controller.abort(new Error('enough'));
    await expect(reader.read()).rejects.toThrow('enough');
    await once(s.connections[0]!, 'close');
    expect(await c.download('f.txt')).toBe('whole');
    expect(used(s)).toHaveLength(2);
  });
});

describe('framing of answers', () => {
  test('a chunked body, split at every byte, with extensions and trailers', async () => {
    const s = await rawServer(async (socket) => {
      await dribble(socket, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      await dribble(socket, '5;name=value\r\nhello\r\n6\r\n world\r\nA\r\n, chunked!\r\n0\r\nX-Checksum: none\r\n\r\n');
    });
    expect(await download(s.url)).toBe('hello world, chunked!');
    expect(await download(s.url)).toBe('hello world, chunked!');
  });

  test('a 2 MiB chunked body in uneven chunks arrives intact', async () => {
    const body = Buffer.alloc(2 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7919) % 251;
    const s = await rawServer((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      for (let at = 0, size = 1; at < body.length; at += size, size = (size * 3 + 17) % 70_000 || 1) {
        const piece = body.subarray(at, at + size);
        socket.write(`${piece.length.toString(16)}\r\n`);
        socket.write(piece);
        socket.write('\r\n');
      }
      socket.write('0\r\n\r\n');
    });
    const got = await client(s.url).download('f.bin', { format: 'bytes' });
    expect(Buffer.from(got).equals(body)).toBe(true);
  });

  test('Connection: close, a body that runs to the close, and HTTP/1.0 are not kept', async () => {
    const s = await rawServer((socket, _head, n) => {
      if (n === 1) socket.write(ok('closing', 'Connection: close\r\n'));
      if (n === 2) socket.write('HTTP/1.1 200 OK\r\n\r\nuntil the end');
      if (n === 3) socket.write('HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold');
      socket.end();
    });
    expect(await download(s.url)).toBe('closing');
    expect(await download(s.url)).toBe('until the end');
    expect(await download(s.url)).toBe('old');
    expect(used(s)).toHaveLength(3);
  });

  test('an informational head before the answer is passed over', async () => {
    const s = await rawServer((socket) => socket.write('HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n' + ok('after the hints')));
    expect(await download(s.url)).toBe('after the hints');
  });

  test.each([
    ['not HTTP', 'SSH-2.0-OpenSSH_9.2\r\n\r\n', /does not match the HTTP\/1\.1 protocol/],
    ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n', /content-length/i],
    ['two different Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd', /content-length/i],
    ['a folded header line', 'HTTP/1.1 200 OK\r\n folded: line\r\nContent-Length: 1\r\n\r\na', /does not match the HTTP\/1\.1 protocol/],
    ['a chunk size that is not hex', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /chunk size/],
    ['a chunk longer than its size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n', /after chunk data/],
    ['a head over 64 KiB', `HTTP/1.1 200 OK\r\nX-Big: ${'x'.repeat(70_000)}\r\n\r\n`, /Headers Overflow/],
  ])('%s is a network error that says what was wrong', async (_label, answer, message) => {
    const s = await rawServer((socket) => socket.write(answer));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(message);
  });

  test('a body cut short is a network error', async () => {
    const s = await rawServer((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort'));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toContain('other side closed');
  });
});

describe('content codings', () => {
  const text = 'a body that travels compressed, '.repeat(100);
  test.each([
    ['gzip', gzipSync],
    ['x-gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const)('%s is undone for text, bytes, blob and both streams', async (coding, compress) => {
    const body = compress(Buffer.from(text));
    const s = await rawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Encoding: ${coding}\r\nContent-Length: ${body.length}\r\n\r\n`);
      socket.write(body);
    });
    const c = client(s.url);
    expect(await c.download('f.txt', { gzip: true })).toBe(text);
    expect(Buffer.from(await c.download('f.txt', { format: 'bytes', gzip: true })).toString()).toBe(text);
    expect(await (await c.download('f.txt', { format: 'blob', gzip: true })).text()).toBe(text);
    expect(await new Response(await c.download('f.txt', { format: 'stream', gzip: true })).text()).toBe(text);
    let streamed = '';
    for await (const chunk of await c.download('f.txt', { format: 'node-stream', gzip: true })) streamed += (chunk as Buffer).toString();
    expect(streamed).toBe(text);
    // Each body was read to its end, so kept connections carried them all.
    expect(used(s).length).toBeLessThanOrEqual(2);
  });

  test('a coding the client cannot undo is an invalid response that names it', async () => {
    const s = await rawServer((socket) => socket.write(ok('????', 'Content-Encoding: zstd-x\r\n')));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('invalid_response');
    expect(err.message).toContain("Content-Encoding 'zstd-x', which this client cannot decode");
  });

  test('a compressed body that is not what it says fails the read', async () => {
    const s = await rawServer((socket) => socket.write(ok('not gzip at all', 'Content-Encoding: gzip\r\n')));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/incorrect header check/);
  });
});

describe('requests', () => {
  test('a header value that would split the head is refused before anything is sent', async () => {
    const s = await rawServer((socket) => socket.write(ok('unreachable')));
    const c = new EnvdClient({ envdUrl: s.url, dispatcher, headers: { 'X-Note': 'a\r\nX-Injected: 1' } });
    const err = await failure(c.download('f.txt'));
    expect(err.message).toContain('invalid X-Note header');
    expect(s.requests).toHaveLength(0);
  });

  test("the caller's Host goes as given", async () => {
    const s = await rawServer((socket) => socket.write(ok('fine')));
    const c = new EnvdClient({ envdUrl: s.url, dispatcher, headers: { Host: 'sandbox.example' } });
    expect(await c.download('f.txt')).toBe('fine');
    expect(s.requests[0]).toMatch(/\r\nhost: sandbox\.example/i);
    expect(s.requests[0]).not.toContain(new URL(s.url).host);
  });

  test('credentials in the URL are refused: they would not be sent', () => {
    expect(() => new EnvdClient({ envdUrl: 'http://user:secret@127.0.0.1:9' })).toThrow(EnvdArgumentError);
    expect(() => new EnvdClient({ envdUrl: 'http://user:secret@127.0.0.1:9' })).toThrow(/credentials in envdUrl/);
  });
});

describe('TLS', () => {
  let dir: string;
  let tls: { key: Buffer; cert: Buffer };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'envd-client-tls-'));
    const made = spawnSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost'].concat(
        ['-addext', 'subjectAltName=DNS:localhost', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
      ),
      { encoding: 'utf8' },
    );
    if (made.status !== 0) throw new Error(`openssl could not make a certificate: ${made.error?.message ?? made.stderr}`);
    tls = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('https: the certificate is checked, and a trusted server gets kept connections; idle ones let the process exit', async () => {
    let handshakes = 0;
    const https = createHttpsServer(tls, (req, res) => {
      const body = `over TLS to ${req.headers.host}`;
      res.writeHead(200, { 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    https.on('secureConnection', () => handshakes++);
    await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
    const url = `https://localhost:${(https.address() as AddressInfo).port}`;
    try {
      // This process does not trust the certificate.
      const err = await failure(download(url));
      expect(err.kind).toBe('network');
      expect(err.message).toMatch(/self[- ]signed certificate/);

      handshakes = 0;
      // A process that does (NODE_EXTRA_CA_CERTS) downloads three times over kept connections (a
      // handshake each), and exits by itself with them kept: idle connections do not hold the event loop.
      const script = join(dir, 'download.mjs');
      writeFileSync(
        script,
        `import { EnvdClient } from ${JSON.stringify(join(import.meta.dirname, '../dist/index.js'))};
const client = new EnvdClient({ envdUrl: process.argv[2] });
console.log(await client.download('f.txt'));
console.log(await client.download('f.txt', { format: 'bytes' }).then((b) => b.length));
console.log(await client.download('f.txt', { format: 'blob' }).then((b) => b.size));`,
      );
      const out = await nodeOutput([script, url], { env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') } });
      const expected = `over TLS to localhost:${(https.address() as AddressInfo).port}`;
      expect(out).toBe(`${expected}\n${expected.length}\n${expected.length}\n`);
      expect(handshakes).toBeLessThanOrEqual(2);
    } finally {
      https.closeAllConnections();
      await new Promise((resolve) => https.close(resolve));
    }
  });
});
