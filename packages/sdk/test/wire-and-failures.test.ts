// What only a server that records or fails on purpose can show: the exact
// requests the SDK sends (defaults, units, headers of streams), and how it
// takes 429s, timeouts, 500s and an envd too old for it. The happy paths
// against the real server are in e2e-server.test.ts.
import { fromBinary, toJson, type DescMessage } from '@bufbuild/protobuf';
import { StartRequestSchema, WatchDirRequestSchema } from '@paddock/models';
import { gunzipSync } from 'node:zlib';
import {
  AuthenticationError,
  InvalidArgumentError,
  RateLimitError,
  Sandbox,
  SandboxError,
  SandboxNotFoundError,
  TemplateError,
  TimeoutError,
} from '../src/index.js';
import { startEnvd, type LocalEnvd } from './support/envd.js';
import { reply, startStandIn, type SeenRequest, type StandInServer } from './support/stand-in-server.js';

let api: StandInServer;
let envd: LocalEnvd;
const key = 'pdk_test_key';

beforeAll(async () => {
  [api, envd] = await Promise.all([startStandIn(), startEnvd()]);
});
afterAll(async () => {
  await Promise.all([api.close(), envd.stop()]);
});
beforeEach(() => {
  api.seen.length = 0;
});

const opts = () => ({ apiUrl: api.url, apiKey: key, sandboxUrl: envd.url });

function record(id: string, overrides: Record<string, unknown> = {}) {
  return {
    sandboxID: id,
    templateID: 'tpl-base',
    clientID: 'paddock',
    envdVersion: '0.7.0',
    envdAccessToken: envd.token,
    trafficAccessToken: 'traffic-tok',
    domain: 'localhost:3001',
    ...overrides,
  };
}

function detail(id: string, metadata: Record<string, string> = {}) {
  return {
    sandboxID: id,
    templateID: 'tpl-base',
    clientID: 'paddock',
    alias: 'base',
    startedAt: '2025-06-01T10:00:00Z',
    endAt: '2025-06-01T10:05:00Z',
    envdVersion: '0.7.0',
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: 1024,
    state: 'running',
    metadata,
  };
}

const only = (method: string, path: string): SeenRequest[] => api.seen.filter((r) => r.method === method && r.url.pathname === path);

describe('create', () => {
  test('sends the defaults, and the sandbox it returns drives the envd it names', async () => {
    api.answer((_req, res) => reply(res, 201, record('sbx-new')));
    const sbx = await Sandbox.create(opts());
    expect(api.seen).toHaveLength(1);
    const [req] = api.seen;
    expect(req).toMatchObject({ method: 'POST', json: { templateID: 'base', timeout: 300, secure: true } });
    expect(req?.url.pathname).toBe('/v2/sandboxes');
    expect(req?.headers['x-api-key']).toBe(key);
    expect(sbx).toMatchObject({ sandboxId: 'sbx-new', envdVersion: '0.7.0', sandboxDomain: 'localhost:3001', trafficAccessToken: 'traffic-tok' });
    expect(sbx.getHost(8000)).toBe('8000-sbx-new.localhost:3001');
    // The access token from the answer is what envd checks.
    expect((await sbx.commands.run('echo from-created')).stdout).toBe('from-created\n');
  });

  test('sends the template and every option given', async () => {
    api.answer((_req, res) => reply(res, 201, record('sbx-opts')));
    await Sandbox.create('python', {
      ...opts(),
      timeoutMs: 60_500,
      metadata: { app: 'demo' },
      envs: { MODE: 'test' },
      secure: false,
      allowInternetAccess: false,
      network: { denyOut: ['10.0.0.0/8'] },
      lifecycle: { onTimeout: 'pause', autoResume: true },
    });
    expect(api.seen[0]?.json).toEqual({
      templateID: 'python',
      timeout: 61,
      secure: false,
      metadata: { app: 'demo' },
      envVars: { MODE: 'test' },
      allow_internet_access: false,
      network: { denyOut: ['10.0.0.0/8'] },
      autoPause: true,
      autoResume: { enabled: true },
    });
  });

  test('without an API key nothing is sent', async () => {
    await expect(Sandbox.create({ apiUrl: api.url, sandboxUrl: envd.url })).rejects.toBeInstanceOf(AuthenticationError);
    expect(api.seen).toHaveLength(0);
  });

  test('an envd too old for the SDK: the sandbox is killed and a TemplateError thrown', async () => {
    api.answer((req, res) => (req.method === 'POST' ? reply(res, 201, record('sbx-old', { envdVersion: '0.1.9' })) : reply(res, 204)));
    await expect(Sandbox.create(opts())).rejects.toBeInstanceOf(TemplateError);
    expect(only('DELETE', '/sandboxes/sbx-old')).toHaveLength(1);
  });

  test('429 is retried, then a RateLimitError', async () => {
    api.answer((_req, res) => reply(res, 429, { code: 429, message: 'slow down' }, { 'retry-after': '0' }));
    await expect(Sandbox.list(opts()).nextItems()).rejects.toBeInstanceOf(RateLimitError);
    expect(api.seen.length).toBeGreaterThan(1);
  });

  test('retries sets how many times a 429 is sent again: 0 sends once, 2 sends three times', async () => {
    api.answer((_req, res) => reply(res, 429, { code: 429, message: 'slow down' }, { 'retry-after': '0' }));
    await expect(Sandbox.list({ ...opts(), retries: 0 }).nextItems()).rejects.toBeInstanceOf(RateLimitError);
    expect(api.seen).toHaveLength(1);
    api.seen.length = 0;
    await expect(Sandbox.list({ ...opts(), retries: 2 }).nextItems()).rejects.toBeInstanceOf(RateLimitError);
    expect(api.seen).toHaveLength(3);
  });

  test('a bad timeoutMs is refused before anything is sent, naming the option', async () => {
    for (const call of [
      () => Sandbox.create({ ...opts(), timeoutMs: -5 }),
      () => Sandbox.connect('sbx-x', { ...opts(), timeoutMs: -5 }),
      () => Sandbox.setTimeout('sbx-x', -5, opts()),
      () => Sandbox.fork('sbx-x', { ...opts(), timeoutMs: -5 }),
    ]) {
      await expect(call()).rejects.toThrow(new InvalidArgumentError('timeoutMs must be a whole number of milliseconds, 0 or more; got -5'));
    }
    await expect(Sandbox.create({ ...opts(), requestTimeoutMs: Number.NaN })).rejects.toThrow(/^requestTimeoutMs must be/);
    await expect(Sandbox.fork('sbx-x', { ...opts(), count: 0 })).rejects.toThrow(/^count must be a whole number from 1 to 100; got 0$/);
    expect(api.seen).toHaveLength(0);
  });

  test('the logger hears of each call and its status, never of the API key', async () => {
    api.answer((_req, res) => reply(res, 404, { code: 404, message: 'no such sandbox' }));
    const lines: string[] = [];
    const logger = { debug: (...a: unknown[]) => lines.push(`debug ${a.join(' ')}`), info: (...a: unknown[]) => lines.push(`info ${a.join(' ')}`), error: (...a: unknown[]) => lines.push(`error ${a.join(' ')}`) };
    await expect(Sandbox.getInfo('sbx-gone', { ...opts(), logger })).rejects.toBeInstanceOf(SandboxNotFoundError);
    expect(lines).toEqual(['debug → GET /sandboxes/sbx-gone', 'error ← GET /sandboxes/sbx-gone 404']);
    expect(lines.join('\n')).not.toContain(key);
  });

  test('no answer in time is a TimeoutError', async () => {
    api.answer(() => undefined);
    await expect(Sandbox.getInfo('sbx-slow', { ...opts(), requestTimeoutMs: 200 })).rejects.toBeInstanceOf(TimeoutError);
  });
});

describe('connect', () => {
  test('asks for at least the timeout, resumed (201) or running (200) alike', async () => {
    api.answer((req, res) => reply(res, req.json && (req.json as { timeout: number }).timeout === 300 ? 201 : 200, record('sbx-c')));
    const sbx = await Sandbox.connect('sbx-c', opts());
    expect(api.seen[0]).toMatchObject({ method: 'POST', json: { timeout: 300 } });
    expect(api.seen[0]?.url.pathname).toBe('/v2/sandboxes/sbx-c/connect');
    expect((await sbx.files.write('connected.txt', 'ok')).name).toBe('connected.txt');
    expect(await sbx.connect({ timeoutMs: 10_000 })).toBe(sbx);
    expect(api.seen[1]).toMatchObject({ json: { timeout: 10 } });
  });

});

describe('one sandbox', () => {
  let sbx: Sandbox;
  beforeAll(async () => {
    api.answer((_req, res) => reply(res, 201, record('sbx-1')));
    sbx = await Sandbox.create(opts());
  });

  test('kill of a sandbox the server cannot kill throws', async () => {
    api.answer((_req, res) => reply(res, 500, { code: 500, message: 'runtime failed' }));
    const err = await sbx.kill().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect(err).toMatchObject({ statusCode: 500 });
  });

  test('pause: true when paused, false when it was not running; keepMemory is sent as memory', async () => {
    api.answer((_req, res) => reply(res, 204));
    expect(await sbx.pause()).toBe(true);
    expect(await Sandbox.pause('sbx-1', { ...opts(), keepMemory: false })).toBe(true);
    expect(only('POST', '/sandboxes/sbx-1/pause').map((r) => r.json)).toEqual([{}, { memory: false }]);
    api.answer((_req, res) => reply(res, 409, { code: 409, message: 'sandbox sbx-1 is not running' }));
    expect(await sbx.pause()).toBe(false);
    api.answer((_req, res) => reply(res, 404, { code: 404, message: 'sandbox sbx-1 not found' }));
    await expect(sbx.pause()).rejects.toBeInstanceOf(SandboxNotFoundError);
  });

  test('setTimeout sends whole seconds, rounded up', async () => {
    api.answer((_req, res) => reply(res, 204));
    await sbx.setTimeout(30_001);
    await Sandbox.setTimeout('sbx-1', 5_000, opts());
    expect(only('POST', '/sandboxes/sbx-1/timeout').map((r) => r.json)).toEqual([{ timeout: 31 }, { timeout: 5 }]);
    api.answer((_req, res) => reply(res, 404, { code: 404, message: 'gone' }));
    await expect(sbx.setTimeout(1000)).rejects.toBeInstanceOf(SandboxNotFoundError);
  });

  test('getMetrics sends the range in unix seconds', async () => {
    api.answer((_req, res) =>
      reply(res, 200, [
        {
          timestamp: '2025-06-01T10:00:05Z',
          timestampUnix: 1748772005,
          cpuCount: 2,
          cpuUsedPct: 3.5,
          memUsed: 100,
          memTotal: 512,
          memCache: 10,
          diskUsed: 1,
          diskTotal: 2,
        },
      ]),
    );
    const metrics = await sbx.getMetrics({ start: new Date(1_748_772_000_000), end: new Date(1_748_772_060_400) });
    const [req] = only('GET', '/sandboxes/sbx-1/metrics');
    expect(Object.fromEntries(req?.url.searchParams ?? [])).toEqual({ start: '1748772000', end: '1748772060' });
    expect(metrics).toEqual([
      { timestamp: new Date(1748772005000), cpuCount: 2, cpuUsedPct: 3.5, memUsed: 100, memTotal: 512, memCache: 10, diskUsed: 1, diskTotal: 2 },
    ]);
    expect(await Sandbox.getMetrics('sbx-1', opts())).toHaveLength(1);
    expect(only('GET', '/sandboxes/sbx-1/metrics')[1]?.url.search).toBe('');
  });

});

describe('isRunning', () => {
  test('asks /health with the routing headers: 2xx is running, 502 (from the proxy) is not', async () => {
    let running = true;
    api.answer((req, res) => {
      if (req.url.pathname === '/health') {
        if (running) reply(res, 204);
        else reply(res, 502, { code: 502, message: `sandbox ${String(req.headers['e2b-sandbox-id'])} is not running` });
      } else reply(res, 201, record('sbx-h'));
    });
    const sbx = await Sandbox.create({ ...opts(), sandboxUrl: api.url });
    expect(await sbx.isRunning()).toBe(true);
    const health = only('GET', '/health')[0];
    expect(health?.headers).toMatchObject({ 'e2b-sandbox-id': 'sbx-h', 'e2b-sandbox-port': '49983', 'x-access-token': envd.token });
    running = false;
    expect(await sbx.isRunning()).toBe(false);
  });

  test('against the real envd', async () => {
    expect(await envd.sandbox().isRunning()).toBe(true);
  });

  test('a dead sandbox behind the proxy: files (HTTP and RPC) and commands all throw SandboxNotFoundError', async () => {
    api.answer((req, res) =>
      req.url.pathname === '/v2/sandboxes' ? reply(res, 201, record('sbx-dead')) : reply(res, 502, { code: 502, message: 'sandbox sbx-dead is not running' }),
    );
    const sbx = await Sandbox.create({ ...opts(), sandboxUrl: api.url });
    await expect(sbx.files.read('/etc/hosts')).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(sbx.files.exists('/etc/hosts')).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(sbx.files.list('/')).rejects.toBeInstanceOf(SandboxNotFoundError);
    await expect(sbx.commands.run('true')).rejects.toBeInstanceOf(SandboxNotFoundError);
  });
});

describe('process streams on the wire', () => {
  /** The one message of a Connect stream request (a 5-byte envelope, then protobuf), as its JSON form to compare. */
  const message = (req: SeenRequest | undefined, schema: DescMessage): unknown =>
    toJson(schema, fromBinary(schema, (req?.raw ?? Buffer.alloc(5)).subarray(5)));
  let sbx: Sandbox;

  beforeAll(async () => {
    api.answer((req, res) =>
      req.url.pathname === '/v2/sandboxes' ? reply(res, 201, record('sbx-wire')) : reply(res, 502, { code: 502, message: 'not running' }),
    );
    sbx = await Sandbox.create({ ...opts(), sandboxUrl: api.url });
  });

  test('a command: bash -l -c, stdin false, keepalive and deadline headers', async () => {
    await expect(sbx.commands.run('echo hi', { user: 'root', cwd: '/srv', envs: { A: '1' } })).rejects.toBeInstanceOf(SandboxNotFoundError);
    const [start] = only('POST', '/process.Process/Start');
    expect(start?.headers).toMatchObject({
      'content-type': 'application/connect+proto',
      'keepalive-ping-interval': '50',
      'connect-timeout-ms': '60000',
      'e2b-sandbox-id': 'sbx-wire',
      'e2b-sandbox-port': '49983',
      'x-access-token': envd.token,
      authorization: `Basic ${Buffer.from('root:').toString('base64')}`,
    });
    expect(message(start, StartRequestSchema)).toEqual({ process: { cmd: '/bin/bash', args: ['-l', '-c', 'echo hi'], envs: { A: '1' }, cwd: '/srv' }, stdin: false });
  });

  test('timeoutMs 0 sends no deadline; no user sends no Authorization', async () => {
    await expect(sbx.commands.run('sleep 1', { timeoutMs: 0, stdin: true })).rejects.toBeInstanceOf(SandboxNotFoundError);
    const [start] = only('POST', '/process.Process/Start');
    expect(start?.headers['connect-timeout-ms']).toBeUndefined();
    expect(start?.headers.authorization).toBeUndefined();
    expect(message(start, StartRequestSchema)).toMatchObject({ stdin: true });
  });

  test('a terminal: bash -i -l, terminal env, size, and no stdin field', async () => {
    await expect(sbx.pty.create({ cols: 90, rows: 20, onData: () => undefined, envs: { LANG: 'en_US.UTF-8' } })).rejects.toBeInstanceOf(
      SandboxNotFoundError,
    );
    const [start] = only('POST', '/process.Process/Start');
    expect(message(start, StartRequestSchema)).toEqual({
      process: { cmd: '/bin/bash', args: ['-i', '-l'], envs: { TERM: 'xterm-256color', LANG: 'en_US.UTF-8', LC_ALL: 'C.UTF-8' } },
      pty: { size: { cols: 90, rows: 20 } },
    });
  });

  test('watchDir asks with keepalive and a 60 s deadline', async () => {
    await expect(sbx.files.watchDir('/tmp', () => undefined, { recursive: true })).rejects.toBeInstanceOf(SandboxNotFoundError);
    const [watch] = only('POST', '/filesystem.Filesystem/WatchDir');
    expect(watch?.headers).toMatchObject({ 'keepalive-ping-interval': '50', 'connect-timeout-ms': '60000' });
    expect(message(watch, WatchDirRequestSchema)).toEqual({ path: '/tmp', recursive: true });
  });
});

describe('file uploads on the wire', () => {
  /** The stand-in answers an upload as envd does: the files written, by `path` or by the parts' filenames. */
  const sandboxFor = async (envdVersion: string) => {
    api.answer((req, res) => {
      if (req.url.pathname === '/v2/sandboxes') return reply(res, 201, record(`sbx-up-${envdVersion.replace(/\./g, '')}`, { envdVersion }));
      const named = req.url.searchParams.get('path');
      const paths = named ? [named] : [...req.body.matchAll(/filename="([^"]*)"/g)].map((m) => m[1]!);
      reply(res, 200, paths.map((path) => ({ name: path, path: `/home/user/${path}`, type: 'file' })));
    });
    return Sandbox.create({ ...opts(), sandboxUrl: api.url });
  };
  /** Each POST /files sent: its content type (no parameters), path, encoding and body. */
  const uploads = () =>
    only('POST', '/files').map((r) => ({
      type: String(r.headers['content-type']).split(';')[0],
      path: r.url.searchParams.get('path'),
      encoding: r.headers['content-encoding'],
      body: r.body,
    }));
  const chunks = (...parts: string[]) => ReadableStream.from(parts.map((p) => new TextEncoder().encode(p)));
  let sbx: Sandbox;
  let old: Sandbox;

  beforeAll(async () => {
    sbx = await sandboxFor('0.7.0');
    old = await sandboxFor('0.5.6');
  });

  test('one file is sent raw, with its path in the query', async () => {
    expect(await sbx.files.write('one.txt', 'hello')).toMatchObject({ path: '/home/user/one.txt' });
    expect(uploads()).toEqual([{ type: 'application/octet-stream', path: 'one.txt', encoding: undefined, body: 'hello' }]);
  });

  test('several files in memory go as one multipart request; with a stream among them, raw side by side', async () => {
    const ab = await sbx.files.write([
      { path: 'a.txt', data: 'A' },
      { path: 'b.txt', data: 'B' },
    ]);
    expect(ab.map((w) => w.name)).toEqual(['a.txt', 'b.txt']);
    const [multi] = uploads();
    expect(uploads()).toHaveLength(1);
    expect(multi).toMatchObject({ type: 'multipart/form-data', path: null });
    expect(multi?.body).toContain('filename="a.txt"');
    expect(multi?.body).toContain('filename="b.txt"');

    api.seen.length = 0;
    const cd = await sbx.files.write([
      { path: 'c.txt', data: 'C' },
      { path: 'd.txt', data: chunks('D', 'D') },
    ]);
    expect(cd.map((w) => w.name)).toEqual(['c.txt', 'd.txt']);
    const raw = uploads().sort((x, y) => String(x.path).localeCompare(String(y.path)));
    expect(raw).toEqual([
      { type: 'application/octet-stream', path: 'c.txt', encoding: undefined, body: 'C' },
      { type: 'application/octet-stream', path: 'd.txt', encoding: undefined, body: 'DD' },
    ]);
  });

  test('useOctetStream: false keeps one file multipart; gzip compresses the raw body', async () => {
    await expect(sbx.files.write('m.txt', 'x', { useOctetStream: false })).resolves.toBeDefined();
    await expect(sbx.files.write('g.txt', 'zipped', { gzip: true })).resolves.toBeDefined();
    const [multi, gz] = uploads();
    expect(multi).toMatchObject({ type: 'multipart/form-data', path: 'm.txt' });
    expect(gz).toMatchObject({ type: 'application/octet-stream', path: 'g.txt', encoding: 'gzip' });
    expect(gunzipSync(only('POST', '/files')[1]!.raw).toString()).toBe('zipped');
  });

  test('an envd older than 0.5.7 gets multipart, uncompressed, even when asked for raw or gzip', async () => {
    await expect(old.files.write('s.txt', chunks('S'))).resolves.toBeDefined();
    await expect(old.files.write('r.txt', 'r', { useOctetStream: true, gzip: true })).resolves.toBeDefined();
    const sent = uploads();
    expect(sent.map((u) => [u.type, u.path, u.encoding])).toEqual([
      ['multipart/form-data', 's.txt', undefined],
      ['multipart/form-data', 'r.txt', undefined],
    ]);
    expect(sent[0]?.body).toContain('\r\n\r\nS\r\n');
    expect(sent[1]?.body).toContain('\r\n\r\nr\r\n');
  });
});

describe('list', () => {
  test('by hand: hasNext, nextItems, and a saved cursor', async () => {
    api.answer((req, res) =>
      req.url.searchParams.get('nextToken') === 'later' ? reply(res, 200, [detail('s9')]) : reply(res, 200, [detail('s8')], { 'x-next-token': 'later' }),
    );
    const paginator = Sandbox.list(opts());
    expect(paginator.hasNext).toBe(true);
    expect((await paginator.nextItems()).map((s) => s.sandboxId)).toEqual(['s8']);
    expect(paginator.nextToken).toBe('later');
    const resumed = Sandbox.list({ ...opts(), nextToken: paginator.nextToken });
    expect((await resumed.nextItems()).map((s) => s.sandboxId)).toEqual(['s9']);
    expect(resumed.hasNext).toBe(false);
  });
});
