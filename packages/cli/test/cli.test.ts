// The real `paddock` command against a real service it started itself.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as pty from 'node-pty';
import { RuncRuntime } from '@paddock/runtime';
import { CONFIG_KEYS } from '@paddock/server';

const main = join(import.meta.dirname, '../dist/main.js');
const repo = join(import.meta.dirname, '../../..');
const home = mkdtempSync(join(tmpdir(), 'paddock-cli-'));
// Samples every half second, so that `sandbox metrics` has some to show soon.
const env: NodeJS.ProcessEnv = { ...process.env, PADDOCK_HOME: home, NO_COLOR: '1', PADDOCK_METRICS_INTERVAL_MS: '500' };
delete env.PADDOCK_API_URL;
delete env.PADDOCK_API_KEY;
delete env.PADDOCK_SANDBOX_URL;

interface Started {
  child: ChildProcess;
  info: { apiUrl: string; sandboxUrl: string; domain: string; apiKey?: string; adminKey?: string };
}

/** `paddock start --json`, resolved once it printed its addresses. */
async function startService(): Promise<Started> {
  const child = spawn(process.execPath, [main, 'start', '--json', '--api-port', '0', '--proxy-port', '0', '--warm-pool', '1'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d));
  let json = '';
  const info = await new Promise<Started['info']>((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      json += d;
      try {
        resolve(JSON.parse(json) as Started['info']);
      } catch {
        // not all of it yet
      }
    });
    child.once('exit', (code) => reject(new Error(`paddock start exited with ${code}: ${err}`)));
  });
  return { child, info };
}

function paddock(args: string[], extraEnv: Record<string, string | undefined> = {}) {
  const res = spawnSync(process.execPath, [main, ...args], { env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 120_000 });
  return { code: res.status, stdout: res.stdout, stderr: res.stderr };
}

let service: Started;
beforeAll(async () => {
  service = await startService();
});

afterAll(async () => {
  if (service.child.exitCode === null) {
    const exited = new Promise((r) => service.child.once('exit', r));
    service.child.kill('SIGTERM');
    await exited;
  }
  const runtime = new RuncRuntime({ dataDir: join(home, 'runtime') });
  await runtime.removeEverything();
  expect(await runtime.leftovers()).toEqual([]);
  rmSync(home, { recursive: true, force: true });
});

test('start prints its addresses and a new key of the e2b form, and saves them for the CLI', () => {
  expect(service.info.apiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(service.info.apiKey).toMatch(/^e2b_[0-9a-f]{40}$/);
  expect(service.info.adminKey).toMatch(/^paddock_admin_[0-9a-f]{40}$/);
  const saved = JSON.parse(readFileSync(join(home, 'credentials.json'), 'utf8')) as Record<string, string>;
  expect(saved).toMatchObject({ apiUrl: service.info.apiUrl, sandboxUrl: service.info.sandboxUrl, apiKey: service.info.apiKey, adminKey: service.info.adminKey });
  expect(paddock(['keys', 'current']).stdout).toBe(`${service.info.apiKey}\n`);
});

test('keys: create, list, rename and revoke through the running server; a revoked key and the last key are refused', () => {
  const created = paddock(['keys', 'create', '--name', 'ci', '--json']);
  expect([created.code, created.stderr]).toEqual([0, '']);
  const k = JSON.parse(created.stdout) as { id: string; name: string; key: string };
  expect(k).toEqual({ id: expect.any(String), name: 'ci', key: expect.stringMatching(/^e2b_[0-9a-f]{40}$/) });

  // The new key opens the server; listing with it records its use.
  const listed = paddock(['keys', 'list', '--json'], { PADDOCK_API_KEY: k.key });
  expect(listed.code).toBe(0);
  const keys = JSON.parse(listed.stdout) as Array<{ id: string; name: string; mask: Record<string, unknown>; createdAt: string; lastUsed: string | null }>;
  expect(keys.map((x) => x.name)).toEqual(['default', 'ci']);
  const ci = keys.find((x) => x.id === k.id)!;
  expect(ci.mask).toEqual({ prefix: 'e2b_', valueLength: 40, maskedValuePrefix: k.key.slice(4, 8), maskedValueSuffix: k.key.slice(-4) });
  expect(Number.isNaN(Date.parse(ci.lastUsed ?? ''))).toBe(false);
  expect(listed.stdout).not.toContain(k.key);
  expect(paddock(['keys', 'list']).stdout).toMatch(new RegExp(`${k.id}\\s+ci\\s+e2b_${k.key.slice(4, 8)}…${k.key.slice(-4)}\\s`));

  expect(paddock(['keys', 'rename', k.id, 'renamed']).code).toBe(0);
  expect((JSON.parse(paddock(['keys', 'list', '--json']).stdout) as Array<{ id: string; name: string }>).find((x) => x.id === k.id)?.name).toBe('renamed');

  expect(paddock(['keys', 'revoke', k.id]).code).toBe(0);
  const revoked = paddock(['keys', 'list'], { PADDOCK_API_KEY: k.key });
  expect([revoked.code, revoked.stderr]).toEqual([5, expect.stringContaining('invalid API key')]);
  const unknown = paddock(['keys', 'revoke', k.id]);
  expect([unknown.code, unknown.stderr]).toEqual([4, expect.stringContaining(`no API key has id '${k.id}'`)]);
  const [last] = JSON.parse(paddock(['keys', 'list', '--json']).stdout) as Array<{ id: string }>;
  const refused = paddock(['keys', 'revoke', last!.id]);
  expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining(`API key '${last!.id}' is the last one; create another before deleting it`)]);

  // For people: the key alone on stdout, the note on stderr.
  const human = paddock(['keys', 'create', '--name', 'person']);
  expect(human.code).toBe(0);
  expect(human.stdout).toMatch(/^e2b_[0-9a-f]{40}\n$/);
  expect(human.stderr).toMatch(/^created key [0-9a-f-]{36} \('person'\); it is shown only now\n$/);
  const id = /created key (\S+)/.exec(human.stderr)![1]!;
  expect(paddock(['keys', 'revoke', id]).code).toBe(0);
});

test('team: create, list, show, limits, keys of a team and delete, with the admin credential saved here or given from another machine', () => {
  const made = paddock(['team', 'create', 'cli-team', '--max-sandboxes', '2', '--json']);
  expect([made.code, made.stderr]).toEqual([0, '']);
  const team = JSON.parse(made.stdout) as { teamID: string; name: string; limits: Record<string, number | null> };
  expect(team).toMatchObject({ name: 'cli-team', limits: { maxSandboxes: 2, maxMemoryMB: null, maxDiskMB: null }, usage: { sandboxes: 0 } });
  expect((JSON.parse(paddock(['team', 'list', '--json']).stdout) as Array<{ name: string }>).map((t) => t.name)).toEqual(['default', 'cli-team']);
  expect(paddock(['team', 'show', 'cli-team']).stdout).toMatch(/sandboxes\s+0 running, limit 2\n/);
  const limited = JSON.parse(paddock(['team', 'limits', team.teamID, '--max-sandboxes', 'none', '--max-memory-mb', '512', '--json']).stdout) as { limits: unknown };
  expect(limited.limits).toEqual({ maxSandboxes: null, maxMemoryMB: 512, maxDiskMB: null });
  const bad = paddock(['team', 'limits', 'cli-team', '--max-disk-mb', 'lots']);
  expect([bad.code, bad.stderr]).toEqual([2, expect.stringContaining("'lots' is not a whole number or 'none'")]);

  // A key of the team: made once, listed masked, and it sees its own team's keys only.
  const key = JSON.parse(paddock(['keys', 'create', '--team', 'cli-team', '--name', 'member', '--json']).stdout) as { id: string; key: string };
  expect(key.key).toMatch(/^e2b_[0-9a-f]{40}$/);
  const listed = paddock(['keys', 'list', '--team', 'cli-team', '--json']);
  expect((JSON.parse(listed.stdout) as Array<{ name: string }>).map((k) => k.name)).toEqual(['member']);
  expect(listed.stdout).not.toContain(key.key);
  expect((JSON.parse(paddock(['keys', 'list', '--json'], { PADDOCK_API_KEY: key.key }).stdout) as Array<{ name: string }>).map((k) => k.name)).toEqual(['member']);

  // From another machine: no saved credentials, the admin credential by variable or flag.
  const elsewhere = mkdtempSync(join(tmpdir(), 'paddock-cli-remote-'));
  try {
    const remote = { PADDOCK_HOME: elsewhere, PADDOCK_API_URL: service.info.apiUrl };
    expect(paddock(['team', 'show', 'cli-team', '--json'], { ...remote, PADDOCK_ADMIN_KEY: service.info.adminKey }).code).toBe(0);
    expect(paddock(['team', 'list', '--admin-key', service.info.adminKey!], remote).stdout).toMatch(/cli-team/);
    const none = paddock(['team', 'list'], remote);
    expect([none.code, none.stderr]).toEqual([5, expect.stringContaining('no admin credential')]);
    // An ordinary key is not the admin credential.
    const ordinary = paddock(['team', 'list'], { ...remote, PADDOCK_ADMIN_KEY: key.key });
    expect([ordinary.code, ordinary.stderr]).toEqual([5, expect.stringContaining('takes the admin credential only')]);
  } finally {
    rmSync(elsewhere, { recursive: true, force: true });
  }

  expect(paddock(['keys', 'revoke', key.id, '--team', 'cli-team']).code).toBe(0);
  expect(paddock(['keys', 'list'], { PADDOCK_API_KEY: key.key }).code).toBe(5);
  const deleted = paddock(['team', 'delete', 'cli-team']);
  expect([deleted.code, deleted.stderr]).toEqual([0, "deleted team 'cli-team'\n"]);
  const gone = paddock(['team', 'show', 'cli-team']);
  expect([gone.code, gone.stderr]).toEqual([4, expect.stringContaining("no team has the id or name 'cli-team'")]);
});

test('keys say plainly when no server is running, and never open the database file', async () => {
  // A home whose server has stopped: its credentials name an address where nothing listens.
  const stopped = mkdtempSync(join(tmpdir(), 'paddock-cli-stopped-'));
  const free = createServer();
  await new Promise<void>((r) => free.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(free.address() as AddressInfo).port}`;
  await new Promise((r) => free.close(r));
  writeFileSync(join(stopped, 'credentials.json'), JSON.stringify({ apiUrl: url, sandboxUrl: url, domain: 'x', apiKey: service.info.apiKey }));
  try {
    for (const args of [['keys', 'list'], ['keys', 'create'], ['keys', 'revoke', 'some-id']]) {
      const res = paddock(['--home', stopped, ...args]);
      expect([args.join(' '), res.code, res.stdout]).toEqual([args.join(' '), 5, '']);
      expect(res.stderr).toBe(`error: no Paddock server is running at ${url}\nstart one with \`paddock start\` (PADDOCK_API_URL or --api-url name another)\n`);
    }
    expect(existsSync(join(stopped, 'paddock.db'))).toBe(false);
  } finally {
    rmSync(stopped, { recursive: true, force: true });
  }
});

test('sandbox create --json, exec returns output and exit codes, list --json, kill', () => {
  const created = paddock(['sandbox', 'create', '--json', '--metadata', 'suite=cli']);
  expect(created.code).toBe(0);
  const sbx = JSON.parse(created.stdout) as { sandboxId: string; state: string; metadata: Record<string, string> };
  expect(sbx).toMatchObject({ state: 'running', metadata: { suite: 'cli' } });

  const exec = paddock(['sandbox', 'exec', sbx.sandboxId, '--', 'python3', '-c', 'print(6*7)']);
  expect([exec.code, exec.stdout]).toEqual([0, '42\n']);
  const failing = paddock(['sandbox', 'exec', sbx.sandboxId, '--', 'sh', '-c', 'echo to-stderr >&2; exit 5']);
  expect([failing.code, failing.stderr]).toEqual([5, 'to-stderr\n']);
  const quoted = paddock(['sandbox', 'exec', sbx.sandboxId, '--', 'printf', '%s|', 'two words', "it's"]);
  expect(quoted.stdout).toBe("two words|it's|");

  const list = paddock(['sandbox', 'list', '--json']);
  expect((JSON.parse(list.stdout) as Array<{ sandboxId: string }>).map((s) => s.sandboxId)).toContain(sbx.sandboxId);
  const human = paddock(['sandbox', 'list']);
  expect(human.stdout).toMatch(new RegExp(`${sbx.sandboxId}\\s+base\\s+running`));

  const info = paddock(['sandbox', 'info', sbx.sandboxId, '--json']);
  expect(info.code).toBe(0);
  expect(JSON.parse(info.stdout)).toMatchObject({ sandboxId: sbx.sandboxId, templateId: 'base', state: 'running', metadata: { suite: 'cli' } });
  expect(paddock(['sandbox', 'info', sbx.sandboxId]).stdout).toMatch(new RegExp(`^id\\s+${sbx.sandboxId}\n(.*\n)*state\\s+running\n`));
  expect(JSON.parse(info.stdout).network).toEqual({ allowInternetAccess: true, allowOut: [], denyOut: [] });

  // Egress rules: given at create, shown, replaced live (what is not given is cleared).
  const netted = paddock(['sandbox', 'create', '--json', '--allow-out', 'example.com,*.example.org', '--deny-out', '0.0.0.0/0']);
  const nettedId = (JSON.parse(netted.stdout) as { sandboxId: string }).sandboxId;
  expect(JSON.parse(netted.stdout).network).toEqual({ allowInternetAccess: true, allowOut: ['example.com', '*.example.org'], denyOut: ['0.0.0.0/0'] });
  expect(paddock(['sandbox', 'info', nettedId]).stdout).toMatch(/allow out\s+example\.com, \*\.example\.org\n.*deny out\s+0\.0\.0\.0\/0/);
  const closed = paddock(['sandbox', 'network', nettedId, '--no-internet', '--json']);
  expect([closed.code, JSON.parse(closed.stdout)]).toEqual([0, { allowInternetAccess: false, allowOut: [], denyOut: [] }]);
  expect(paddock(['sandbox', 'network', nettedId, '--deny-out', '203.0.113.0/24']).stdout).toMatch(/internet\s+allowed\n.*allow out\s+none\n.*deny out\s+203\.0\.113\.0\/24/);
  const bad = paddock(['sandbox', 'network', nettedId, '--deny-out', 'example.com']);
  expect(bad.code).not.toBe(0);
  expect(bad.stderr).toContain("denyOut[0] 'example.com' is not a CIDR block or an IP address");
  expect(paddock(['sandbox', 'kill', nettedId]).code).toBe(0);

  let samples: Array<{ cpuCount: number; memTotal: number; memUsed: number; timestamp: string }> = [];
  for (let i = 0; i < 100 && samples.length === 0; i++) {
    const metrics = paddock(['sandbox', 'metrics', sbx.sandboxId, '--json']);
    expect(metrics.code).toBe(0);
    samples = JSON.parse(metrics.stdout) as typeof samples;
    if (samples.length === 0) spawnSync('sleep', ['0.2']);
  }
  expect(samples.length).toBeGreaterThan(0);
  expect(samples[0]!.cpuCount).toBeGreaterThan(0);
  expect(samples[0]!.memUsed).toBeGreaterThan(0);
  expect(samples[0]!.memTotal).toBeGreaterThanOrEqual(samples[0]!.memUsed);
  expect(Number.isNaN(Date.parse(samples[0]!.timestamp))).toBe(false);
  expect(paddock(['sandbox', 'metrics', sbx.sandboxId]).stdout).toMatch(/^time\s+cpu\s+memory\s+disk\n.*% of \d+\s+[\d.]+ MiB \/ [\d.]+ MiB/);
  expect(paddock(['sandbox', 'logs', sbx.sandboxId]).stdout).toContain('sandbox created');
  expect(paddock(['sandbox', 'kill', sbx.sandboxId]).code).toBe(0);
  const again = paddock(['sandbox', 'kill', sbx.sandboxId]);
  expect(again.code).toBe(4);
  expect(again.stderr).toContain(`no sandbox ${sbx.sandboxId}`);
  expect(paddock(['sandbox', 'info', 'nosuchsandbox']).code).toBe(4);
});

test('shell is a real terminal: commands run, resize is seen, exit ends it', async () => {
  const id = paddock(['sandbox', 'create']).stdout.trim();
  const term = pty.spawn(process.execPath, [main, 'sandbox', 'shell', id], { cols: 80, rows: 24, env: env as Record<string, string> });
  let out = '';
  term.onData((d) => (out += d));
  const exited = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
  const waitFor = async (text: string) => {
    for (let i = 0; i < 300; i++) {
      if (out.includes(text)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`not seen '${text}' in ${JSON.stringify(out.slice(-500))}`);
  };
  term.write('echo "answer-$((6*7))"\r');
  await waitFor('answer-42');
  term.write('echo "cols-$(tput cols)"\r');
  await waitFor('cols-80');
  term.resize(100, 30);
  await new Promise((r) => setTimeout(r, 300));
  term.write('echo "size-$(stty size)"\r');
  await waitFor('size-30 100');
  term.write('exit\r');
  expect(await exited).toBe(0);
  paddock(['sandbox', 'kill', id]);
});

test('colour on a terminal, none when piped or with NO_COLOR', async () => {
  const { NO_COLOR: _, ...coloured } = env;
  const onTerminal = async (extra: Record<string, string>) => {
    const term = pty.spawn(process.execPath, [main, 'template', 'list'], { cols: 120, rows: 24, env: { ...coloured, ...extra } as Record<string, string> });
    let out = '';
    term.onData((d) => (out += d));
    const code = await new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
    return { code, out };
  };
  const tty = await onTerminal({});
  expect(tty.code).toBe(0);
  expect(tty.out).toContain('\x1b[1mid');
  const noColour = await onTerminal({ NO_COLOR: '1' });
  expect(noColour.out).toMatch(/^id /);
  expect(noColour.out).not.toContain('\x1b[');
  const piped = spawnSync(process.execPath, [main, 'template', 'list'], { env: coloured, encoding: 'utf8' });
  expect(piped.status).toBe(0);
  expect(piped.stdout).toMatch(/^id /);
  expect(piped.stdout).not.toContain('\x1b[');
});

test('shell without a terminal says what to use instead', () => {
  const res = paddock(['sandbox', 'shell', 'whatever']);
  expect(res.code).toBe(2);
  expect(res.stderr).toContain('shell needs a terminal');
});

test('config prints the effective settings with their sources: variable over file over default; a bad value is named', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-cli-config-'));
  try {
    const file = join(dir, 'paddock.yaml');
    writeFileSync(file, 'api-port: 4100\nproxy-port: 4101\nwarm-pool: 0\n');
    const res = paddock(['--config', file, 'config', '--json'], { PADDOCK_PROXY_PORT: '4201' });
    expect(res.code).toBe(0);
    const out = JSON.parse(res.stdout) as { configFile: string; settings: Array<{ key: string; value: unknown; source: string }> };
    const by = Object.fromEntries(out.settings.map((s) => [s.key, s]));
    expect(out.configFile).toBe(file);
    expect(by['api-port']).toEqual({ key: 'api-port', value: 4100, source: 'file' });
    expect(by['proxy-port']).toEqual({ key: 'proxy-port', value: 4201, source: 'PADDOCK_PROXY_PORT' });
    expect(by['domain']).toEqual({ key: 'domain', value: 'localhost:4201', source: 'default' });
    expect(by['warm-pool']).toMatchObject({ value: 0, source: 'file' });

    writeFileSync(file, 'warm-pool: lots\n');
    const bad = paddock(['--config', file, 'config']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain(`warm-pool: "lots" in ${file} is not a non-negative number`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every setting the configuration table gives a flag is a flag of start', () => {
  const help = paddock(['start', '--help']);
  expect(help.code).toBe(0);
  const flags = CONFIG_KEYS.filter((k) => k.flag && k.key !== 'home').map((k) => k.flag!);
  expect(flags.filter((f) => !help.stdout.includes(f))).toEqual([]);
  expect(paddock(['--help']).stdout).toContain('--home');
});

test('service install writes a unit systemd accepts, running start with the data directory and configuration file; uninstall removes only its own', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-units-'));
  try {
    const config = join(dir, 'paddock.yaml');
    writeFileSync(config, 'warm-pool: 1\n');
    const installed = paddock(['--home', '/srv/paddock data', '--config', config, 'service', 'install', '--unit-dir', dir, '--json']);
    expect(installed.code).toBe(0);
    const unit = join(dir, 'paddock.service');
    expect(JSON.parse(installed.stdout)).toMatchObject({ unit, done: [`wrote ${unit}`] });
    const text = readFileSync(unit, 'utf8');
    expect(text).toContain(`ExecStart=${process.execPath} --initial-old-space-size=64 ${main} --home "/srv/paddock data" --config ${config} start\n`);
    expect(text).toContain('ExecReload=/bin/kill -HUP $MAINPID');
    // systemd's own check of the unit: its syntax, and that what ExecStart runs exists.
    const verify = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    expect(verify.error).toBeUndefined();
    expect(verify.stderr.split('\n').filter((l) => l.includes('paddock.service'))).toEqual([]);

    const removed = paddock(['service', 'uninstall', '--unit-dir', dir, '--json']);
    expect(removed.code).toBe(0);
    expect(existsSync(unit)).toBe(false);
    writeFileSync(unit, '[Unit]\nDescription=someone else\'s\n');
    const foreign = paddock(['service', 'install', '--unit-dir', dir]);
    expect(foreign.code).toBe(2);
    expect(foreign.stderr).toContain('was not written by paddock service install');
    expect(paddock(['service', 'uninstall', '--unit-dir', dir]).code).toBe(2);
    expect(readFileSync(unit, 'utf8')).toContain('someone else');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('doctor reports a missing OCI runtime with the command that fixes it', () => {
  // A PATH with the tools Paddock needs, but neither crun nor runc.
  const bin = join(home, 'fake-bin');
  mkdirSync(bin, { recursive: true });
  for (const tool of ['mount', 'umount', 'mknod', 'cp', 'mkfs.ext4', 'mmdebstrap', 'apt-get', 'nft', 'ip', 'ss', 'nsenter']) {
    const real = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'].map((d) => join(d, tool)).find((p) => existsSync(p));
    if (real && !existsSync(join(bin, tool))) symlinkSync(real, join(bin, tool));
  }
  type Report = { ok: boolean; checks: Array<{ name: string; ok: boolean; detail: string; fix?: string; package?: string }> };
  // A new home: the service's has sandboxes, which keep it on the runtime they run on.
  const fresh = mkdtempSync(join(tmpdir(), 'paddock-cli-doctor-'));
  const res = paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0'], { PATH: bin, PADDOCK_HOME: fresh });
  expect(res.code).toBe(3);
  const report = JSON.parse(res.stdout) as Report;
  expect(report.ok).toBe(false);
  // Neither installed: crun is the one to install.
  expect(report.checks.find((c) => c.name === 'oci runtime')).toMatchObject({ ok: false, detail: 'crun is not on PATH', fix: 'apt-get install -y crun', package: 'crun' });
  expect(report.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['oci runtime']);
  const human = paddock(['doctor', '--api-port', '0', '--proxy-port', '0'], { PATH: bin, PADDOCK_HOME: fresh });
  expect(human.stdout).toMatch(/oci runtime\s+FAIL\s+crun is not on PATH\s+apt-get install -y crun/);
  expect(human.stderr).toContain('1 check failed: oci runtime');

  // Only runc installed: a new home's server runs on it, and doctor checks it.
  symlinkSync(execFileSync('sh', ['-c', 'command -v runc'], { encoding: 'utf8' }).trim(), join(bin, 'runc'));
  const onRunc = JSON.parse(paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0'], { PATH: bin, PADDOCK_HOME: fresh }).stdout) as Report;
  expect(onRunc.checks.find((c) => c.name === 'oci runtime')).toMatchObject({ ok: true, detail: expect.stringMatching(/^runc version .*\/runc\)$/) });
  // A home whose containers crun runs (its state directory has one) stays on crun.
  mkdirSync(join(fresh, 'runtime', 'crun', 'some-sandbox'), { recursive: true });
  const held = JSON.parse(paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0'], { PATH: bin, PADDOCK_HOME: fresh }).stdout) as Report;
  expect(held.checks.find((c) => c.name === 'oci runtime')).toMatchObject({ ok: false, detail: "crun is not on PATH (the home's sandboxes run on it)", package: 'crun' });
  rmSync(fresh, { recursive: true, force: true });
  // Set to crun, which is not there: named, with where the setting came from.
  const setCrun = JSON.parse(paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0'], { PATH: bin, PADDOCK_OCI_RUNTIME: 'crun' }).stdout) as Report;
  expect(setCrun.checks.find((c) => c.name === 'oci runtime')).toMatchObject({ ok: false, detail: 'crun is not on PATH (set by PADDOCK_OCI_RUNTIME or the configuration file)', package: 'crun' });
  const unknown = JSON.parse(paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0'], { PADDOCK_OCI_RUNTIME: 'youki' }).stdout) as Report;
  expect(unknown.checks.find((c) => c.name === 'oci runtime')).toMatchObject({ ok: false, detail: "the OCI runtime is set to 'youki', not one of runc, crun" });
  expect(paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0']).code).toBe(0);
});

test("doctor shows the sandbox network's configuration and checks what it needs", () => {
  const checks = (args: string[], env: Record<string, string> = {}) => {
    const res = paddock(['doctor', '--json', '--api-port', '0', '--proxy-port', '0', ...args], env);
    const report = JSON.parse(res.stdout) as { checks: Array<{ name: string; ok: boolean; detail: string; fix?: string }> };
    return { code: res.code, by: Object.fromEntries(report.checks.map((c) => [c.name, c])) };
  };
  const plain = checks([]);
  expect(plain.code).toBe(0);
  // The names getHost() gives resolve from Node here (.ci/run and `paddock start` install libnss-myhostname).
  expect(plain.by['sandbox hosts']).toMatchObject({ ok: true, detail: expect.stringMatching(/^49983-doctor\.localhost resolves to (127\.0\.0\.1|::1) /) });
  expect(checks(['--uplink', 'lo'], { PADDOCK_DOMAIN: 'sandboxes.invalid' }).by['sandbox hosts']).toMatchObject({
    ok: false,
    warning: true,
    fix: 'make *.sandboxes.invalid resolve to this host (a wildcard DNS record), or --domain with one that does',
  });
  for (const name of ['nftables', 'iproute2', 'veth', 'ip forwarding', 'uplink', 'dns', 'private ranges', 'subnet']) expect([name, plain.by[name]?.ok]).toEqual([name, true]);
  expect(plain.by.uplink!.detail).toContain("(the default route's)");
  const configured = checks(['--dns', '203.0.113.53', '--allow-private', '10.9.0.0/16', '--sandbox-subnet', '10.77.0.0/20'], { PADDOCK_UPLINK: 'lo' });
  expect(configured.by.dns!.detail).toBe("sandboxes' resolver asks 203.0.113.53 (configured)");
  expect(configured.by['private ranges']!.detail).toContain('10.9.0.0/16');
  expect(configured.by.subnet!.detail).toBe('10.77.0.0/20 (configured)');
  expect(configured.by.uplink!.detail).toBe('lo (configured)');
  const missing = checks(['--uplink', 'nosuchif0']);
  expect(missing.code).toBe(3);
  expect(missing.by.uplink).toMatchObject({ ok: false, detail: "interface 'nosuchif0' does not exist" });
  expect(checks(['--no-network']).by.network).toMatchObject({ ok: true, detail: expect.stringContaining('loopback only') });
});

test('every command has --help; unknown commands and bad options are usage errors', () => {
  const commands = [
    [],
    ['start'],
    ['doctor'],
    ['keys'],
    ['keys', 'create'],
    ['keys', 'list'],
    ['keys', 'rename'],
    ['keys', 'revoke'],
    ['keys', 'current'],
    ['team'],
    ['team', 'create'],
    ['team', 'list'],
    ['team', 'show'],
    ['team', 'delete'],
    ['team', 'limits'],
    ['sandbox'],
    ['sandbox', 'create'],
    ['sandbox', 'list'],
    ['sandbox', 'info'],
    ['sandbox', 'network'],
    ['sandbox', 'kill'],
    ['sandbox', 'exec'],
    ['sandbox', 'shell'],
    ['sandbox', 'logs'],
    ['sandbox', 'metrics'],
    ['template'],
    ['template', 'list'],
    ['template', 'info'],
  ];
  for (const c of commands) {
    const res = paddock([...c, '--help']);
    expect([c.join(' '), res.code]).toEqual([c.join(' '), 0]);
    expect(res.stdout).toContain(`Usage: paddock ${c.join(' ')}`.trim());
  }
  expect(paddock(['frobnicate']).code).toBe(2);
  expect(paddock(['sandbox', 'create', '--timeout', 'soon']).code).toBe(2);
  expect(paddock(['start', '--api-port', '99999']).code).toBe(2);
});

test('template list and info', () => {
  const list = JSON.parse(paddock(['template', 'list', '--json']).stdout) as Array<{ templateID: string }>;
  expect(list.map((t) => t.templateID)).toEqual(['base']);
  expect(paddock(['template', 'info', 'base']).stdout).toContain('ready');
  expect(paddock(['template', 'info', 'nope']).code).toBe(4);
});

test('the README Quickstart examples run as written against the started service', () => {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const block = (marker: string) => {
    const m = new RegExp(`<!-- quickstart:${marker} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(readme);
    if (!m) throw new Error(`README has no quickstart:${marker} block`);
    return m[1]!;
  };
  const sdkEnv = { PADDOCK_API_URL: service.info.apiUrl, PADDOCK_SANDBOX_URL: service.info.sandboxUrl, PADDOCK_API_KEY: service.info.apiKey };
  const e2bEnv = { E2B_API_URL: service.info.apiUrl, E2B_SANDBOX_URL: service.info.sandboxUrl, E2B_API_KEY: service.info.apiKey };
  for (const [marker, extra] of [
    ['sdk', sdkEnv],
    ['e2b', e2bEnv],
  ] as const) {
    // Saved in the repository, as the README says, so that imports resolve.
    const file = join(repo, `quickstart-test-${marker}-${process.pid}.mjs`);
    writeFileSync(file, block(marker));
    try {
      const res = spawnSync(process.execPath, [file], { env: { ...process.env, ...extra }, encoding: 'utf8', timeout: 120_000, cwd: repo });
      expect([marker, res.status, res.stderr]).toEqual([marker, 0, '']);
      expect(res.stdout).toMatch(/^hello from [a-z0-9]{20}\n/);
      expect(res.stdout).toContain("name: 'hello.py'");
    } finally {
      rmSync(file, { force: true });
    }
  }
  // Reaching a port: the name getHost() gives resolves for Node (the start installed libnss-myhostname if it had to).
  const file = join(repo, `quickstart-test-port-${process.pid}.mjs`);
  writeFileSync(file, block('port'));
  try {
    const res = spawnSync(process.execPath, [file], { env: { ...process.env, ...e2bEnv }, encoding: 'utf8', timeout: 120_000, cwd: repo });
    expect([res.status, res.stderr, res.stdout]).toEqual([0, '', '200 <h1>served from a sandbox</h1>\n']);
  } finally {
    rmSync(file, { force: true });
  }
});

test('Ctrl-C stops the server cleanly, sandboxes keep running, the next start adopts them', async () => {
  const id = paddock(['sandbox', 'create']).stdout.trim();
  paddock(['sandbox', 'exec', id, '--', 'sh', '-c', 'echo persisted > ~/p']);
  const exited = new Promise<number | null>((r) => service.child.once('exit', (code) => r(code)));
  service.child.kill('SIGINT');
  expect(await exited).toBe(0);

  // The next start is the human one: addresses and environment lines, no new key.
  const child = spawn(process.execPath, [main, 'start', '--api-port', '0', '--proxy-port', '0', '--warm-pool', '0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (l) => {
      lines.push(l);
      if (l.startsWith('Ctrl-C stops the server')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`second start exited with ${code}`)));
  });
  service = { child, info: service.info };
  const text = lines.join('\n');
  expect(text).toContain('Paddock is running.');
  expect(text).toMatch(/export E2B_API_URL=http:\/\/127\.0\.0\.1:\d+/);
  expect(text).toMatch(/export E2B_SANDBOX_URL=http:\/\/127\.0\.0\.1:\d+/);
  expect(text).toContain('export E2B_API_KEY="$(paddock keys current)"');
  expect(text).toContain('export PADDOCK_API_KEY="$(paddock keys current)"');
  expect(text).not.toContain(service.info.apiKey!);
  const listed = JSON.parse(paddock(['sandbox', 'list', '--json']).stdout) as Array<{ sandboxId: string; state: string }>;
  expect(listed.find((s) => s.sandboxId === id)?.state).toBe('running');
  expect(paddock(['sandbox', 'exec', id, '--', 'cat', 'p']).stdout).toBe('persisted\n');
});
