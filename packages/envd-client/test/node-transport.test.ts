// The Connect transport EnvdClient makes by default (connect-node's, over
// HTTP/1.1 or HTTP/2, over TCP or a unix socket) against a real connect-node
// server: every outcome of a call (answer, error, end of stream, timeout,
// a proxy's answer, a dead server) is what the SDK's error mapping reads.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttp2Server, type Http2Server, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Code, ConnectError, type ConnectRouter } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { type MessageInitShape } from '@bufbuild/protobuf';
import { FileType, Filesystem, Process, type StreamInputRequestSchema } from '@paddock/models';
import { EnvdClient, type EnvdClientOptions } from '../src/index.js';
import { nodeOutput } from './http-server.js';

/** How many events the last `start` handler managed to yield. */
let yielded = 0;
let inputsSeen: string[] = [];
let lastHeaders: Headers | undefined;

/** Waits `ms`, or less if `signal` (a handler's: its client went away) fires first. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

function routes(router: ConnectRouter): void {
  router.service(Filesystem, {
    stat(req, ctx) {
      lastHeaders = ctx.requestHeader;
      if (req.path === '/missing') {
        ctx.responseTrailer.set('why', 'gone');
        throw new ConnectError('path /missing not found', Code.NotFound, { 'x-detail': 'd1' });
      }
      if (req.path === '/slow') return sleep(5_000, ctx.signal).then(() => ({}));
      ctx.responseHeader.set('x-answer', 'yes');
      ctx.responseTrailer.set('x-trail', 't');
      return { entry: { name: req.path.slice(1), path: req.path, type: FileType.FILE, size: 42n } };
    },
  });
  router.service(Process, {
    async *start(req, ctx) {
      lastHeaders = ctx.requestHeader;
      yielded = 0;
      const cmd = req.process?.cmd ?? '';
      if (cmd === 'fail-first') throw new ConnectError('cannot start', Code.FailedPrecondition);
      ctx.responseTrailer.set('x-done', 'yes');
      const count = cmd === 'many' ? 2_000 : cmd === 'big' ? 400 : cmd === 'hang' ? 1 : 2;
      const chunk = cmd === 'big' ? new Uint8Array(64 * 1024) : undefined;
      for (let i = 0; i < count; i++) {
        yield { event: { event: { case: 'data', value: { output: { case: 'stdout', value: chunk ?? new TextEncoder().encode(`line ${i}\n`) } } } } };
        yielded += 1;
      }
      if (cmd === 'hang') await sleep(10_000, ctx.signal);
      if (cmd === 'fail-late') throw new ConnectError('broke mid-stream', Code.DataLoss);
      yield { event: { event: { case: 'end', value: { exitCode: 0, exited: true, status: 'done' } } } };
    },
    async streamInput(requests) {
      inputsSeen = [];
      for await (const r of requests) {
        if (r.event.case === 'data' && r.event.value.input?.input.case === 'stdin') inputsSeen.push(new TextDecoder().decode(r.event.value.input.input.value));
      }
      return {};
    },
  });
}

// Several cases hang up on purpose in the middle of a stream; connect-node's
// server then logs that it could not write the rest. Only that line is dropped.
const consoleError = console.error.bind(console);
console.error = (...args: unknown[]) => {
  if (typeof args[0] === 'string' && args[0].startsWith('handler for rpc ') && /ERR_STREAM_DESTROYED|ERR_HTTP2_INVALID_STREAM/.test(String(args[1]))) return;
  consoleError(...args);
};

/** What the raw answers use of a response, HTTP/1.1's or HTTP/2's. */
interface RawResponse {
  writeHead(status: number, headers: Record<string, string>): unknown;
  write(chunk: Uint8Array): unknown;
  end(body?: string): unknown;
}

/** Plain HTTP answers for paths under /raw/, standing in for a proxy or a wrong server. */
let raw: ((req: IncomingMessage | Http2ServerRequest, res: RawResponse) => void) | undefined;

const connect = connectNodeAdapter({ routes });
const handle = (req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): void => {
  if (req.url?.startsWith('/raw/') && raw) raw(req, res as RawResponse);
  else connect(req as IncomingMessage, res as ServerResponse);
};

let dir: string;
let http1: Server;
let http2: Http2Server;
let onSocket: Server;
let urls: { http1: string; http2: string };
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'envd-client-transport-'));
  http1 = createServer(handle);
  http2 = createHttp2Server(handle);
  onSocket = createServer(handle);
  await Promise.all([
    new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => http2.listen(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => onSocket.listen(join(dir, 'envd.sock'), resolve)),
  ]);
  urls = {
    http1: `http://127.0.0.1:${(http1.address() as AddressInfo).port}`,
    http2: `http://127.0.0.1:${(http2.address() as AddressInfo).port}`,
  };
});
afterAll(async () => {
  http1.closeAllConnections();
  onSocket.closeAllConnections();
  await Promise.all([http1, http2, onSocket].map((s) => new Promise((resolve) => s.close(resolve))));
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  raw = undefined;
});

const clients: EnvdClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
});

/** The ways an EnvdClient reaches envd; `prefix` is a path under the server (`/raw`). */
const links: [string, (prefix: string, options: Partial<EnvdClientOptions>) => EnvdClient][] = [
  ['HTTP/1.1', (prefix, options) => new EnvdClient({ envdUrl: `${urls.http1}${prefix}`, ...options })],
  ['HTTP/2', (prefix, options) => new EnvdClient({ envdUrl: `${urls.http2}${prefix}`, httpVersion: '2', ...options })],
  ['a unix socket', (prefix, options) => new EnvdClient({ envdUrl: `http://localhost${prefix}`, socketPath: join(dir, 'envd.sock'), ...options })],
];

async function failure(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('expected the call to fail');
}

async function collect(iterable: AsyncIterable<{ event?: { event: { case?: string } } }>): Promise<string[]> {
  const cases: string[] = [];
  for await (const m of iterable) cases.push(m.event?.event.case ?? '?');
  return cases;
}

describe.each(links)('over %s', (_link, make) => {
  describe.each([
    ['JSON', false],
    ['binary', true],
  ])('in %s', (_format, binary) => {
    const envd = (prefix = ''): EnvdClient => {
      const c = make(prefix, { useBinaryFormat: binary, accessToken: 'tok' });
      clients.push(c);
      return c;
    };

    test('a unary answer with its headers and trailers; the request carries envd\'s headers and asks for no compression', async () => {
      let header: Headers | undefined;
      let trailer: Headers | undefined;
      const res = await envd().filesystem.stat({ path: '/a.txt' }, { onHeader: (h) => (header = h), onTrailer: (t) => (trailer = t) });
      expect(res.entry).toMatchObject({ name: 'a.txt', path: '/a.txt', type: FileType.FILE, size: 42n });
      expect(header?.get('x-answer')).toBe('yes');
      expect(trailer?.get('x-trail')).toBe('t');
      expect(lastHeaders?.get('x-access-token')).toBe('tok');
      expect(lastHeaders?.get('content-type')).toBe(binary ? 'application/proto' : 'application/json');
      expect(lastHeaders?.get('accept-encoding') ?? '').not.toMatch(/gzip|br/);
    });

    test('a unary error keeps its code, message and metadata', async () => {
      const err = await failure(envd().filesystem.stat({ path: '/missing' }));
      expect(err.code).toBe(Code.NotFound);
      expect(err.rawMessage).toBe('path /missing not found');
      expect(err.metadata.get('x-detail')).toBe('d1');
      expect(err.metadata.get('why')).toBe('gone');
    });

    test('a server stream delivers every message, its headers before them and its trailers after', async () => {
      const order: string[] = [];
      let trailer: Headers | undefined;
      const stream = envd().process.start(
        { process: { cmd: 'many' } },
        {
          onHeader: (h) => order.push(`header ${h.get('content-type')?.startsWith('application/connect') ? 'connect' : '?'}`),
          onTrailer: (t) => {
            trailer = t;
            order.push('trailer');
          },
        },
      );
      let count = 0;
      for await (const m of stream) {
        if (count === 0 || m.event?.event.case === 'end') order.push(`message ${m.event?.event.case}`);
        count += 1;
      }
      expect(count).toBe(2_001);
      expect(order).toEqual(['header connect', 'message data', 'message end', 'trailer']);
      expect(trailer?.get('x-done')).toBe('yes');
      expect(lastHeaders?.get('keepalive-ping-interval')).toBe('50');
      expect(lastHeaders?.get('connect-accept-encoding') ?? '').not.toMatch(/gzip|br/);
    });

    test('an error before the first message, and one after some', async () => {
      const early = await failure(collect(envd().process.start({ process: { cmd: 'fail-first' } })));
      expect([early.code, early.rawMessage]).toEqual([Code.FailedPrecondition, 'cannot start']);
      const seen: string[] = [];
      const late = await failure(
        (async () => {
          for await (const m of envd().process.start({ process: { cmd: 'fail-late' } })) seen.push(m.event?.event.case ?? '?');
        })(),
      );
      expect([late.code, late.rawMessage]).toEqual([Code.DataLoss, 'broke mid-stream']);
      expect(seen).toEqual(['data', 'data']);
    });

    test('timeoutMs ends a unary call and a stream with deadline_exceeded', async () => {
      const unary = await failure(envd().filesystem.stat({ path: '/slow' }, { timeoutMs: 150 }));
      expect([unary.code, unary.rawMessage]).toEqual([Code.DeadlineExceeded, 'the operation timed out']);
      const stream = await failure(collect(envd().process.start({ process: { cmd: 'hang' } }, { timeoutMs: 300 })));
      expect([stream.code, stream.rawMessage]).toEqual([Code.DeadlineExceeded, 'the operation timed out']);
    });

    test('a proxy answering 502 is unavailable, a 404 unimplemented, for unary calls and streams', async () => {
      raw = (_req, res) => {
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end('{"code":502,"message":"sandbox is not running"}');
      };
      expect((await failure(envd('/raw').filesystem.stat({ path: '/a' }))).code).toBe(Code.Unavailable);
      expect((await failure(collect(envd('/raw').process.start({ process: { cmd: 'x' } })))).code).toBe(Code.Unavailable);
      raw = (_req, res) => {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('no such route');
      };
      expect((await failure(envd('/raw').filesystem.stat({ path: '/a' }))).code).toBe(Code.Unimplemented);
      expect((await failure(collect(envd('/raw').process.start({ process: { cmd: 'x' } })))).code).toBe(Code.Unimplemented);
    });

    test('a server that goes away mid-stream fails the stream', async () => {
      raw = (req, res) => {
        res.writeHead(200, { 'content-type': binary ? 'application/connect+proto' : 'application/connect+json' });
        res.write(Buffer.from([0, 0, 0, 0, 9])); // an envelope promising 9 bytes that never come
        setTimeout(() => ('stream' in req ? req.stream.close(2) : req.socket.destroy()), 20);
      };
      const err = await failure(collect(envd('/raw').process.start({ process: { cmd: 'x' } })));
      expect([Code.Aborted, Code.Unavailable, Code.InvalidArgument, Code.Internal]).toContain(err.code);
    });

    test('a stream that ends without its end-of-stream message is a protocol error', async () => {
      raw = (_req, res) => {
        res.writeHead(200, { 'content-type': binary ? 'application/connect+proto' : 'application/connect+json' });
        res.end();
      };
      const err = await failure(collect(envd('/raw').process.start({ process: { cmd: 'x' } })));
      expect([err.code, err.rawMessage]).toEqual([Code.InvalidArgument, 'protocol error: missing EndStreamResponse']);
    });

    test('a client stream (StreamInput) is sent whole', async () => {
      async function* inputs(): AsyncGenerator<MessageInitShape<typeof StreamInputRequestSchema>> {
        yield { event: { case: 'start', value: { process: { selector: { case: 'pid', value: 1 } } } } };
        for (const text of ['one', 'two']) yield { event: { case: 'data', value: { input: { input: { case: 'stdin', value: new TextEncoder().encode(text) } } } } };
      }
      await envd().process.streamInput(inputs());
      expect(inputsSeen).toEqual(['one', 'two']);
    });

    test('a reader that stops reading pauses the response, so the server waits', async () => {
      const it = envd().process.start({ process: { cmd: 'big' } })[Symbol.asyncIterator]();
      await it.next();
      await sleep(300);
      // 400 messages of 64 KiB: without backpressure all of them would sit in this process by now.
      expect(yielded).toBeLessThan(400);
      let n = 1;
      while (!(await it.next()).done) n += 1;
      expect(n).toBe(401);
    });

    test('leaving a stream early (break) closes it; the next call works', async () => {
      const c = envd();
      for await (const _ of c.process.start({ process: { cmd: 'hang' } })) break;
      await expect(collect(c.process.start({ process: { cmd: 'two' } }))).resolves.toEqual(['data', 'data', 'end']);
    });
  });
});

/**
 * What connect-node reads from Node's own errors (an abort's AbortError, a
 * refused connection's ECONNREFUSED), it recognises with `instanceof Error`,
 * which fails for errors made by Node inside jest's module realm (it then
 * reports `internal`). So these run in a process of their own, against the
 * built package.
 */
test('outside jest: the caller\'s signal cancels a call and an open stream; a refused connection is unavailable', async () => {
  const script = `
import { Code, ConnectError } from '@connectrpc/connect';
import { EnvdClient } from ${JSON.stringify(join(import.meta.dirname, '../dist/index.js'))};
const [http1Url, http2Url, closedUrl] = process.argv.slice(1);
const codeOf = (p) => p.then(() => 'resolved', (e) => Code[ConnectError.from(e).code]);
const out = {};
for (const [name, url, options] of [['http1', http1Url, {}], ['http2', http2Url, { httpVersion: '2' }]]) {
  const envd = new EnvdClient({ envdUrl: url, useBinaryFormat: true, ...options });
  const slow = new AbortController();
  setTimeout(() => slow.abort(), 100);
  out[name + ' unary abort'] = await codeOf(envd.filesystem.stat({ path: '/slow' }, { signal: slow.signal }));
  out[name + ' aborted before'] = await codeOf(envd.filesystem.stat({ path: '/a.txt' }, { signal: AbortSignal.abort() }));
  const stream = new AbortController();
  out[name + ' stream abort'] = await codeOf((async () => { for await (const _ of envd.process.start({ process: { cmd: 'hang' } }, { signal: stream.signal })) stream.abort(); })());
  const closed = new EnvdClient({ envdUrl: closedUrl, ...options });
  out[name + ' refused'] = await codeOf(closed.filesystem.stat({ path: '/a' }));
  await Promise.all([envd.close(), closed.close()]);
}
console.log(JSON.stringify(out));
`;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const closedUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise((resolve) => closed.close(resolve));
  const out = await nodeOutput(['--input-type=module', '-e', script, urls.http1, urls.http2, closedUrl], { cwd: join(import.meta.dirname, '..') });
  expect(JSON.parse(out)).toEqual({
    'http1 unary abort': 'Canceled',
    'http1 aborted before': 'Canceled',
    'http1 stream abort': 'Canceled',
    'http1 refused': 'Unavailable',
    'http2 unary abort': 'Canceled',
    'http2 aborted before': 'Canceled',
    'http2 stream abort': 'Canceled',
    'http2 refused': 'Unavailable',
  });
}, 30_000);
