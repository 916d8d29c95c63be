// The sandbox lifecycle through the control API and the proxy, on real
// sandboxes: create, run, pause, connect, timeouts, expiry, listing, metrics.
import { ControlApiError } from '@paddock/control-client';
import { Signal } from '@paddock/models';
import { API_KEY, envd, eventually, run, sleep, testServer, type TestServer } from './harness.js';

let t: TestServer;
beforeAll(async () => {
  t = await testServer();
});
afterAll(() => t.teardown());

/** A raw call of the control API, for the legacy routes the client does not use. */
const api = (path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(t.server.apiUrl + path, {
    method: init.method ?? 'GET',
    headers: { 'X-API-Key': API_KEY, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });

const proxyHealth = (id: string) => fetch(`${t.server.proxyUrl}/health`, { headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983' } });

test('create → command through the proxy → pause → connect resumes with files and processes → timeout → expiry kills it', async () => {
  const s = await t.control.createSandbox({ templateID: 'base', metadata: { suite: 'lifecycle' }, envVars: { GREETING: 'hi' } });
  expect(s).toMatchObject({ templateID: 'base', envdVersion: '0.7.0', domain: `localhost:${t.server.config.proxyPort}` });
  expect(s.envdAccessToken).toEqual(expect.any(String));
  const token = s.envdAccessToken!;

  const first = await run(t.server, s.sandboxID, token, 'echo "$GREETING" > ~/note; (sleep 1000 &) ; echo started');
  expect(first).toEqual({ stdout: 'started\n', exitCode: 0 });
  expect((await proxyHealth(s.sandboxID)).status).toBe(204);

  await t.control.pauseSandbox(s.sandboxID);
  expect((await t.control.getSandbox(s.sandboxID)).state).toBe('paused');
  const paused = await proxyHealth(s.sandboxID);
  expect(paused.status).toBe(502);
  expect(await paused.json()).toEqual({ code: 502, message: `sandbox '${s.sandboxID}' is paused` });
  await expect(t.control.pauseSandbox(s.sandboxID)).rejects.toMatchObject({ status: 409, kind: 'conflict' });

  const resumed = await t.control.connectSandbox(s.sandboxID, { timeout: 60 });
  expect(resumed.resumed).toBe(true);
  expect(resumed.sandbox.envdAccessToken).toBe(token);
  const after = await run(t.server, s.sandboxID, token, 'cat ~/note; pgrep -x sleep | wc -l');
  expect(after).toEqual({ stdout: 'hi\n1\n', exitCode: 0 });
  expect((await t.control.connectSandbox(s.sandboxID, { timeout: 60 })).resumed).toBe(false);

  await t.control.setTimeout(s.sandboxID, { timeout: 1 });
  await eventually(async () => (await proxyHealth(s.sandboxID)).status === 502, 'the sandbox to expire');
  await expect(t.control.getSandbox(s.sandboxID)).rejects.toMatchObject({ status: 404, code: 404 });
  expect(await t.server.runtime.get(s.sandboxID)).toBeUndefined();
});

test('connect and refresh only ever extend the expiry; POST /timeout sets it either way', async () => {
  const s = await t.control.createSandbox({ templateID: 'base', timeout: 600 });
  const endAt = async () => Date.parse((await t.control.getSandbox(s.sandboxID)).endAt);
  const initial = await endAt();
  await t.control.connectSandbox(s.sandboxID, { timeout: 10 });
  expect(await endAt()).toBe(initial);
  await t.control.refresh(s.sandboxID, { duration: 10 });
  expect(await endAt()).toBe(initial);
  // A refresh past the current end moves the end to now + duration.
  const before = Date.now();
  await t.control.refresh(s.sandboxID, { duration: 900 });
  const after = Date.now();
  const refreshed = await endAt();
  expect(refreshed).toBeGreaterThanOrEqual(before + 900_000);
  expect(refreshed).toBeLessThanOrEqual(after + 900_000);
  await t.control.connectSandbox(s.sandboxID, { timeout: 1200 });
  expect(await endAt()).toBeGreaterThan(refreshed);
  await t.control.setTimeout(s.sandboxID, { timeout: 30 });
  expect(await endAt()).toBeLessThan(initial);
  await t.control.killSandbox(s.sandboxID);
});

test('autoPause pauses at expiry instead of killing; connect brings it back', async () => {
  const s = await t.control.createSandbox({ templateID: 'base', timeout: 1, autoPause: true });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo kept > ~/f');
  await eventually(async () => (await t.control.getSandbox(s.sandboxID)).state === 'paused', 'autoPause at expiry');
  const back = await t.control.connectSandbox(s.sandboxID, { timeout: 60 });
  expect(back.resumed).toBe(true);
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat ~/f')).stdout).toBe('kept\n');
  await t.control.killSandbox(s.sandboxID);
});

test('pause without memory keeps files but not processes; resume starts it again', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo fs-only > ~/f; (sleep 1000 &)');
  await t.control.pauseSandbox(s.sandboxID, { memory: false });
  expect((await t.server.runtime.get(s.sandboxID))?.status).toBe('stopped');
  const resumed = await t.control.resumeSandbox(s.sandboxID, { timeout: 60 });
  expect(resumed.sandboxID).toBe(s.sandboxID);
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat ~/f; pgrep -x sleep | wc -l')).stdout).toBe('fs-only\n0\n');
  await expect(t.control.resumeSandbox(s.sandboxID, { timeout: 60 })).rejects.toMatchObject({ status: 409 });
  await t.control.killSandbox(s.sandboxID);
});

test("a sandbox whose init its root killed is recorded paused within seconds; connect starts it again with its files", async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo survived > ~/f');
  // As the sandbox's root: envd, the container's init, ends on SIGTERM.
  const root = envd(t.server, s.sandboxID, s.envdAccessToken, 'root');
  await root.proc.start({ process: { cmd: '/bin/kill', args: ['-TERM', '1'] } })[Symbol.asyncIterator]().next().catch(() => undefined);
  await eventually(async () => (await t.control.getSandbox(s.sandboxID)).state === 'paused', 'the sandbox to be recorded paused', 10_000);
  expect((await proxyHealth(s.sandboxID)).status).toBe(502);
  const resumed = await api(`/sandboxes/${s.sandboxID}/connect`, { method: 'POST', body: { timeout: 60 } });
  expect(resumed.status).toBe(201);
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat ~/f')).stdout).toBe('survived\n');
  await t.control.pauseSandbox(s.sandboxID);
  await t.control.resumeSandbox(s.sandboxID, { timeout: 60 });
  await t.control.killSandbox(s.sandboxID);
});

test('kill answers 204, then 404 with a body; a killed sandbox answers 502 through the proxy', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await t.control.killSandbox(s.sandboxID);
  const again = await t.control.killSandbox(s.sandboxID).catch((e: unknown) => e);
  expect(again).toBeInstanceOf(ControlApiError);
  expect(again).toMatchObject({ status: 404, code: 404, serverMessage: `sandbox '${s.sandboxID}' not found` });
  expect((await proxyHealth(s.sandboxID)).status).toBe(502);
});

test('listing filters by metadata, state and template, orders, and pages with X-Next-Token', async () => {
  const tag = `run-${Date.now()}`;
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    made.push((await t.control.createSandbox({ templateID: 'base', metadata: { tag, 'odd key&=': i % 2 ? 'odd value?&' : 'even', n: String(i) } })).sandboxID);
  }
  await t.control.pauseSandbox(made[0]!);
  const all: string[] = [];
  let pages = 0;
  for await (const page of t.control.paginateSandboxes({ metadata: { tag }, limit: 2 }).pages()) {
    pages++;
    all.push(...page.items.map((s) => s.sandboxID));
  }
  expect(pages).toBe(3);
  expect(all).toEqual([...made].reverse());
  const asc = (await t.control.listSandboxes({ metadata: { tag }, order: 'asc', limit: 100 })).items.map((s) => s.sandboxID);
  expect(asc).toEqual(made);
  const odd = (await t.control.listSandboxes({ metadata: { tag, 'odd key&=': 'odd value?&' } })).items.map((s) => s.sandboxID);
  expect(odd.sort()).toEqual([made[1], made[3]].sort());
  const paused = (await t.control.listSandboxes({ metadata: { tag }, state: ['paused'] })).items;
  expect(paused.map((s) => [s.sandboxID, s.state])).toEqual([[made[0], 'paused']]);
  const running = (await t.control.listSandboxes({ metadata: { tag }, state: ['running', 'paused'], template: 'base' })).items;
  expect(running).toHaveLength(5);
  expect((await t.control.listSandboxes({ metadata: { tag }, template: 'no-such-template' })).items).toEqual([]);
  // startedAfter keeps the sandboxes started at or after the given time.
  const third = (await t.control.getSandbox(made[2]!)).startedAt;
  expect((await t.control.listSandboxes({ metadata: { tag }, startedAfter: third })).items.map((s) => s.sandboxID)).toEqual([made[4], made[3], made[2]]);
  const justAfterThird = new Date(Date.parse(third) + 1).toISOString();
  expect((await t.control.listSandboxes({ metadata: { tag }, startedAfter: justAfterThird })).items.map((s) => s.sandboxID)).toEqual([made[4], made[3]]);
  const firstStart = Date.parse((await t.control.getSandbox(made[0]!)).startedAt);
  // A millisecond before the first start, written with a +02:00 offset.
  const offset = new Date(firstStart - 1 + 2 * 3600_000).toISOString().replace('Z', '+02:00');
  expect((await t.control.listSandboxes({ metadata: { tag }, startedAfter: offset })).items).toHaveLength(5);
  expect((await t.control.listSandboxes({ metadata: { tag }, startedAfter: new Date(Date.now() + 3600_000) })).items).toEqual([]);
  const raw = await fetch(`${t.server.apiUrl}/v2/sandboxes?state=paused,running&limit=1`, { headers: { 'X-API-Key': API_KEY } });
  expect(raw.headers.get('x-next-token')).toEqual(expect.any(String));
  expect(Number(raw.headers.get('x-total-running'))).toBeGreaterThanOrEqual(4);
  for (const id of made) await t.control.killSandbox(id);
});

test('metrics: a sample is there within seconds, and ranges filter by unix seconds', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await eventually(async () => (await t.control.getSandboxMetrics(s.sandboxID, {})).length > 0, 'a first metric sample', 5000);
  await sleep(1200);
  const series = await t.control.getSandboxMetrics(s.sandboxID, {});
  expect(series.length).toBeGreaterThanOrEqual(2);
  const m = series[0]!;
  expect(m).toMatchObject({ cpuCount: 2, memTotal: 512 * 1024 * 1024 });
  expect(m.memUsed).toBeGreaterThan(0);
  expect(Date.parse(m.timestamp)).toBeGreaterThan(Date.now() - 60_000);
  expect(m.timestampUnix).toBe(Math.floor(Date.parse(m.timestamp) / 1000));
  expect(await t.control.getSandboxMetrics(s.sandboxID, { start: 0, end: 1000 })).toEqual([]);
  await expect(t.control.getSandboxMetrics(s.sandboxID, { start: 2000, end: 1000 })).rejects.toMatchObject({ status: 400 });
  await t.control.killSandbox(s.sandboxID);
});

test('network rules are validated, naming the bad entry, and stored', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await t.control.updateNetwork(s.sandboxID, { allowOut: ['10.0.0.0/8', '1.1.1.1', '*.example.com', 'pypi.org'], denyOut: ['0.0.0.0/0', '::1'] });
  expect((await t.control.getSandbox(s.sandboxID)).network).toEqual({ allowOut: ['10.0.0.0/8', '1.1.1.1', '*.example.com', 'pypi.org'], denyOut: ['0.0.0.0/0', '::1'] });
  const bad: Array<[object, string]> = [
    [{ allowOut: ['ok.com', 'not a host'] }, "allowOut[1] 'not a host' is not a CIDR block, an IP address or a domain name"],
    [{ allowOut: ['10.0.0.0/33'] }, "allowOut[0] '10.0.0.0/33' is not a CIDR block, an IP address or a domain name"],
    [{ denyOut: ['example.com'] }, "denyOut[0] 'example.com' is not a CIDR block or an IP address (domains are allowed only in allowOut)"],
    [{ allowOut: 'pypi.org' }, 'body/allowOut must be array'],
  ];
  for (const [body, message] of bad) {
    await expect(t.control.updateNetwork(s.sandboxID, body as never)).rejects.toMatchObject({ status: 400, serverMessage: message });
  }
  await expect(t.control.createSandbox({ templateID: 'base', network: { denyOut: ['10.0.0.0/8', '*.evil.com'] } })).rejects.toMatchObject({
    status: 400,
    serverMessage: "denyOut[1] '*.evil.com' is not a CIDR block or an IP address (domains are allowed only in allowOut)",
  });
  await expect(t.control.createSandbox({ templateID: 'base', network: { allowOut: ['pypi.org', 'bad host'] } })).rejects.toMatchObject({
    status: 400,
    serverMessage: "allowOut[1] 'bad host' is not a CIDR block, an IP address or a domain name",
  });
  await t.control.killSandbox(s.sandboxID);
});

test('logs record the lifecycle', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await t.control.pauseSandbox(s.sandboxID);
  await t.control.connectSandbox(s.sandboxID, { timeout: 30 });
  const { logs } = await t.control.getSandboxLogs(s.sandboxID, {});
  expect(logs.map((l) => l.message)).toEqual(['sandbox created', 'sandbox paused with its memory', 'sandbox resumed']);
  await t.control.killSandbox(s.sandboxID);
});

test('with autoResume, traffic through the proxy resumes a paused sandbox', async () => {
  const s = await t.control.createSandbox({ templateID: 'base', autoResume: { enabled: true } });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo awake > ~/f');
  await t.control.pauseSandbox(s.sandboxID);
  expect((await t.control.getSandbox(s.sandboxID)).state).toBe('paused');
  const res = await proxyHealth(s.sandboxID);
  expect(res.status).toBe(204);
  expect((await t.control.getSandbox(s.sandboxID)).state).toBe('running');
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat ~/f')).stdout).toBe('awake\n');
  await t.control.killSandbox(s.sandboxID);
});

test('v2 connect with memory: false starts a memory-paused sandbox afresh on its files', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  await run(t.server, s.sandboxID, s.envdAccessToken, 'echo kept > ~/f; (sleep 1000 &)');
  await t.control.pauseSandbox(s.sandboxID);
  const res = await t.control.connectSandbox(s.sandboxID, { timeout: 60, memory: false });
  expect(res.resumed).toBe(true);
  expect((await run(t.server, s.sandboxID, s.envdAccessToken, 'cat ~/f; pgrep -x sleep | wc -l')).stdout).toBe('kept\n0\n');
  await t.control.killSandbox(s.sandboxID);
});

test('v1 routes: create answers 201, the legacy list shows running sandboxes with metadata, connect resumes, logs and batch metrics', async () => {
  const tag = `v1-${Date.now()}`;
  const create = async (n: string) => {
    const res = await api('/sandboxes', { method: 'POST', body: { templateID: 'base', metadata: { tag, n } } });
    expect([res.status, res.headers.get('content-type')]).toEqual([201, expect.stringMatching(/^application\/json/)]);
    return (await res.json()) as { sandboxID: string; envdAccessToken: string };
  };
  const a = await create('a');
  const b = await create('b');
  expect(a).toEqual({
    templateID: 'base',
    alias: 'base',
    sandboxID: expect.stringMatching(/^[a-z0-9]+$/),
    clientID: a.sandboxID,
    envdVersion: '0.7.0',
    envdAccessToken: expect.any(String),
    trafficAccessToken: null,
    domain: t.server.config.domain,
  });
  expect((await run(t.server, a.sandboxID, a.envdAccessToken, 'echo v1')).stdout).toBe('v1\n');

  // The legacy list: running sandboxes only, filtered by metadata, newest first.
  const legacyList = async () => {
    const res = await api(`/sandboxes?metadata=${encodeURIComponent(`tag=${tag}`)}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Array<{ sandboxID: string; metadata: Record<string, string> }>;
  };
  const listed = await legacyList();
  expect(listed.map((s) => s.sandboxID)).toEqual([b.sandboxID, a.sandboxID]);
  expect(listed[1]).toEqual({
    templateID: 'base',
    alias: 'base',
    sandboxID: a.sandboxID,
    clientID: a.sandboxID,
    startedAt: expect.any(String),
    endAt: expect.any(String),
    cpuCount: 2,
    memoryMB: 512,
    diskSizeMB: expect.any(Number),
    metadata: { tag, n: 'a' },
    state: 'running',
    envdVersion: '0.7.0',
    volumeMounts: [],
  });
  const filtered = await api(`/sandboxes?metadata=${encodeURIComponent(`tag=${tag}&n=b`)}`);
  expect(((await filtered.json()) as Array<{ sandboxID: string }>).map((s) => s.sandboxID)).toEqual([b.sandboxID]);

  // v1 connect on a paused sandbox resumes it (201); on a running one, 200.
  await t.control.pauseSandbox(a.sandboxID);
  expect((await legacyList()).map((s) => s.sandboxID)).toEqual([b.sandboxID]);
  const resumed = await api(`/sandboxes/${a.sandboxID}/connect`, { method: 'POST', body: { timeout: 60 } });
  expect(resumed.status).toBe(201);
  expect(await resumed.json()).toMatchObject({ sandboxID: a.sandboxID, templateID: 'base', envdAccessToken: a.envdAccessToken });
  expect((await t.control.getSandbox(a.sandboxID)).state).toBe('running');
  expect((await proxyHealth(a.sandboxID)).status).toBe(204);
  const again = await api(`/sandboxes/${a.sandboxID}/connect`, { method: 'POST', body: { timeout: 60 } });
  expect(again.status).toBe(200);
  expect((await legacyList()).map((s) => s.sandboxID)).toEqual([b.sandboxID, a.sandboxID]);

  // v1 logs: plain lines and structured entries; `start` (ms) and `limit` narrow them.
  type V1Logs = { logs: Array<{ timestamp: string; line: string }>; logEntries: Array<{ timestamp: string; message: string; level: string }> };
  const logsRes = await api(`/sandboxes/${a.sandboxID}/logs`);
  expect(logsRes.status).toBe(200);
  const logs = (await logsRes.json()) as V1Logs;
  expect(logs.logs.map((l) => l.line)).toEqual(['sandbox created', 'sandbox paused with its memory', 'sandbox resumed']);
  expect(logs.logEntries.map((l) => [l.message, l.level])).toEqual([
    ['sandbox created', 'info'],
    ['sandbox paused with its memory', 'info'],
    ['sandbox resumed', 'info'],
  ]);
  expect(logs.logs.map((l) => l.timestamp)).toEqual(logs.logEntries.map((l) => l.timestamp));
  const pausedAt = Date.parse(logs.logs[1]!.timestamp);
  const fromPause = (await (await api(`/sandboxes/${a.sandboxID}/logs?start=${pausedAt}`)).json()) as V1Logs;
  expect(fromPause.logs.map((l) => l.line)).toEqual(['sandbox paused with its memory', 'sandbox resumed']);
  const one = (await (await api(`/sandboxes/${a.sandboxID}/logs?limit=1`)).json()) as V1Logs;
  expect(one.logs.map((l) => l.line)).toEqual(['sandbox created']);

  // Latest metrics of several sandboxes at once: the comma-separated form the
  // SDKs send, and the repeated-parameter form; unknown ids are left out.
  type Batch = { sandboxes: Record<string, { cpuCount: number; memTotal: number; timestampUnix: number }> };
  const batch = async (query: string) => {
    const res = await api(`/sandboxes/metrics?${query}`);
    expect(res.status).toBe(200);
    return (await res.json()) as Batch;
  };
  const comma = `sandbox_ids=${a.sandboxID},${b.sandboxID},nosuchsandbox`;
  await eventually(async () => Object.keys((await batch(comma)).sandboxes).length === 2, 'samples of both sandboxes', 5000);
  const both = await batch(comma);
  expect(Object.keys(both.sandboxes).sort()).toEqual([a.sandboxID, b.sandboxID].sort());
  for (const m of Object.values(both.sandboxes)) {
    expect(m).toMatchObject({ cpuCount: 2, memTotal: 512 * 1024 * 1024, timestampUnix: expect.any(Number) });
  }
  expect(Object.keys((await batch(`sandbox_ids=${a.sandboxID}&sandbox_ids=${b.sandboxID}`)).sandboxes).sort()).toEqual([a.sandboxID, b.sandboxID].sort());
  expect(Object.keys((await batch(`sandbox_ids=${b.sandboxID}`)).sandboxes)).toEqual([b.sandboxID]);

  for (const s of [a, b]) expect((await api(`/sandboxes/${s.sandboxID}`, { method: 'DELETE' })).status).toBe(204);
});

test('process output streams through the proxy as it is written, not when the process ends', async () => {
  const s = await t.control.createSandbox({ templateID: 'base' });
  const { proc } = envd(t.server, s.sandboxID, s.envdAccessToken);
  const events: string[] = [];
  let pid = 0;
  for await (const r of proc.start({ process: { cmd: '/bin/bash', args: ['-c', 'echo first; sleep 30; echo second'] }, stdin: false })) {
    const ev = r.event?.event;
    if (ev?.case === 'start') {
      pid = ev.value.pid;
      events.push('start');
    } else if (ev?.case === 'data' && ev.value.output.case === 'stdout') {
      const text = Buffer.from(ev.value.output.value).toString();
      events.push(`stdout ${text}`);
      if (text.includes('first')) {
        // The line is here while the command still sleeps: it is listed,
        // and it is this client that ends it, so no end event can be queued yet.
        expect((await proc.list({})).processes.map((p) => p.pid)).toContain(pid);
        await proc.sendSignal({ process: { selector: { case: 'pid', value: pid } }, signal: Signal.SIGKILL });
      }
    } else if (ev?.case === 'end') {
      events.push(`end ${ev.value.status}`);
    }
  }
  expect(events).toEqual(['start', 'stdout first\n', 'end signal: killed']);
  await t.control.killSandbox(s.sandboxID);
});
