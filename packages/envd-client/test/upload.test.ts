import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import busboy from 'busboy';
import { EnvdArgumentError, EnvdClient, EnvdHttpError } from '../src/index.js';
import { generatedBytes, sha256Of } from '../../../tools/testing/bytes.mjs';
import { sendJson, serve, type TestServer } from './http-server.js';

interface ReceivedFile {
  field: string;
  filename: string;
  size: number;
  sha256: string;
}

interface ReceivedUpload {
  query: URLSearchParams;
  headers: IncomingMessage['headers'];
  files: ReceivedFile[];
}

const sha256 = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** Parses a multipart upload with busboy, as envd's stand-in, hashing each part as it streams. */
function parseMultipart(req: IncomingMessage): Promise<ReceivedFile[]> {
  return new Promise((resolve, reject) => {
    const files: Promise<ReceivedFile>[] = [];
    // busboy keeps only the base name unless told otherwise; envd needs the whole path.
    const bb = busboy({ headers: req.headers, defParamCharset: 'utf8', preservePath: true });
    bb.on('file', (field, stream, info) => {
      files.push(sha256Of(stream).then((h) => ({ field, filename: info.filename, ...h })));
    });
    bb.on('close', () => resolve(Promise.all(files)));
    bb.on('error', reject);
    req.pipe(bb);
  });
}

/** Answers like envd: one EntryInfo per written file. */
function entries(paths: string[]): { name: string; path: string; type: 'file' }[] {
  return paths.map((p) => ({ name: p.split('/').at(-1) ?? p, path: p.startsWith('/') ? p : `/home/user/${p}`, type: 'file' }));
}

let server: TestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function multipartServer(uploads: ReceivedUpload[]): Promise<TestServer> {
  return serve(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const files = await parseMultipart(req);
    uploads.push({ query: url.searchParams, headers: req.headers, files });
    sendJson(res, 200, entries(files.map((f) => url.searchParams.get('path') ?? f.filename)));
  });
}

/** Uploads go over undici unless the client was given a fetch; both must behave alike. */
const paths: [string, { fetch?: (input: string, init?: RequestInit) => Promise<Response> }][] = [
  ['over undici', {}],
  ['over fetch', { fetch: (input, init) => fetch(input, init) }],
];

describe.each(paths)('multipart uploads, %s', (_path, via) => {
  test('several files of every data kind arrive as parts named "file" whose filenames are the paths', async () => {
    const uploads: ReceivedUpload[] = [];
    server = await multipartServer(uploads);
    const c = new EnvdClient({ ...via, envdUrl: server.url, accessToken: 'tok', sandboxId: 'sbx' });
    const bigStream = Readable.from(generatedBytes(3 * 1024 * 1024, 64 * 1024, 7));
    const web = new Blob(['web stream ', 'contents']).stream();
    const files = [
      { path: '/home/user/a.txt', data: 'hello' },
      { path: 'relative/dir/b b.bin', data: Buffer.from([0, 1, 2, 255]) },
      { path: '/tmp/ünïcode.txt', data: new Blob(['blob ', 'parts']) },
      { path: '/tmp/web.txt', data: web },
      { path: '/tmp/node.bin', data: bigStream },
      { path: '/tmp/empty', data: new Uint8Array(0) },
    ];
    const written = await c.upload(files);
    expect(written.map((e) => e.path)).toEqual([
      '/home/user/a.txt',
      '/home/user/relative/dir/b b.bin',
      '/tmp/ünïcode.txt',
      '/tmp/web.txt',
      '/tmp/node.bin',
      '/tmp/empty',
    ]);
    expect(uploads).toHaveLength(1);
    const upload = uploads[0] as ReceivedUpload;
    expect(upload.query.has('path')).toBe(false);
    expect(upload.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    expect(upload.headers['x-access-token']).toBe('tok');
    expect(upload.headers['e2b-sandbox-id']).toBe('sbx');
    const big = await sha256Of(generatedBytes(3 * 1024 * 1024, 64 * 1024, 7));
    expect(upload.files).toEqual([
      { field: 'file', filename: '/home/user/a.txt', size: 5, sha256: sha256('hello') },
      { field: 'file', filename: 'relative/dir/b b.bin', size: 4, sha256: sha256(new Uint8Array([0, 1, 2, 255])) },
      { field: 'file', filename: '/tmp/ünïcode.txt', size: 10, sha256: sha256('blob parts') },
      { field: 'file', filename: '/tmp/web.txt', size: 19, sha256: sha256('web stream contents') },
      { field: 'file', filename: '/tmp/node.bin', ...big },
      { field: 'file', filename: '/tmp/empty', size: 0, sha256: sha256('') },
    ]);
  });

  test('a single file also names its target in the path query, with the user as username', async () => {
    const uploads: ReceivedUpload[] = [];
    server = await multipartServer(uploads);
    const c = new EnvdClient({ ...via, envdUrl: server.url, user: 'user' });
    const written = await c.upload('/home/user/one.txt', 'one', { user: 'root' });
    expect(written).toEqual(entries(['/home/user/one.txt']));
    const upload = uploads[0] as ReceivedUpload;
    expect(upload.query.get('path')).toBe('/home/user/one.txt');
    expect(upload.query.get('username')).toBe('root');
    expect(upload.files.map((f) => [f.filename, f.size])).toEqual([['/home/user/one.txt', 3]]);
    // In-memory data goes with a known length.
    expect(upload.headers['content-length']).toBeDefined();
  });

  test('a large in-memory file goes with a known length too, every byte in place', async () => {
    const uploads: ReceivedUpload[] = [];
    server = await multipartServer(uploads);
    const c = new EnvdClient({ ...via, envdUrl: server.url });
    const data = Uint8Array.from({ length: 2 * 1024 * 1024 + 3 }, (_, i) => (i * 7) & 0xff);
    await c.upload([
      { path: '/big.bin', data },
      { path: '/small.txt', data: 'small' },
    ]);
    const upload = uploads[0] as ReceivedUpload;
    expect(upload.headers['content-length']).toBeDefined();
    expect(upload.headers['transfer-encoding']).toBeUndefined();
    expect(upload.files).toEqual([
      { field: 'file', filename: '/big.bin', size: data.length, sha256: sha256(data) },
      { field: 'file', filename: '/small.txt', size: 5, sha256: sha256('small') },
    ]);
  });

  test('a stream is sent as it is read: a server that stops reading stops the producer', async () => {
    let produced = 0;
    let producedWhilePaused = -1;
    async function* counted(): AsyncGenerator<Uint8Array> {
      for await (const chunk of generatedBytes(64 * 1024 * 1024, 256 * 1024, 3)) {
        produced += chunk.length;
        yield chunk;
      }
    }
    server = await serve(async (req, res) => {
      // Take a first chunk, then stop reading for a while and see how far the client got.
      await new Promise<void>((resolve) => req.once('data', () => resolve()));
      req.pause();
      await new Promise((resolve) => setTimeout(resolve, 300));
      producedWhilePaused = produced;
      req.resume();
      await drain(req);
      sendJson(res, 200, entries([new URL(req.url ?? '/', 'http://x').searchParams.get('path') ?? '?']));
    });
    const c = new EnvdClient({ ...via, envdUrl: server.url });
    await c.upload('/tmp/big.bin', counted());
    expect(produced).toBe(64 * 1024 * 1024);
    // Socket and stream buffers hold a few MiB at most; buffering the body would have produced all 64.
    expect(producedWhilePaused).toBeGreaterThan(0);
    expect(producedWhilePaused).toBeLessThan(16 * 1024 * 1024);
  });
});

async function drain(req: IncomingMessage): Promise<void> {
  for await (const _ of req) {
    // Only the pace of reading matters here, not the contents.
  }
}

describe.each(paths)('octet-stream uploads, %s', (_path, via) => {
  test('20 MiB from a generator, gzipped on the fly, arrive intact (sha256) in one chunked request', async () => {
    const received: { query: URLSearchParams; headers: IncomingMessage['headers']; sha256: string; size: number }[] = [];
    server = await serve(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const h = await sha256Of(req.pipe(createGunzip()));
      received.push({ query: url.searchParams, headers: req.headers, ...h });
      sendJson(res, 200, entries([url.searchParams.get('path') ?? '?']));
    });
    const c = new EnvdClient({ ...via, envdUrl: server.url, accessToken: 'tok' });
    const size = 20 * 1024 * 1024;
    const written = await c.upload('/data/blob.bin', generatedBytes(size, 64 * 1024, 11), { gzip: true });
    expect(written).toEqual(entries(['/data/blob.bin']));
    const expected = await sha256Of(generatedBytes(size, 64 * 1024, 11));
    expect(received).toHaveLength(1);
    const r = received[0];
    expect(r?.size).toBe(size);
    expect(r?.sha256).toBe(expected.sha256);
    expect(r?.query.get('path')).toBe('/data/blob.bin');
    expect(r?.headers['content-type']).toBe('application/octet-stream');
    expect(r?.headers['content-encoding']).toBe('gzip');
    expect(r?.headers['transfer-encoding']).toBe('chunked');
    expect(r?.headers['x-access-token']).toBe('tok');
  });

  test('gzipped bytes in memory are compressed on the way, sent chunked, and arrive intact', async () => {
    const received: { sha256: string; chunked: boolean; encoding: string | undefined }[] = [];
    server = await serve(async (req, res) => {
      received.push({ sha256: (await sha256Of(req.pipe(createGunzip()))).sha256, chunked: req.headers['transfer-encoding'] === 'chunked', encoding: req.headers['content-encoding'] });
      sendJson(res, 200, entries(['/data/z.bin']));
    });
    const c = new EnvdClient({ ...via, envdUrl: server.url });
    const data = Uint8Array.from({ length: 3 * 1024 * 1024 }, (_, i) => (i * 7) & 0xff);
    await c.upload('/data/z.bin', data, { gzip: true });
    expect(received).toEqual([{ sha256: sha256(data), chunked: true, encoding: 'gzip' }]);
  });

  test('several files go as one request each, each with its path', async () => {
    const received: [string | null, string][] = [];
    server = await serve(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      received.push([url.searchParams.get('path'), Buffer.concat(chunks).toString()]);
      expect(req.headers['content-encoding']).toBeUndefined();
      sendJson(res, 200, entries([url.searchParams.get('path') ?? '?']));
    });
    const c = new EnvdClient({ ...via, envdUrl: server.url });
    const written = await c.upload(
      [
        { path: '/a', data: 'alpha' },
        { path: '/b', data: new Blob(['beta']) },
        { path: '/c', data: new TextEncoder().encode('gamma').buffer },
      ],
      { encoding: 'octet-stream' },
    );
    expect(written.map((e) => e.path).sort()).toEqual(['/a', '/b', '/c']);
    expect(received.sort()).toEqual([
      ['/a', 'alpha'],
      ['/b', 'beta'],
      ['/c', 'gamma'],
    ]);
  });
});

describe('octet-stream uploads, by path', () => {
  test('bytes of every size arrive intact with their Content-Length, never chunked, without fetch', async () => {
    // Bytes in memory go to undici as the caller's arrays (views, never
    // copied into one); the global fetch is not used.
    const received: { length: string | undefined; chunked: boolean; sha256: string; size: number }[] = [];
    server = await serve(async (req, res) => {
      const h = await sha256Of(req);
      received.push({ length: req.headers['content-length'], chunked: req.headers['transfer-encoding'] === 'chunked', ...h });
      sendJson(res, 200, entries([new URL(req.url ?? '/', 'http://x').searchParams.get('path') ?? '?']));
    });
    const c = new EnvdClient({ envdUrl: server.url });
    const sizes = [0, 64 * 1024 - 1, 64 * 1024, 3 * 1024 * 1024 + 7];
    const payloads = sizes.map((n) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + n) & 0xff));
    const builtin = globalThis.fetch;
    let fetched = 0;
    globalThis.fetch = (input, init) => {
      fetched += 1;
      return builtin(input, init);
    };
    try {
      for (const data of payloads) await c.upload('/data/sized.bin', data, { encoding: 'octet-stream' });
      await c.upload([{ path: '/data/a.txt', data: 'text' }, { path: '/data/b.bin', data: payloads[3]! }]);
    } finally {
      globalThis.fetch = builtin;
    }
    expect(fetched).toBe(0);
    expect(received.slice(0, 4)).toEqual(payloads.map((p) => ({ length: String(p.length), chunked: false, sha256: sha256(p), size: p.length })));
    expect(received[4]).toMatchObject({ chunked: false, length: String(received[4]!.size) });
  });

  test('through a fetch of the caller\'s own, bytes go whole: it may not take a stream body', async () => {
    server = await serve(async (req, res) => {
      await drain(req);
      sendJson(res, 200, entries(['/data/own.bin']));
    });
    const bodies: unknown[] = [];
    const c = new EnvdClient({
      envdUrl: server.url,
      fetch: (input, init) => {
        bodies.push(init?.body);
        return fetch(input, init);
      },
    });
    const data = new Uint8Array(256 * 1024).fill(9);
    await c.upload('/data/own.bin', data, { encoding: 'octet-stream' });
    expect(bodies).toEqual([data]);
  });
});

describe('metadata', () => {
  test('travels as X-Metadata-* headers', async () => {
    const uploads: ReceivedUpload[] = [];
    server = await multipartServer(uploads);
    await new EnvdClient({ envdUrl: server.url }).upload('/f', 'x', { metadata: { Owner: 'alice', 'build.id': '42 / b' } });
    expect(uploads[0]?.headers['x-metadata-owner']).toBe('alice');
    expect(uploads[0]?.headers['x-metadata-build.id']).toBe('42 / b');
  });

  const invalid: [string, Record<string, string>, RegExp][] = [
    ['a key with a space', { 'bad key': 'v' }, /metadata key "bad key" must be/],
    ['an empty key', { '': 'v' }, /metadata key "" must be/],
    ['a non-ASCII value', { k: 'café' }, /metadata value of "k" must be printable ASCII/],
    ['a control character in a value', { k: 'a\nb' }, /printable ASCII/],
    ['a key over 246 bytes', { ['k'.repeat(247)]: 'v' }, /247 bytes; the limit is 246/],
    ['more than 4096 bytes in all', { a: 'x'.repeat(2100), b: 'y'.repeat(2100) }, /4202 bytes in all; the limit is 4096/],
  ];

  test.each(invalid)('with %s is refused before anything is sent', async (_what, metadata, message) => {
    let requests = 0;
    server = await serve((_req, res) => {
      requests += 1;
      sendJson(res, 200, []);
    });
    const err = await new EnvdClient({ envdUrl: server.url }).upload('/f', 'x', { metadata }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnvdArgumentError);
    expect((err as EnvdArgumentError).argument).toBe('metadata');
    expect((err as Error).message).toMatch(message);
    expect(requests).toBe(0);
  });

  test('at the limits is accepted', async () => {
    const uploads: ReceivedUpload[] = [];
    server = await multipartServer(uploads);
    const key = 'k'.repeat(246);
    await new EnvdClient({ envdUrl: server.url }).upload('/f', 'x', { metadata: { [key]: 'v'.repeat(4096 - 246) } });
    expect(uploads).toHaveLength(1);
  });
});

describe.each(paths)('upload errors, %s', (_path, via) => {
  test('an answer that never comes is a timeout; the caller\'s signal aborts', async () => {
    server = await serve((req) => void req.resume());
    const c = new EnvdClient({ ...via, envdUrl: server.url, requestTimeoutMs: 100 });
    await expect(c.upload('/data/t.txt', 'text')).rejects.toMatchObject({ kind: 'timeout', message: 'POST /files timed out' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    await expect(new EnvdClient({ ...via, envdUrl: server.url }).upload('/data/t.txt', 'text', { signal: controller.signal })).rejects.toMatchObject({ kind: 'aborted' });
  });

  test('envd {code, message} errors become EnvdHttpError of the matching kind', async () => {
    server = await serve((_req, res) => sendJson(res, 507, { code: 507, message: 'no space left on device' }));
    const err = await new EnvdClient({ ...via, envdUrl: server.url }).upload('/f', 'x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnvdHttpError);
    expect(err).toMatchObject({ kind: 'insufficient_storage', status: 507, code: 507, serverMessage: 'no space left on device' });
    expect((err as Error).message).toBe('POST /files failed with 507: no space left on device');
  });

  test('a plain-text error body is kept as the message', async () => {
    server = await serve((_req, res) => res.writeHead(401, { 'content-type': 'text/plain' }).end('invalid access token'));
    const err = await new EnvdClient({ ...via, envdUrl: server.url }).upload('/f', 'x').catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'unauthorized', status: 401, serverMessage: 'invalid access token' });
  });

  test('an answer that is not a list of entries is an invalid response', async () => {
    server = await serve((_req, res) => sendJson(res, 200, { ok: true }));
    const err = await new EnvdClient({ ...via, envdUrl: server.url }).upload('/f', 'x').catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: 'invalid_response', status: 200 });
  });

  test('an answer that is not JSON is an invalid response, for bytes in memory and for a stream', async () => {
    server = await serve((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('[{"name": '));
    });
    const c = new EnvdClient({ ...via, envdUrl: server.url });
    async function* chunks(): AsyncGenerator<Uint8Array> {
      yield new TextEncoder().encode('streamed');
    }
    for (const data of ['in memory', chunks()]) {
      const err = await c.upload('/f', data, { encoding: 'octet-stream' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(EnvdHttpError);
      expect(err).toMatchObject({ kind: 'invalid_response', status: 200 });
      expect((err as Error).message).toBe('POST /files answered 200 with a body that is not JSON');
    }
  });

  test('gzip with multipart, and an empty list, are refused', async () => {
    const c = new EnvdClient({ ...via, envdUrl: 'http://127.0.0.1:9' });
    await expect(c.upload('/f', 'x', { gzip: true, encoding: 'multipart' })).rejects.toThrow(EnvdArgumentError);
    await expect(c.upload([])).rejects.toThrow('nothing to upload');
  });
});
