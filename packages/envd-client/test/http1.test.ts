// http1.ts, the HTTP/1.1 client under `download` and in-memory `upload`,
// against raw TCP servers that write the answers byte for byte: kept
// connections and their loss, every body framing, answers no Node server
// would send, and TLS.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { join } from 'node:path';
import { EnvdClient, EnvdHttpError } from '../src/index.js';
import { bytesOf, closeIdleConnections, request } from '../src/http1.js';
import { sendJson, serve } from './http-server.js';

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
afterEach(async () => {
  closeIdleConnections();
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

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

function download(url: string, signal?: AbortSignal): Promise<string> {
  return new EnvdClient({ envdUrl: url }).download('f.txt', { signal });
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
  test('downloads one after another share one connection, and each request names the host', async () => {
    const s = await rawServer((socket, _head, n) => socket.write(ok(`answer ${n}`)));
    for (let i = 1; i <= 5; i++) expect(await download(s.url)).toBe(`answer ${i}`);
    expect(s.connections).toHaveLength(1);
    expect(s.requests[0]).toMatch(/^GET \/files\?path=f\.txt HTTP\/1\.1\r\n/);
    expect(s.requests[0]).toContain(`\r\nHost: ${new URL(s.url).host}`);
  });

  test('uploads of 1 MiB one after another share one connection too', async () => {
    let connections = 0;
    const http = await serve((req, res) => {
      req.resume();
      req.on('end', () => sendJson(res, 200, [{ name: 'a.bin', path: '/home/user/a.bin', type: 'file' }]));
    });
    http.server.on('connection', () => connections++);
    try {
      const client = new EnvdClient({ envdUrl: http.url });
      for (let i = 0; i < 5; i++) await client.upload('a.bin', new Uint8Array(1024 * 1024), { encoding: 'octet-stream' });
      expect(connections).toBe(1);
    } finally {
      await http.close();
    }
  });

  test('a kept connection lost unanswered is replaced and the request goes again; an idle close is noticed', async () => {
    const s = await rawServer((socket, _head, n) => {
      if (n === 2) socket.destroy(); // the request meets a connection the server dropped
      else socket.write(ok(`answer ${n}`));
      if (n === 3) socket.end(); // closed while idle, after a full answer
    });
    expect(await download(s.url)).toBe('answer 1');
    expect(await download(s.url)).toBe('answer 3');
    expect(s.connections).toHaveLength(2);
    await once(s.connections[1]!, 'close');
    expect(await download(s.url)).toBe('answer 4');
    expect(s.connections).toHaveLength(3);
  });

  test('a request that is not idempotent is not sent again when its kept connection is lost unanswered', async () => {
    const s = await rawServer((socket, _head, n) => {
      if (n === 2) socket.destroy();
      else socket.write(ok(`answer ${n}`));
    });
    const call = async (idempotent: boolean): Promise<string> => {
      const signal = new AbortController().signal;
      const res = await request(`${s.url}/rpc`, { method: 'POST', headers: {}, body: [Buffer.from('{}')], signal, idempotent });
      return Buffer.from(await bytesOf(res, signal)).toString();
    };
    expect(await call(false)).toBe('answer 1');
    await expect(call(false)).rejects.toThrow('the connection closed before the answer ended');
    expect(s.requests).toHaveLength(2);
    expect(s.requests[1]).toContain('\r\nContent-Length: 2');
    expect(await call(false)).toBe('answer 3');
  });

  test('a fresh connection lost unanswered is a network error, sent once', async () => {
    const s = await rawServer((socket) => socket.destroy());
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/^GET \/files failed: /);
    expect(s.requests).toHaveLength(1);
  });

  test('ten at once open ten connections; eight are kept after, and carry the next eight', async () => {
    const waiting: (() => void)[] = [];
    const s = await rawServer((socket, _head, n) => {
      const send = (): void => void socket.write(ok(`answer ${n}`));
      if (n > 10) return send();
      // Nobody answers until all ten are in, so that none can go on another's connection.
      waiting.push(send);
      if (waiting.length === 10) for (const go of waiting) go();
    });
    const first = await Promise.all(Array.from({ length: 10 }, () => download(s.url)));
    expect(new Set(first).size).toBe(10);
    expect(s.connections).toHaveLength(10);
    let closed = 0;
    const twoClosed = new Promise<void>((resolve) => {
      for (const c of s.connections) c.once('close', () => ++closed === 2 && resolve());
    });
    await twoClosed;
    await Promise.all(Array.from({ length: 8 }, () => download(s.url)));
    expect(s.connections).toHaveLength(10);
    expect(closed).toBe(2);
  });

  test('an abort in the middle of a body drops that connection; the next download opens another', async () => {
    const s = await rawServer((socket, _head, n) => {
      if (n === 1) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part');
      else socket.write(ok('whole'));
    });
    const client = new EnvdClient({ envdUrl: s.url });
    const controller = new AbortController();
    const stream = await client.download('f.txt', { format: 'stream', signal: controller.signal });
    const reader = stream.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('only part');
    controller.abort(new Error('enough'));
    await expect(reader.read()).rejects.toThrow('enough');
    await once(s.connections[0]!, 'close');
    expect(await client.download('f.txt')).toBe('whole');
    expect(s.connections).toHaveLength(2);
  });
});

describe('framing of answers', () => {
  test('a chunked body, split at every byte, with extensions and trailers; the connection is kept', async () => {
    const s = await rawServer(async (socket) => {
      await dribble(socket, 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      await dribble(socket, '5;name=value\r\nhello\r\n6\r\n world\r\nA\r\n, chunked!\r\n0\r\nX-Checksum: none\r\n\r\n');
    });
    expect(await download(s.url)).toBe('hello world, chunked!');
    expect(await download(s.url)).toBe('hello world, chunked!');
    expect(s.connections).toHaveLength(1);
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
    const got = await new EnvdClient({ envdUrl: s.url }).download('f.bin', { format: 'bytes' });
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
    expect(s.connections).toHaveLength(3);
  });

  test('1xx heads before the answer are passed over', async () => {
    const s = await rawServer((socket) =>
      socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n' + ok('after the hints')),
    );
    expect(await download(s.url)).toBe('after the hints');
  });

  test('bytes past the end of an answer are not trusted: the connection is dropped', async () => {
    const s = await rawServer((socket) => socket.write(ok('mine') + 'HTTP/1.1 200 OK\r\n'));
    expect(await download(s.url)).toBe('mine');
    expect(await download(s.url)).toBe('mine');
    expect(s.connections).toHaveLength(2);
  });

  test.each([
    ['not HTTP', 'SSH-2.0-OpenSSH_9.2\r\n\r\n', "malformed HTTP response: status line 'SSH-2.0-OpenSSH_9.2'"],
    ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: 12abc\r\n\r\n', "malformed HTTP response: Content-Length '12abc'"],
    ['two different Content-Lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd', "malformed HTTP response: Content-Length '4'"],
    ['a folded header line', 'HTTP/1.1 200 OK\r\n folded: line\r\nContent-Length: 1\r\n\r\na', "malformed HTTP response: header line ' folded: line'"],
    ['a chunk size that is not hex', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', "malformed HTTP response: chunk size 'zz'"],
    ['a chunk longer than its size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n', 'malformed HTTP response: chunk data longer than its size'],
    ['an upgrade nobody asked for', 'HTTP/1.1 101 Switching Protocols\r\n\r\n', 'malformed HTTP response: 101 Switching Protocols to an ordinary request'],
    ['a status past 599', 'HTTP/1.1 700 Odd\r\n\r\n', 'malformed HTTP response: status 700'],
    ['a head over 64 KiB', `HTTP/1.1 200 OK\r\nX-Big: ${'x'.repeat(70_000)}\r\n\r\n`, 'malformed HTTP response: a head longer than 65536 bytes'],
  ])('%s is a network error that says what was wrong', async (_label, answer, message) => {
    const s = await rawServer((socket) => socket.write(answer));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toContain(message);
  });

  test('a body cut short is a network error', async () => {
    const s = await rawServer((socket) => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort'));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('network');
    expect(err.message).toContain('the connection closed before the answer ended');
  });
});

describe('reading', () => {
  test('pieces kept to the end are intact: reads share blocks, never overlap, and fill each block to within 32 KiB', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7919) % 251;
    const s = await rawServer(async (socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n`);
      // Uneven writes, with a turn of the loop between some, so that reads come in every size.
      for (let at = 0, size = 1, n = 0; at < body.length; at += size, size = (size * 3 + 17) % 70_000 || 1, n++) {
        socket.write(body.subarray(at, at + size));
        if (n % 4 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    });
    const res = await request(`${s.url}/f.bin`, { method: 'GET', headers: {}, signal: new AbortController().signal });
    const pieces: Buffer[] = [];
    await new Promise<void>((resolve, reject) => res.read({ chunk: (b) => pieces.push(b), end: resolve, fail: reject }));
    // Held until now: a read that went into the room of an earlier piece would show here.
    expect(Buffer.concat(pieces).equals(body)).toBe(true);
    const blocks = new Map<ArrayBufferLike, Buffer[]>();
    for (const p of pieces) blocks.set(p.buffer, [...(blocks.get(p.buffer) ?? []), p]);
    expect(blocks.size).toBeLessThan(pieces.length);
    const order = [...blocks.values()];
    for (const [i, list] of order.entries()) {
      expect(list[0]!.buffer.byteLength).toBe(256 * 1024);
      list.sort((a, b) => a.byteOffset - b.byteOffset);
      for (let j = 1; j < list.length; j++) expect(list[j]!.byteOffset).toBeGreaterThanOrEqual(list[j - 1]!.byteOffset + list[j - 1]!.length);
      // The first block also holds the head, and the last is where reading stopped.
      if (i > 0 && i < order.length - 1) expect(list.reduce((n, p) => n + p.length, 0)).toBeGreaterThan((256 - 32) * 1024);
    }
  });
});

describe('content codings', () => {
  const text = 'a body that travels compressed, '.repeat(100);
  test.each([
    ['gzip', gzipSync],
    ['x-gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const)('%s is undone for text, bytes and blob', async (coding, compress) => {
    const body = compress(Buffer.from(text));
    const s = await rawServer((socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Encoding: ${coding}\r\nContent-Length: ${body.length}\r\n\r\n`);
      socket.write(body);
    });
    const client = new EnvdClient({ envdUrl: s.url });
    expect(await client.download('f.txt', { gzip: true })).toBe(text);
    expect(Buffer.from(await client.download('f.txt', { format: 'bytes', gzip: true })).toString()).toBe(text);
    expect(await (await client.download('f.txt', { format: 'blob', gzip: true })).text()).toBe(text);
    // Each body was read to its end, so one connection carried all three.
    expect(s.connections).toHaveLength(1);
  });

  test('a coding the client cannot undo is an invalid response that names it', async () => {
    const s = await rawServer((socket) => socket.write(ok('????', 'Content-Encoding: zstd\r\n')));
    const err = await failure(download(s.url));
    expect(err.kind).toBe('invalid_response');
    expect(err.message).toContain("Content-Encoding 'zstd', which this client cannot decode");
  });
});

describe('requests', () => {
  test('a header value that would split the head is refused before anything is sent', async () => {
    const s = await rawServer((socket) => socket.write(ok('unreachable')));
    const client = new EnvdClient({ envdUrl: s.url, headers: { 'X-Note': 'a\r\nX-Injected: 1' } });
    const err = await failure(client.download('f.txt'));
    expect(err.message).toContain("invalid character in the value of header 'X-Note'");
    expect(s.requests).toHaveLength(0);
  });

  test("the caller's Host and the URL's credentials go as given", async () => {
    const s = await rawServer((socket) => socket.write(ok('fine')));
    const url = new URL(s.url);
    url.username = 'us%20er';
    url.password = 'p@ss';
    const client = new EnvdClient({ envdUrl: url.toString(), headers: { Host: 'sandbox.example' } });
    expect(await client.download('f.txt')).toBe('fine');
    expect(s.requests[0]).toContain('\r\nHost: sandbox.example');
    expect(s.requests[0]).not.toContain(`Host: ${url.host}`);
    expect(s.requests[0]).toContain(`\r\nAuthorization: Basic ${Buffer.from('us er:p@ss').toString('base64')}`);
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
      // A process that does (NODE_EXTRA_CA_CERTS) downloads twice over one connection, and exits by itself
      // with that connection kept: idle connections do not hold the event loop.
      const script = join(dir, 'download.mjs');
      writeFileSync(
        script,
        `import { EnvdClient } from ${JSON.stringify(join(import.meta.dirname, '../dist/index.js'))};
const client = new EnvdClient({ envdUrl: process.argv[2] });
console.log(await client.download('f.txt'));
console.log(await client.download('f.txt', { format: 'bytes' }).then((b) => b.length));`,
      );
      const child = spawn(process.execPath, [script, url], { env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') } });
      let out = '';
      let errors = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr.on('data', (b: Buffer) => (errors += b.toString()));
      const [code] = (await once(child, 'exit')) as [number];
      expect(errors).toBe('');
      expect(code).toBe(0);
      const expected = `over TLS to localhost:${(https.address() as AddressInfo).port}`;
      expect(out).toBe(`${expected}\n${expected.length}\n`);
      expect(handshakes).toBe(1);
    } finally {
      https.closeAllConnections();
      await new Promise((resolve) => https.close(resolve));
    }
  });
});
