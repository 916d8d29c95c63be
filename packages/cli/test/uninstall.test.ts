// `paddock uninstall` against a real installation: a service started with
// `paddock start`, a running and a paused sandbox, and the warm pool's.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OCI_RUNTIMES, RuncRuntime } from '@paddock/runtime';

const main = join(import.meta.dirname, '../dist/main.js');
const home = mkdtempSync(join(tmpdir(), 'paddock-uninstall-'));
const env: NodeJS.ProcessEnv = { ...process.env, PADDOCK_HOME: home, NO_COLOR: '1' };
delete env.PADDOCK_API_URL;
delete env.PADDOCK_API_KEY;
delete env.PADDOCK_SANDBOX_URL;

function paddock(args: string[], extraEnv: Record<string, string> = {}) {
  const res = spawnSync(process.execPath, [main, ...args], { env: { ...env, ...extraEnv }, encoding: 'utf8', timeout: 120_000 });
  return { code: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** Mount points under `dir`, from the kernel's table. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((mp) => mp === dir || mp.startsWith(dir + '/'));
}

/** Whether `pid` runs: a zombie, killed and not yet reaped by whoever adopted it, does not. */
function isRunning(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1)!.split(' ')[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The pid of each container's first process, from the OCI runtime (runc or crun) whose state the home has. */
function containerPids(): Map<string, number> {
  const list = OCI_RUNTIMES.filter((name) => existsSync(join(home, 'runtime', name))).flatMap((name) => {
    const res = spawnSync(name, ['--root', join(home, 'runtime', name), 'list', '--format', 'json'], { encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`${name} list: ${res.stderr}`);
    return (JSON.parse(res.stdout || '[]') ?? []) as Array<{ id: string; pid: number }>;
  });
  return new Map(list.map((c) => [c.id, c.pid]));
}

let service: ChildProcess;
let running: string;
let paused: string;

beforeAll(async () => {
  service = spawn(process.execPath, [main, 'start', '--json', '--api-port', '0', '--proxy-port', '0', '--warm-pool', '1'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  service.stderr!.on('data', (d: Buffer) => (err += d));
  let out = '';
  const info = await new Promise<{ apiUrl: string; apiKey: string }>((resolve, reject) => {
    service.stdout!.on('data', (d: Buffer) => {
      out += d;
      try {
        resolve(JSON.parse(out) as { apiUrl: string; apiKey: string });
      } catch {
        // not all of it yet
      }
    });
    service.once('exit', (code) => reject(new Error(`paddock start exited with ${code}: ${err}`)));
  });
  const created = () => {
    const res = paddock(['sandbox', 'create', '--json']);
    if (res.code !== 0) throw new Error(`sandbox create: ${res.stderr}`);
    return (JSON.parse(res.stdout) as { sandboxId: string }).sandboxId;
  };
  running = created();
  paused = created();
  const res = await fetch(`${info.apiUrl}/sandboxes/${paused}/pause`, { method: 'POST', headers: { 'X-API-Key': info.apiKey } });
  if (res.status !== 204) throw new Error(`pause: ${res.status} ${await res.text()}`);
  expect(paddock(['sandbox', 'exec', running, '--', 'sh', '-c', 'echo kept > /home/user/work.txt']).code).toBe(0);
});

afterAll(async () => {
  if (service.exitCode === null && service.signalCode === null) {
    const exited = new Promise((r) => service.once('exit', r));
    service.kill('SIGTERM');
    await exited;
  }
  // Whatever a failed test left: the runtime takes its sandboxes and mounts first.
  if (existsSync(home)) {
    await new RuncRuntime({ dataDir: join(home, 'runtime') }).removeEverything();
    rmSync(home, { recursive: true, force: true });
  }
});

test('is refused while a server uses the data directory, as a second server is', () => {
  const refused = paddock(['uninstall', '--yes']);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain(`another Paddock process (pid ${service.pid}) is using '${home}': stop it first`);
  const second = paddock(['start', '--api-port', '0', '--proxy-port', '0']);
  expect(second.code).toBe(1);
  expect(second.stderr).toContain(`another Paddock process (pid ${service.pid}) is using '${home}'`);
  const listed = JSON.parse(paddock(['sandbox', 'list', '--json']).stdout) as Array<{ sandboxId: string }>;
  expect(listed.map((s) => s.sandboxId).sort()).toEqual([running, paused].sort());
});

test('without --yes, says what it would remove and removes nothing', async () => {
  const exited = new Promise((r) => service.once('exit', r));
  service.kill('SIGTERM');
  await exited;
  const before = containerPids();
  // Sandboxes outlive the server: the two, and the pool's one.
  expect(before.size).toBe(3);

  const asked = paddock(['uninstall']);
  expect(asked.code).toBe(2);
  expect(asked.stderr).toContain('this would remove, for good:');
  expect(asked.stderr).toContain(`2 sandboxes (${[running, paused].sort().join(', ')}), with the files in them`);
  expect(asked.stderr).toContain('1 ready sandbox of the warm pool');
  expect(asked.stderr).toMatch(new RegExp(`in ${home}: .*paddock\\.db`));
  expect(asked.stderr).toContain('run `paddock uninstall --yes`');
  expect([...containerPids().keys()].sort()).toEqual([...before.keys()].sort());
  expect(existsSync(join(home, 'paddock.db'))).toBe(true);
});

test('--yes destroys every sandbox, paused ones too, and leaves nothing on the host', async () => {
  const pids = [...containerPids().values()];
  const mounted = mountsUnder(home);
  expect(mounted.length).toBeGreaterThan(0);

  const removed = paddock(['uninstall', '--yes', '--json']);
  expect(removed.stderr).toBe('');
  expect(removed.code).toBe(0);
  const report = JSON.parse(removed.stdout) as { home: string; sandboxes: string[]; pooled: number; entries: string[]; foreign: string[]; homeRemoved: boolean };
  expect(report).toMatchObject({ home, sandboxes: [running, paused].sort(), pooled: 1, foreign: [], homeRemoved: true });
  expect(report.entries).toEqual(expect.arrayContaining(['runtime', 'paddock.db', 'credentials.json']));

  expect(existsSync(home)).toBe(false);
  expect(mountsUnder(home)).toEqual([]);
  expect(pids.filter(isRunning)).toEqual([]);
  const again = paddock(['uninstall', '--yes']);
  expect(again.code).toBe(4);
  expect(again.stderr).toContain(`nothing to remove: ${home} does not exist`);

  // The runtime finds nothing of its own: no cgroups, containers or
  // directories. (Made here, it makes its data directory again.)
  expect(await new RuncRuntime({ dataDir: join(home, 'runtime') }).leftovers()).toEqual([]);
  rmSync(home, { recursive: true, force: true });
});

test("a data directory that holds files of the user's keeps them, and itself", () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-uninstall-mixed-'));
  try {
    writeFileSync(join(dir, 'paddock.db'), '');
    writeFileSync(join(dir, 'credentials.json'), '{}');
    writeFileSync(join(dir, 'notes.txt'), 'mine');
    const asked = paddock(['--home', dir, 'uninstall']);
    expect(asked.code).toBe(2);
    expect(asked.stderr).toContain('no sandboxes');
    expect(asked.stderr).toContain(`in ${dir}: credentials.json, paddock.db`);
    expect(asked.stderr).not.toContain('notes.txt');

    const removed = paddock(['--home', dir, 'uninstall', '--yes']);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain(`${dir} stays: it holds what is not Paddock's (notes.txt)`);
    expect(existsSync(join(dir, 'paddock.db'))).toBe(false);
    expect(existsSync(join(dir, 'credentials.json'))).toBe(false);
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('mine');
    expect(existsSync(join(dir, 'server.pid'))).toBe(false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a path that is not a directory is refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-uninstall-file-'));
  try {
    const file = join(dir, 'plain');
    writeFileSync(file, 'x');
    const res = paddock(['--home', file, 'uninstall', '--yes']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`'${file}' is not a directory`);
    expect(readFileSync(file, 'utf8')).toBe('x');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
