// Sandbox lifecycle with the official e2b SDK: create, info, timeout, list,
// kill, isRunning, pause and connect, metrics, getHost.
import { request } from 'node:http';
import { Sandbox, Secret, Template, Volume } from 'e2b';
import { eventually, startForE2b, type CompatServer } from './harness.js';

let c: CompatServer;
beforeAll(async () => {
  c = await startForE2b();
});
afterAll(() => c.teardown());

test("Sandbox.create('base', {metadata, envs, timeoutMs}) and getInfo", async () => {
  const sbx = await Sandbox.create('base', { metadata: { owner: 'compat' }, envs: { FROM_CREATE: 'yes' }, timeoutMs: 120_000 });
  const info = await sbx.getInfo();
  expect(info).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base', metadata: { owner: 'compat' }, state: 'running', cpuCount: 2, memoryMB: 512 });
  const lifetime = info.endAt.getTime() - info.startedAt.getTime();
  expect(lifetime).toBeGreaterThan(110_000);
  expect(lifetime).toBeLessThanOrEqual(125_000);
  expect((await sbx.commands.run('echo $FROM_CREATE')).stdout).toBe('yes\n');
  expect(sbx.getHost(8080)).toBe(`8080-${sbx.sandboxId}.${c.server.config.domain}`);
  await sbx.kill();
});

// fetch() drops a Host header; http.request sends it as given.
function getViaHost(host: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${c.server.proxyUrl}${path}`, { agent: false, headers: { host, ...headers } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('getHost names a server in the sandbox for the proxy; allowPublicTraffic: false asks for the traffic token', async () => {
  const sbx = await Sandbox.create('base', { network: { allowPublicTraffic: false } });
  expect(sbx.trafficAccessToken).toEqual(expect.any(String));
  const app = await sbx.commands.run('cd /tmp && echo app > index.html && exec python3 -m http.server 8080 --bind 127.0.0.1', { background: true });
  const host = sbx.getHost(8080);
  const token = { 'e2b-traffic-access-token': sbx.trafficAccessToken! };
  await eventually(async () => (await getViaHost(host, '/index.html', token)).status === 200, 'the app in the sandbox');
  expect(await getViaHost(host, '/index.html', token)).toEqual({ status: 200, body: 'app\n' });
  expect((await getViaHost(host, '/index.html')).status).toBe(403);
  expect((await getViaHost(sbx.getHost(9999), '/', token)).status).toBe(502);
  await app.kill();
  await sbx.kill();
});

test("a request for a sandbox that is gone answers E2B's 502 body, naming it", async () => {
  const sbx = await Sandbox.create('base');
  await sbx.kill();
  const gone = await getViaHost(sbx.getHost(8080), '/');
  expect([gone.status, JSON.parse(gone.body)]).toEqual([502, { sandboxId: sbx.sandboxId, message: 'The sandbox was not found', code: 502 }]);
});

test('maskRequestHost: a server in the sandbox sees that Host, ${PORT} replaced by its port', async () => {
  const sbx = await Sandbox.create('base', { network: { maskRequestHost: 'app-${PORT}.internal.example' } });
  const app = await sbx.commands.run(`node -e "require('http').createServer((q, r) => r.end(q.headers.host)).listen(8080)"`, { background: true });
  const host = sbx.getHost(8080);
  await eventually(async () => (await getViaHost(host, '/')).status === 200, 'the app in the sandbox');
  expect(await getViaHost(host, '/')).toEqual({ status: 200, body: 'app-8080.internal.example' });
  await app.kill();
  await sbx.kill();
  await expect(Sandbox.create('base', { network: { maskRequestHost: 'a b' } })).rejects.toThrow("maskRequestHost 'a b' is not a host");
});

test('the 300 s default timeout, list by state, and a paused sandbox outliving its timeout while a running one expires', async () => {
  const run = `state-${Date.now()}`;
  const paused = await Sandbox.create('base', { metadata: { run } });
  const expiring = await Sandbox.create('base', { metadata: { run } });
  const info = await Sandbox.getInfo(paused.sandboxId);
  expect(info).toMatchObject({ sandboxId: paused.sandboxId, templateId: 'base', state: 'running', metadata: { run } });
  // A value check on the stored expiry, within a second of rounding.
  expect(Math.abs(info.endAt.getTime() - info.startedAt.getTime() - 300_000)).toBeLessThanOrEqual(1000);

  await paused.pause();
  const ids = async (state?: Array<'running' | 'paused'>) =>
    (await Sandbox.list({ query: { metadata: { run }, ...(state ? { state } : {}) } }).nextItems()).map((s) => [s.sandboxId, s.state]);
  expect(await ids(['paused'])).toEqual([[paused.sandboxId, 'paused']]);
  expect(await ids(['running'])).toEqual([[expiring.sandboxId, 'running']]);
  expect((await ids()).sort()).toEqual([[paused.sandboxId, 'paused'], [expiring.sandboxId, 'running']].sort());

  // The paused one's timeout runs out first; the server's expiry pass for the
  // running one comes after it and must leave the paused one alone.
  await Sandbox.setTimeout(paused.sandboxId, 1000);
  await expiring.setTimeout(2000);
  await eventually(async () => !(await expiring.isRunning()), 'the sandbox to expire');
  await expect(Sandbox.getInfo(expiring.sandboxId)).rejects.toMatchObject({ name: 'SandboxNotFoundError' });
  expect(await ids()).toEqual([[paused.sandboxId, 'paused']]);
  const still = await Sandbox.getInfo(paused.sandboxId);
  expect(still.state).toBe('paused');
  expect(still.endAt.getTime()).toBeLessThan(Date.now());
  expect(await paused.isRunning()).toBe(false);
  await paused.kill();
});

test('setTimeout moves the expiry', async () => {
  const sbx = await Sandbox.create('base');
  // The new end is 30 s after some moment between sending setTimeout and its answer
  // (1 s of slack for timestamps rounded to the second).
  const before = Date.now();
  await sbx.setTimeout(30_000);
  const after = Date.now();
  const info = await sbx.getInfo();
  expect(info.endAt.getTime()).toBeGreaterThanOrEqual(before + 30_000 - 1_000);
  expect(info.endAt.getTime()).toBeLessThanOrEqual(after + 30_000 + 1_000);
  const before2 = Date.now();
  await Sandbox.setTimeout(sbx.sandboxId, 600_000);
  expect((await Sandbox.getInfo(sbx.sandboxId)).endAt.getTime()).toBeGreaterThanOrEqual(before2 + 600_000 - 1_000);
  await sbx.kill();
});

test('Sandbox.list filters by metadata, template and start time, orders and pages', async () => {
  const run = `list-${Date.now()}`;
  const made = [];
  for (let i = 0; i < 3; i++) made.push(await Sandbox.create('base', { metadata: { run, 'with space': 'a&b=c' } }));
  const ids = made.map((s) => s.sandboxId);
  const paginator = Sandbox.list({ query: { metadata: { run, 'with space': 'a&b=c' } }, limit: 2 });
  const pages: string[][] = [];
  while (paginator.hasNext) pages.push((await paginator.nextItems()).map((s) => s.sandboxId));
  expect(pages.map((p) => p.length)).toEqual([2, 1]);
  expect(pages.flat().sort()).toEqual([...ids].sort());
  const none = Sandbox.list({ query: { metadata: { run: 'other' } } });
  expect(await none.nextItems()).toEqual([]);

  const list = async (opts: Parameters<typeof Sandbox.list>[0]) => (await Sandbox.list(opts).nextItems()).map((s) => s.sandboxId);
  expect(await list({ query: { metadata: { run } }, order: 'asc' })).toEqual(ids);
  expect(await list({ query: { metadata: { run } }, order: 'desc' })).toEqual([...ids].reverse());
  expect(await list({ query: { metadata: { run }, template: 'base' }, order: 'asc' })).toEqual(ids);
  expect(await list({ query: { metadata: { run }, template: 'no-such-template' } })).toEqual([]);
  const second = (await made[1]!.getInfo()).startedAt;
  // "At or after", as the SDK documents: the instant itself is included.
  expect(await list({ query: { metadata: { run }, startedAfter: second }, order: 'asc' })).toEqual(ids.slice(1));
  expect(await list({ query: { metadata: { run }, startedAfter: new Date(second.getTime() + 1) }, order: 'asc' })).toEqual(ids.slice(2));
  for (const s of made) await s.kill();
});

test('kill is true, then false for a missing sandbox; isRunning is false after kill', async () => {
  const sbx = await Sandbox.create('base');
  expect(await sbx.isRunning()).toBe(true);
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(true);
  expect(await Sandbox.kill(sbx.sandboxId)).toBe(false);
  expect(await sbx.isRunning()).toBe(false);
});

test('pause, then Sandbox.connect resumes it with its files, processes and memory', async () => {
  const sbx = await Sandbox.create('base');
  await sbx.files.write('/home/user/kept.txt', 'across the pause');
  // A shell that counts the lines it reads: its count lives only in memory.
  const counter = await sbx.commands.run('n=0; while read -r l; do n=$((n+1)); echo "line $n: $l"; done', { background: true, stdin: true, timeoutMs: 0 });
  await sbx.commands.sendStdin(counter.pid, 'one\n');
  await eventually(() => counter.stdout.includes('line 1: one'), `the first line, got ${JSON.stringify(counter.stdout)}`);
  await counter.disconnect();

  expect(await sbx.pause()).toBe(true);
  expect(await sbx.pause()).toBe(false);
  expect(await sbx.isRunning()).toBe(false);
  expect((await Sandbox.getInfo(sbx.sandboxId)).state).toBe('paused');
  const again = await Sandbox.connect(sbx.sandboxId);
  expect(again.sandboxId).toBe(sbx.sandboxId);
  expect(await again.isRunning()).toBe(true);
  expect(await again.files.read('/home/user/kept.txt')).toBe('across the pause');

  expect((await again.commands.list()).map((p) => p.pid)).toContain(counter.pid);
  const attached = await again.commands.connect(counter.pid);
  await again.commands.sendStdin(counter.pid, 'two\n');
  await eventually(() => attached.stdout.includes('line 2: two'), `the count to go on, got ${JSON.stringify(attached.stdout)}`);
  await again.commands.closeStdin(counter.pid);
  expect(await attached.wait()).toMatchObject({ exitCode: 0 });
  await again.kill();
});

test("pause({ keepMemory: false }) and connect with onResume: 'reboot' keep the files, not the processes", async () => {
  const sbx = await Sandbox.create('base');
  await sbx.files.write('kept.txt', 'files only');
  const sleeper = async (s: Sandbox) => (await s.commands.run('pgrep -x sleep | wc -l')).stdout;
  await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
  // A background command is answered once its shell started, which may be before the shell has run sleep.
  await eventually(async () => (await sleeper(sbx)) === '1\n', 'the background sleep to run');

  expect(await sbx.pause({ keepMemory: false })).toBe(true);
  const cold = await Sandbox.connect(sbx.sandboxId);
  expect([await cold.files.read('kept.txt'), await sleeper(cold)]).toEqual(['files only', '0\n']);

  await cold.commands.run('sleep 600', { background: true, timeoutMs: 0 });
  await eventually(async () => (await sleeper(cold)) === '1\n', 'the background sleep to run');
  expect(await cold.pause()).toBe(true);
  const rebooted = await Sandbox.connect(sbx.sandboxId, { onResume: 'reboot' });
  expect([await rebooted.files.read('kept.txt'), await sleeper(rebooted)]).toEqual(['files only', '0\n']);
  await rebooted.kill();
});

test('getMetrics returns samples, a new one each interval, and takes a time range', async () => {
  const sbx = await Sandbox.create('base');
  await eventually(async () => (await sbx.getMetrics()).length >= 2, 'two metric samples', 15_000);
  const series = await sbx.getMetrics();
  const [m] = series;
  expect(m).toMatchObject({ cpuCount: 2, memTotal: 512 * 1024 * 1024 });
  expect(m!.timestamp).toBeInstanceOf(Date);
  expect(m!.memUsed).toBeGreaterThan(0);
  const times = series.map((x) => x.timestamp.getTime());
  expect(times).toEqual([...times].sort((a, b) => a - b));
  expect(new Set(times).size).toBe(times.length);
  expect(await sbx.getMetrics({ start: new Date(0), end: new Date(1_000_000) })).toEqual([]);
  await sbx.kill();
});

test('lifecycle: pause at expiry, with or without memory, and autoResume through the proxy', async () => {
  const plain = await Sandbox.create('base', { lifecycle: { onTimeout: 'pause' } });
  const cold = await Sandbox.create('base', { lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } });
  const waking = await Sandbox.create('base', { lifecycle: { onTimeout: 'pause', autoResume: true } });
  const sleepers = async (s: Sandbox) => (await s.commands.run('pgrep -x sleep | wc -l')).stdout;
  for (const s of [plain, cold]) {
    await s.files.write('f.txt', 'kept at expiry');
    await s.commands.run('sleep 600', { background: true, timeoutMs: 0 });
    await s.setTimeout(1000);
  }
  expect((await waking.getInfo()).lifecycle).toEqual({ onTimeout: 'pause', autoResume: true });
  await eventually(async () => (await Sandbox.getInfo(plain.sandboxId)).state === 'paused', 'the pause at expiry');
  await eventually(async () => (await Sandbox.getInfo(cold.sandboxId)).state === 'paused', 'the pause without memory at expiry');
  expect((await Sandbox.getInfo(plain.sandboxId)).lifecycle).toEqual({ onTimeout: 'pause', autoResume: false });
  // Without autoResume, traffic does not wake it; connect does.
  expect(await plain.isRunning()).toBe(false);
  expect((await Sandbox.getInfo(plain.sandboxId)).state).toBe('paused');
  const back = await Sandbox.connect(plain.sandboxId);
  expect([await back.files.read('f.txt'), await sleepers(back)]).toEqual(['kept at expiry', '1\n']);
  await back.kill();
  const rebooted = await Sandbox.connect(cold.sandboxId);
  expect([await rebooted.files.read('f.txt'), await sleepers(rebooted)]).toEqual(['kept at expiry', '0\n']);
  await rebooted.kill();

  await waking.files.write('f.txt', 'awake');
  expect(await waking.pause()).toBe(true);
  expect((await Sandbox.getInfo(waking.sandboxId)).state).toBe('paused');
  expect((await waking.commands.run('cat f.txt')).stdout).toBe('awake');
  expect((await Sandbox.getInfo(waking.sandboxId)).state).toBe('running');
  await waking.kill();
});

test('Template.exists and template tags', async () => {
  expect(await Template.exists('base')).toBe(true);
  expect(await Template.exists('no-such-template')).toBe(false);
  expect(await Template.assignTags('base', ['stable', 'v1'])).toMatchObject({ tags: ['stable', 'v1'] });
  expect((await Template.getTags('base')).map((t) => t.tag).sort()).toEqual(['stable', 'v1']);
  const tagged = await Sandbox.create('base:stable');
  expect((await tagged.getInfo()).templateId).toBe('base');
  await tagged.kill();
  await Template.removeTags('base', ['stable', 'v1']);
  expect(await Template.getTags('base')).toEqual([]);
  await expect(Sandbox.create('base:stable')).rejects.toMatchObject({ name: 'SandboxError', message: expect.stringMatching(/^404: /) });
});

describe('snapshots, forks and network rules of one sandbox', () => {
  let sbx: Sandbox;
  beforeAll(async () => {
    sbx = await Sandbox.create('base', { allowInternetAccess: true, network: { allowOut: ['pypi.org'], denyOut: ['0.0.0.0/0'] } });
    await sbx.files.write('app/version', 'v1');
  });
  afterAll(async () => {
    await sbx.kill();
  });

  test('createSnapshot, listSnapshots, create from the snapshot, deleteSnapshot', async () => {
    const snap = await sbx.createSnapshot({ name: 'compat-snap' });
    expect(snap).toEqual({ snapshotId: expect.stringMatching(/^snap/), names: ['compat-snap'] });
    expect((await sbx.getInfo()).state).toBe('running');
    expect(await sbx.listSnapshots().nextItems()).toEqual([snap]);
    expect(await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()).toEqual([snap]);
    expect(await Sandbox.listSnapshots({ name: 'compat-snap' }).nextItems()).toEqual([snap]);

    const child = await Sandbox.create(snap.snapshotId);
    expect((await child.getInfo()).templateId).toBe(snap.snapshotId);
    expect(await child.files.read('app/version')).toBe('v1');
    // Differs from e2b: a snapshot that a live sandbox was made from is not deleted.
    await expect(Sandbox.deleteSnapshot(snap.snapshotId)).rejects.toMatchObject({
      name: 'SandboxError',
      message: `409: template '${snap.snapshotId}' is used by sandbox ${child.sandboxId} (kill it first)`,
    });
    await child.kill();
    expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(true);
    expect(await Sandbox.deleteSnapshot(snap.snapshotId)).toBe(false);
    expect(await sbx.listSnapshots().nextItems()).toEqual([]);
  });

  test('fork makes running sandboxes with the files and the network rules, not the processes', async () => {
    const parentSleep = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 });
    const forks = await sbx.fork({ count: 2 });
    expect(forks).toHaveLength(2);
    for (const f of forks) {
      if (!(f instanceof Sandbox)) throw f;
      expect(f.sandboxId).not.toBe(sbx.sandboxId);
      expect(await f.files.read('app/version')).toBe('v1');
      expect((await f.commands.run('pgrep -x sleep | wc -l')).stdout).toBe('0\n');
      // Its egress rules are its parent's.
      expect((await f.getInfo()).network).toEqual({ allowOut: ['pypi.org'], denyOut: ['0.0.0.0/0'] });
      await f.kill();
    }
    expect((await sbx.commands.run('pgrep -x sleep | wc -l')).stdout).toBe('1\n');
    await parentSleep.kill();
  });

  // What the rules do to traffic: network.test.ts.
  test('network on create and updateNetwork are recorded as given and read back by getInfo', async () => {
    const info = await sbx.getInfo();
    expect(info.allowInternetAccess).toBe(true);
    expect(info.network).toEqual({ allowOut: ['pypi.org'], denyOut: ['0.0.0.0/0'] });

    await sbx.updateNetwork({ allowOut: ['1.1.1.1', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'] });
    expect((await sbx.getInfo()).network).toEqual({ allowOut: ['1.1.1.1', '10.0.0.0/8'], denyOut: ['0.0.0.0/0'] });
    // An update replaces the whole configuration, as the SDK documents: what
    // it leaves out is cleared.
    await sbx.updateNetwork({ allowOut: ['8.8.8.8'] });
    expect((await sbx.getInfo()).network).toEqual({ allowOut: ['8.8.8.8'] });
    await sbx.updateNetwork({ allowInternetAccess: false });
    const cleared = await sbx.getInfo();
    expect(cleared.allowInternetAccess).toBe(false);
    expect(cleared.network?.allowOut ?? []).toEqual([]);
    expect(cleared.network?.denyOut ?? []).toEqual([]);
    await sbx.updateNetwork({ denyOut: ['10.0.0.0/8'] });
    const reset = await sbx.getInfo();
    expect(reset.network).toEqual({ denyOut: ['10.0.0.0/8'] });
    // Cleared means unset again, which is the default: access allowed.
    expect(reset.allowInternetAccess ?? true).toBe(true);
    await expect(sbx.updateNetwork({ denyOut: ['example.com'] })).rejects.toMatchObject({
      message: "400: denyOut[0] 'example.com' is not a CIDR block or an IP address (domains are allowed only in allowOut)",
    });
  });
});

test("what Paddock does not have yet fails with the SDK's own errors", async () => {
  await expect(Volume.create('compat-volume')).rejects.toMatchObject({ name: 'VolumeError', message: '404: no route for POST /volumes' });
  await expect(Sandbox.create('base', { volumeMounts: { '/mnt/data': 'compat-volume' } })).rejects.toMatchObject({
    name: 'SandboxError',
    message: '400: volumeMounts are not supported by this server',
  });
  await expect(Secret.list().nextItems()).rejects.toMatchObject({ name: 'SecretError', message: '404: no route for GET /secrets' });
  await expect(Secret.create('compat-secret', 'value')).rejects.toMatchObject({ name: 'SecretError', message: '404: no route for POST /secrets' });

  // With `mcp` the SDK defaults to an 'mcp-gateway' template, which Paddock does not have.
  await expect(Sandbox.create({ mcp: { 'github/owner/repo': { runCmd: 'serve' } } })).rejects.toMatchObject({
    name: 'SandboxError',
    message: "404: template 'mcp-gateway' not found",
  });
  // On 'base' the server takes the `mcp` field, then the SDK's start of the gateway fails and it kills the sandbox.
  const run = `mcp-${Date.now()}`;
  await expect(Sandbox.create('base', { metadata: { run }, mcp: { 'github/owner/repo': { runCmd: 'serve' } } })).rejects.toMatchObject({
    name: 'SandboxError',
    message: expect.stringMatching(/^Failed to start MCP gateway: .*mcp-gateway: command not found/),
  });
  expect(await Sandbox.list({ query: { metadata: { run } } }).nextItems()).toEqual([]);
});
