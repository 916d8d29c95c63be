// What an operator sees of a running server: its log (JSON lines with the
// request id of each request, through to the sandbox events it caused), its
// Prometheus metrics moving as sandboxes are made and used, and its health,
// turning unready when the store cannot be written.
import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { auditLog } from '../../../tools/testing/log-audit.mjs';
import { ADMIN_KEY, API_KEY, run, sleep, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  // Sampling is slowed: while the readiness test holds the store, each write of a sample waits for it.
  t = await testServer({ warmPoolSize: 1, metricsIntervalMs: 60_000 });
});
afterAll(() => t.teardown());

const logLines = () => auditLog(t.server.config.logFile!);

/** `check`'s value once it stops throwing; its last failure after 15 s. */
async function settled<T>(check: () => T | Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await check();
    } catch (err) {
      if (i >= 150) throw err;
      await sleep(100);
    }
  }
}

async function call(method: string, path: string, headers: Record<string, string> = {}, body?: unknown) {
  const res = await fetch(`${t.server.apiUrl}${path}`, {
    method,
    headers: { 'x-api-key': API_KEY, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, requestId: res.headers.get('x-request-id'), text: await res.text() };
}

/**
 * The samples of a scrape, read by the Prometheus project's own Python
 * client parser (Debian's python3-prometheus-client): histograms as their
 * `_bucket`, `_count` and `_sum` samples, each with its labels.
 */
type Samples = Array<{ name: string; labels: Record<string, string>; value: number }>;
const PARSE = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
print(json.dumps([{"name": s.name, "labels": s.labels, "value": s.value} for f in text_string_to_metric_families(sys.stdin.read()) for s in f.samples]))
`;

async function scrape(headers: Record<string, string> = { 'x-api-key': ADMIN_KEY }): Promise<Samples> {
  const res = await fetch(`${t.server.apiUrl}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', PARSE], { input: await res.text(), encoding: 'utf8' })) as Samples;
}

/** The sum of the samples named `name` whose labels include `labels`; 0 when there are none. */
function value(m: Samples, name: string, labels: Record<string, string> = {}): number {
  return m.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)).reduce((sum, s) => sum + s.value, 0);
}

test('each request gets an id, answered in X-Request-Id and on its log line and on the sandbox events it caused', async () => {
  const created = await call('POST', '/sandboxes', { 'x-request-id': 'create-42' }, { templateID: 'base' });
  expect(created).toMatchObject({ status: 201, requestId: 'create-42' });
  const id = JSON.parse(created.text).sandboxID as string;
  const killed = await call('DELETE', `/sandboxes/${id}`, { 'x-request-id': 'not a token; made anew' });
  expect(killed.status).toBe(204);
  expect(killed.requestId).toMatch(/^[0-9a-f-]{36}$/);
  const missing = await call('GET', '/sandboxes/nope0000000000000000');
  expect(missing.status).toBe(404);

  await settled(() => {
    const lines = logLines();
    const of = (reqId: string | null) => lines.filter((l) => l.reqId === reqId);
    expect(of('create-42')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ level: 30, msg: 'sandbox created', sandboxID: id, event: 'created', templateID: 'base' }),
        expect.objectContaining({ level: 30, msg: 'request', method: 'POST', path: '/sandboxes', status: 201, keyID: expect.any(String), ms: expect.any(Number) }),
        // The runtime's own line, carried through to the request that caused it.
        expect.objectContaining({ level: 30, component: 'runtime', msg: expect.stringMatching(/^sandbox (booted|taken from the warm pool)$/), sandboxID: id, ms: expect.any(Number) }),
      ]),
    );
    expect(of(killed.requestId)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ component: 'runtime', msg: 'sandbox removed', sandboxID: id }),
        expect.objectContaining({ msg: 'sandbox killed', sandboxID: id, event: 'killed' }),
        expect.objectContaining({ msg: 'request', method: 'DELETE', path: `/sandboxes/${id}`, status: 204 }),
      ]),
    );
    expect(of(missing.requestId)).toEqual([expect.objectContaining({ msg: 'request', status: 404 })]);
    for (const l of lines) expect(typeof l.time).toBe('string');
  });
});

test('a signed URL in a request leaves no signature in the log', async () => {
  const res = await fetch(`${t.server.apiUrl}/templates/base/files/${'a'.repeat(64)}/upload?expires=1&signature=s3cr3tsignature`, { method: 'PUT', body: 'x' });
  expect(res.status).toBeGreaterThanOrEqual(400);
  await settled(() => {
    const lines = logLines();
    expect(lines.some((l) => typeof l.path === 'string' && l.path.endsWith('/upload'))).toBe(true);
    expect(JSON.stringify(lines)).not.toContain('s3cr3tsignature');
  });
});

test("the metrics endpoint takes the admin credential, as a header or a bearer token, not a team's key; its values move as sandboxes are made and used", async () => {
  expect((await fetch(`${t.server.apiUrl}/metrics`)).status).toBe(401);
  expect((await fetch(`${t.server.apiUrl}/metrics`, { headers: { authorization: 'Bearer paddock_admin_0000000000000000000000000000000000000bad' } })).status).toBe(401);
  // The metrics name every team's templates and count their sandboxes: a team's key may not read them.
  for (const headers of [{ 'x-api-key': API_KEY }, { authorization: `Bearer ${API_KEY}` }] as Array<Record<string, string>>) {
    const res = await fetch(`${t.server.apiUrl}/metrics`, { headers });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ code: 403, message: 'GET /metrics takes the admin credential only, not an API key of a team' });
  }
  const before = await scrape({ authorization: `Bearer ${ADMIN_KEY}` });

  const created = JSON.parse((await call('POST', '/sandboxes', {}, { templateID: 'base' })).text) as { sandboxID: string; envdAccessToken: string };
  expect((await run(t.server, created.sandboxID, created.envdAccessToken, 'echo hi')).stdout).toBe('hi\n');
  const refused = await fetch(t.server.proxyUrl, { headers: { 'e2b-sandbox-id': 'missing0000000000000', 'e2b-sandbox-port': '49983' } });
  expect(refused.status).toBe(502);

  const after = await settled(async () => {
    const m = await scrape();
    expect(value(m, 'paddock_sandbox_creates_total', { result: 'ok' })).toBe(value(before, 'paddock_sandbox_creates_total', { result: 'ok' }) + 1);
    return m;
  });
  expect(value(after, 'paddock_sandbox_create_seconds_count')).toBe(value(after, 'paddock_sandbox_creates_total', { result: 'ok' }));
  expect(value(after, 'paddock_sandboxes', { state: 'running', template: 'base' })).toBe(1);
  expect(value(after, 'paddock_proxy_requests_total', { target: 'envd' })).toBeGreaterThan(value(before, 'paddock_proxy_requests_total', { target: 'envd' }));
  expect(value(after, 'paddock_proxy_errors_total', { status: '502', target: 'none' })).toBe(value(before, 'paddock_proxy_errors_total', { status: '502', target: 'none' }) + 1);
  expect(value(after, 'paddock_sandbox_events_total', { event: 'created' })).toBeGreaterThan(value(before, 'paddock_sandbox_events_total', { event: 'created' }));
  expect(value(after, 'paddock_store_seconds_count', { call: 'sandboxes.insert' })).toBeGreaterThan(0);
  expect(value(after, 'paddock_process_resident_memory_bytes')).toBeGreaterThan(0);

  await call('DELETE', `/sandboxes/${created.sandboxID}`);
  const gone = await scrape();
  expect(value(gone, 'paddock_sandboxes', { state: 'running', template: 'base' })).toBe(0);
  expect(value(gone, 'paddock_sandbox_events_total', { event: 'killed' })).toBe(value(after, 'paddock_sandbox_events_total', { event: 'killed' }) + 1);
  // The pool (of one) fills again after the create took its sandbox; the layers' size is measured in the background.
  await settled(async () => {
    const m = await scrape();
    expect(value(m, 'paddock_warm_pool_size')).toBe(1);
    expect(value(m, 'paddock_disk_used_bytes', { kind: 'layers' })).toBeGreaterThan(0);
    expect(value(m, 'paddock_disk_used_bytes', { kind: 'sandboxes' })).toBeGreaterThan(0);
  });
});

test('readiness reports each part, and turns unready while another process holds the store', async () => {
  const live = await fetch(`${t.server.apiUrl}/health/live`);
  expect(live.status).toBe(200);
  expect(await live.json()).toEqual({ status: 'ok', checks: {} });

  const ready = await fetch(`${t.server.apiUrl}/health/ready`);
  const report = (await ready.json()) as { status: string; checks: Record<string, { ok: boolean; detail: string }> };
  expect(ready.status).toBe(200);
  expect(report.status).toBe('ok');
  expect(Object.keys(report.checks).sort()).toEqual(['disk', 'network', 'runtime', 'store']);
  expect(report.checks.network!.detail).toMatch(/-svc/);

  // Another process (here, another connection) holds the store's write lock.
  const other = new Database(join(t.home, 'paddock.db'));
  other.prepare('BEGIN EXCLUSIVE').run();
  try {
    const unready = await fetch(`${t.server.apiUrl}/health/ready`);
    expect(unready.status).toBe(503);
    const body = (await unready.json()) as typeof report;
    expect(body.status).toBe('unavailable');
    expect(body.checks.store).toEqual({ ok: false, detail: expect.stringMatching(/cannot be written: database is locked/) });
    expect(body.checks.disk!.ok).toBe(true);
  } finally {
    other.prepare('ROLLBACK').run();
    other.close();
  }
  expect((await fetch(`${t.server.apiUrl}/health/ready`)).status).toBe(200);
});

test('a process killed inside a sandbox for want of memory is an event of the sandbox, in its logs, the log and the metrics, reported once across a restart', async () => {
  let o = await testServer();
  try {
    const s = await o.control.createSandbox({ templateID: 'base' });
    // tail keeps a line's worth of bytes; a stream of zeros with no newline is one line as long as the memory it can get.
    const r = await run(o.server, s.sandboxID, s.envdAccessToken!, 'head -c 4000M /dev/zero | tail > /dev/null; echo "tail: $?"');
    expect(r.stdout).toBe('tail: 137\n');
    await settled(() =>
      expect(auditLog(o.server.config.logFile!)).toEqual(
        expect.arrayContaining([expect.objectContaining({ level: 40, event: 'oom_kill', sandboxID: s.sandboxID, msg: expect.stringMatching(/^the kernel killed 1 process in the sandbox for want of memory \(its limit is \d+ MiB\)$/) })]),
      ),
    );
    const logs = (await (await fetch(`${o.server.apiUrl}/v2/sandboxes/${s.sandboxID}/logs`, { headers: { 'x-api-key': API_KEY } })).json()) as { logs: Array<{ message: string }> };
    expect(logs.logs.map((l) => l.message)).toEqual(expect.arrayContaining([expect.stringMatching(/^the kernel killed 1 process/)]));
    expect(await o.server.metrics.text()).toMatch(/^paddock_sandbox_events_total\{event="oom_kill"\} 1$/m);

    // A server started again on the same data directory does not report that kill once more; a new one it does.
    await o.server.close();
    const again = await testServer({ home: o.home });
    o = again;
    // Once the new server has sampled the sandbox (a sample in a later second than the restart), it has seen the count.
    const restartedAt = Math.ceil(Date.now() / 1000);
    const sampled = async () => {
      const res = await fetch(`${again.server.apiUrl}/sandboxes/${s.sandboxID}/metrics?start=${restartedAt + 1}`, { headers: { 'x-api-key': API_KEY } });
      return ((await res.json()) as unknown[]).length;
    };
    await settled(async () => expect(await sampled()).toBeGreaterThan(0));
    expect(await again.server.metrics.text()).not.toMatch(/^paddock_sandbox_events_total\{event="oom_kill"\}/m);
    const r2 = await run(again.server, s.sandboxID, s.envdAccessToken!, 'head -c 4000M /dev/zero | tail > /dev/null; echo "tail: $?"');
    expect(r2.stdout).toBe('tail: 137\n');
    await settled(async () => expect(await again.server.metrics.text()).toMatch(/^paddock_sandbox_events_total\{event="oom_kill"\} 1$/m));
    const logs2 = (await (await fetch(`${again.server.apiUrl}/v2/sandboxes/${s.sandboxID}/logs`, { headers: { 'x-api-key': API_KEY } })).json()) as { logs: Array<{ message: string; fields: Record<string, string> }> };
    expect(logs2.logs.filter((l) => l.fields.event === 'oom_kill').map((l) => [l.message.replace(/ \(its limit.*/, ''), l.fields.oomKills])).toEqual([
      ['the kernel killed 1 process in the sandbox for want of memory', '1'],
      ['the kernel killed 1 process in the sandbox for want of memory', '2'],
    ]);
  } finally {
    await o.teardown();
  }
});
