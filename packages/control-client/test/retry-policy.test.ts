import { ControlApiError, ControlClient, defaultRetryPolicy } from '../src/index.js';
import { backoffDelay, isConnectionFailure, sendWithRetries, type RetryClock, type SendOptions } from '../src/retry.js';
import { json, startServer, type LocalServer } from './local-server.js';

const sandbox = { templateID: 'base', sandboxID: 'sbx1', clientID: 'c', envdVersion: '0.6.4' };
const detail = {
  ...sandbox,
  startedAt: '2024-01-01T00:00:00Z',
  endAt: '2024-01-01T00:05:00Z',
  cpuCount: 2,
  memoryMB: 512,
  diskSizeMB: 0,
  state: 'running',
};
const fast = { initialDelayMs: 5, maxDelayMs: 20 };

let server: LocalServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function captureError(promise: Promise<unknown>): Promise<ControlApiError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ControlApiError) return err;
    throw err;
  }
  throw new Error('expected the call to fail');
}

describe('retries of idempotent calls', () => {
  test('429 with an integer Retry-After is retried after that many seconds', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) json(res, 429, { code: 429, message: 'slow down' }, { 'retry-after': '1' });
      else json(res, 200, detail);
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const started = Date.now();
    await expect(client.getSandbox('sbx1')).resolves.toEqual(detail);
    const elapsed = Date.now() - started;
    expect(server.requests).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(950);
  });

  test('502 then 503 then success takes three requests', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) json(res, 502, { code: 502, message: 'bad gateway' });
      else if (i === 1) json(res, 503, { code: 503, message: 'busy' });
      else json(res, 200, detail);
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await expect(client.getSandbox('sbx1')).resolves.toEqual(detail);
    expect(server.requests.map((r) => r.url.pathname)).toEqual(Array(3).fill('/sandboxes/sbx1'));
  });

  test('a connection closed before the answer is retried ("other side closed")', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) res.socket?.destroy();
      else json(res, 200, detail);
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await expect(client.getSandbox('sbx1')).resolves.toEqual(detail);
    expect(server.requests).toHaveLength(2);
  });

  test('a TCP reset (ECONNRESET) of a DELETE is retried', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) res.socket?.resetAndDestroy();
      else res.writeHead(204).end();
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await expect(client.killSandbox('sbx1')).resolves.toBeUndefined();
    expect(server.requests.map((r) => r.method)).toEqual(['DELETE', 'DELETE']);
  });

  test('a refused connection is retried until the retries run out, then reported as a network error', async () => {
    server = await startServer(() => undefined);
    const url = server.url;
    await server.close();
    server = undefined;
    // Nothing answers, so count the attempts where they leave the client: at the real fetch.
    let attempts = 0;
    const client = new ControlClient({
      apiUrl: url,
      retries: { ...fast, maxRetries: 2 },
      fetch: (input, init) => {
        attempts += 1;
        return fetch(input, init);
      },
    });
    const err = await captureError(client.getSandbox('sbx1'));
    expect(attempts).toBe(3);
    expect(err.kind).toBe('network');
    expect(err.message).toMatch(/GET \/sandboxes\/sbx1 failed: .*ECONNREFUSED/);
    expect(isConnectionFailure(err.cause)).toBe(true);
  });

  test('a JSON body of a retried PUT is sent again intact', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) json(res, 503, { code: 503, message: 'busy' });
      else res.writeHead(204).end();
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await client.updateNetwork('sbx1', { allowOut: ['example.com'], allow_internet_access: false });
    expect(server.requests).toHaveLength(2);
    for (const r of server.requests) {
      expect(r.method).toBe('PUT');
      expect(JSON.parse(r.body)).toEqual({ allowOut: ['example.com'], allow_internet_access: false });
    }
  });

  test('gives up after maxRetries and throws the last answer', async () => {
    server = await startServer((_req, res) => json(res, 503, { code: 503, message: 'no capacity' }));
    const client = new ControlClient({ apiUrl: server.url, retries: { ...fast, maxRetries: 2 } });
    const err = await captureError(client.getSandbox('sbx1'));
    expect(server.requests).toHaveLength(3);
    expect(err.kind).toBe('unavailable');
    expect(err.status).toBe(503);
    expect(err.serverMessage).toBe('no capacity');
  });

  test('does not retry statuses outside the policy', async () => {
    server = await startServer((_req, res) => json(res, 500, { code: 500, message: 'boom' }));
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const err = await captureError(client.getSandbox('sbx1'));
    expect(server.requests).toHaveLength(1);
    expect(err.kind).toBe('server');
  });
});

describe('calls that are not retried', () => {
  test('a POST is not retried on 503', async () => {
    server = await startServer((_req, res) => json(res, 503, { code: 503, message: 'busy' }));
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const err = await captureError(client.createSandbox({ templateID: 'base' }));
    expect(server.requests).toHaveLength(1);
    expect(err.status).toBe(503);
  });

  test('a POST is not retried after a connection reset', async () => {
    server = await startServer((_req, res) => res.socket?.destroy());
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const err = await captureError(client.pauseSandbox('sbx1'));
    expect(server.requests).toHaveLength(1);
    expect(err.kind).toBe('network');
  });

  test('creating an API key is not retried: a repeat would make a second key', async () => {
    server = await startServer((_req, res) => json(res, 503, { code: 503, message: 'busy' }));
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const err = await captureError(client.createApiKey({ name: 'ci' }));
    expect(server.requests).toHaveLength(1);
    expect(err.status).toBe(503);
  });

  test('a PATCH that renames an API key is retried with its body', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) json(res, 503, { code: 503, message: 'busy' });
      else res.writeHead(200).end();
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await client.renameApiKey('k1', { name: 'ci' });
    expect(server.requests.map((r) => [r.method, r.url.pathname, r.body])).toEqual([
      ['PATCH', '/api-keys/k1', '{"name":"ci"}'],
      ['PATCH', '/api-keys/k1', '{"name":"ci"}'],
    ]);
  });

  test('a POST marked idempotent (setTimeout) is retried with its body', async () => {
    server = await startServer((_req, res, i) => {
      if (i === 0) json(res, 502, { code: 502, message: 'proxy' });
      else res.writeHead(204).end();
    });
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await client.setTimeout('sbx1', { timeout: 30 });
    expect(server.requests.map((r) => [r.method, r.body])).toEqual([
      ['POST', '{"timeout":30}'],
      ['POST', '{"timeout":30}'],
    ]);
  });

  test('a streaming body sent through the raw client is not retried', async () => {
    server = await startServer((_req, res) => json(res, 503, { code: 503, message: 'busy' }));
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"allowOut":[]}'));
        controller.close();
      },
    });
    const { response } = await client.api.PUT('/sandboxes/{sandboxID}/network', {
      params: { path: { sandboxID: 'sbx1' } },
      body: {},
      bodySerializer: () => stream,
      duplex: 'half',
    });
    expect(response.status).toBe(503);
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.body).toBe('{"allowOut":[]}');
  });

  test('health() reports 503 at once as false, without retrying', async () => {
    server = await startServer((_req, res) => json(res, 503, { code: 503, message: 'starting' }));
    const client = new ControlClient({ apiUrl: server.url, retries: fast });
    await expect(client.health()).resolves.toBe(false);
    expect(server.requests).toHaveLength(1);
  });
});

describe('deadline and cancellation', () => {
  test('a Retry-After beyond the deadline returns the answer at once instead of waiting', async () => {
    server = await startServer((_req, res) => json(res, 429, { code: 429, message: 'later' }, { 'retry-after': '30' }));
    const client = new ControlClient({ apiUrl: server.url, requestTimeoutMs: 2_000, retries: fast });
    const err = await captureError(client.getSandbox('sbx1'));
    // Had it waited, the 2 s deadline would have ended the call as a timeout instead.
    expect(server.requests).toHaveLength(1);
    expect(err.kind).toBe('rate_limited');
    expect(err.retryAfterSeconds).toBe(30);
  });

  test("the caller's AbortSignal cancels a call waiting out a backoff", async () => {
    server = await startServer((_req, res) => json(res, 429, { code: 429, message: 'later' }, { 'retry-after': '20' }));
    const client = new ControlClient({ apiUrl: server.url, requestTimeoutMs: 0, retries: fast });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const err = await captureError(client.getSandbox('sbx1', { signal: controller.signal }));
    // Without the abort the call would sleep 20 s and outlast the test's timeout.
    expect(err.kind).toBe('aborted');
    expect(server.requests).toHaveLength(1);
  });

  test("the client-wide signal cancels a call whose answer never comes", async () => {
    server = await startServer(() => undefined);
    const controller = new AbortController();
    const client = new ControlClient({ apiUrl: server.url, signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const err = await captureError(client.listTemplates());
    expect(err.kind).toBe('aborted');
  });
});

describe('backoff', () => {
  test('doubles per retry, is capped, and jitters within the upper half', () => {
    const policy = { ...defaultRetryPolicy, initialDelayMs: 100, maxDelayMs: 1_000 };
    expect(backoffDelay(0, policy, () => 0)).toBe(50);
    expect(backoffDelay(0, policy, () => 1)).toBe(100);
    expect(backoffDelay(2, policy, () => 0)).toBe(200);
    expect(backoffDelay(2, policy, () => 1)).toBe(400);
    expect(backoffDelay(10, policy, () => 0.5)).toBe(750);
  });
});

/**
 * The deadline rules, on a clock that only moves when sendWithRetries sleeps:
 * no wall-clock margins, so the outcome is the same on a busy machine.
 */
describe('deadline on a virtual clock', () => {
  interface Run {
    /** Virtual time at which each attempt was sent. */
    sentAt: number[];
    slept: number[];
    options: SendOptions;
  }

  function virtualRun(answer: (attempt: number) => Response | Error, overrides: Partial<SendOptions>): Run {
    let now = 0;
    const run: Run = { sentAt: [], slept: [], options: undefined as unknown as SendOptions };
    const clock: RetryClock = {
      now: () => now,
      sleep: async (ms) => {
        run.slept.push(ms);
        now += ms;
      },
      random: () => 1,
    };
    run.options = {
      fetch: async () => {
        run.sentAt.push(now);
        const a = answer(run.sentAt.length - 1);
        if (a instanceof Error) throw a;
        return a;
      },
      policy: { ...defaultRetryPolicy, maxRetries: 10, initialDelayMs: 400, maxDelayMs: 400 },
      idempotent: false,
      timeoutMs: 1_000,
      signal: undefined,
      clock,
      ...overrides,
    };
    return run;
  }

  const busy = (): Response => new Response('{"code":503,"message":"busy"}', { status: 503 });

  test('retries while the backoff ends before the deadline, then returns the last answer', async () => {
    const run = virtualRun(busy, {});
    const response = await sendWithRetries(new Request('http://control.test/sandboxes/x'), run.options);
    expect(response.status).toBe(503);
    // 0 → 400 → 800; a third backoff would end at 1200, past the 1000 ms deadline.
    expect(run.sentAt).toEqual([0, 400, 800]);
    expect(run.slept).toEqual([400, 400]);
  });

  test('a backoff that would end exactly at the deadline is not taken', async () => {
    const run = virtualRun(busy, { policy: { ...defaultRetryPolicy, maxRetries: 10, initialDelayMs: 500, maxDelayMs: 500 } });
    const response = await sendWithRetries(new Request('http://control.test/sandboxes/x'), run.options);
    expect(response.status).toBe(503);
    expect(run.sentAt).toEqual([0, 500]);
  });

  test('a Retry-After past the deadline returns the answer without sleeping', async () => {
    const run = virtualRun(() => new Response(null, { status: 429, headers: { 'retry-after': '2' } }), {});
    const response = await sendWithRetries(new Request('http://control.test/sandboxes/x'), run.options);
    expect(response.status).toBe(429);
    expect(run.slept).toEqual([]);
  });

  test('a connection failure is thrown as is once the next backoff would pass the deadline', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const run = virtualRun(() => new TypeError('fetch failed', { cause: refused }), {});
    const err = await sendWithRetries(new Request('http://control.test/sandboxes/x'), run.options).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect((err as TypeError).cause).toBe(refused);
    expect(run.sentAt).toEqual([0, 400, 800]);
  });

  test('without a deadline only maxRetries stops the retries', async () => {
    const run = virtualRun(busy, { timeoutMs: 0, policy: { ...defaultRetryPolicy, maxRetries: 4, initialDelayMs: 400, maxDelayMs: 400 } });
    const response = await sendWithRetries(new Request('http://control.test/sandboxes/x'), run.options);
    expect(response.status).toBe(503);
    expect(run.sentAt).toEqual([0, 400, 800, 1200, 1600]);
  });
});
