// `npm run bench` stopped part-way leaves nothing on the host: no container,
// no mount, no cgroup, no loop device, no process, no temporary directory,
// and it writes no results.
// A Ctrl-C reaches every process of the run at once (here: SIGINT to its
// process group); `kill` reaches run.mjs alone (SIGTERM to it). Each is sent
// while the run has sandboxes running and creates in flight. Needs root and
// runc, as the bench does. The run gets a temporary directory of its own
// (TMPDIR), so that another bench running on the same machine meanwhile is
// not taken for what this one left.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OCI_RUNTIMES, cgroupParentOf, loopDevicesUnder } from '@paddock/runtime';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const kept = ['tools/bench/results/latest.json', 'tools/bench/results/samples.json', 'docs/performance.md'].map((f) => join(root, f));

let runTmp: string;
beforeAll(() => {
  runTmp = mkdtempSync(join(tmpdir(), 'pbi-'));
  // Short, as sandbox socket paths below it must be; and open as /tmp is, for the sandbox user's homes below it.
  chmodSync(runTmp, 0o755);
});
// Only when empty: what a failed test left is named in its failure, and mounts may still be below it.
afterAll(() => rmdirSync(runTmp));

/** The temporary directories the bench makes. */
function benchDirs(): string[] {
  return readdirSync(runTmp)
    .filter((name) => name.startsWith('paddock-bench-') || name.startsWith('bench-envd-'))
    .map((name) => join(runTmp, name));
}

function mountsUnder(dirs: string[]): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' ')[4]!)
    .filter((mp) => dirs.some((d) => mp === d || mp.startsWith(d + '/')));
}

/** The first process of each container (runc's or crun's) whose state is kept below one of `dirs` (the server's and the runtime's layouts). */
function containerPids(dirs: string[]): number[] {
  const roots = dirs.flatMap((d) => OCI_RUNTIMES.flatMap((name) => [join(d, 'runtime', name), join(d, name)].map((root) => ({ name, root }))));
  return roots.filter(({ root }) => existsSync(root)).flatMap(({ name, root }) => (JSON.parse(ociList(name, root) || 'null') ?? []).map((c: { pid: number }) => c.pid));
}

/**
 * The data directories below `dirs` (a server's home keeps its runtime's in
 * runtime/; a bare runtime's is the directory itself).
 */
function dataDirs(dirs: string[]): string[] {
  return dirs.flatMap((d) => [d, join(d, 'runtime')]);
}

/** The cgroup directories, in every hierarchy, of the runtimes whose data directories are below `dirs`. */
function cgroupsOf(dirs: string[]): string[] {
  const base = '/sys/fs/cgroup';
  const hierarchies = [base, ...readdirSync(base).map((h) => join(base, h))];
  return hierarchies.flatMap((h) => dataDirs(dirs).map((d) => join(h, cgroupParentOf(d)))).filter((d) => existsSync(d));
}

/**
 * `runc list` (or crun's) of `root`, asked again when a container went
 * while it listed (runc 1.1 fails the whole list then, as the runtime's
 * Runc.list says). Its notes about containers still being made stay out of
 * the test's output.
 */
function ociList(name: string, root: string): string {
  for (let attempt = 1; ; attempt++) {
    try {
      return execFileSync(name, ['--root', root, 'list', '--format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
    } catch (err) {
      if (attempt === 5 || !/no such file or directory/.test(String((err as { stderr?: Buffer }).stderr))) throw err;
    }
  }
}

/** Of `pids`, and of the processes in process group `group`, those still alive (zombies are not). */
function alive(pids: number[], group: number): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      // The fields after the command name: state, parent, process group.
      const [state, , pgrp] = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ').at(-1)!.split(' ');
      if (state === 'Z' || (Number(pgrp) !== group && !pids.includes(Number(pid)))) continue;
      found.push(`${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 120)}`);
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

interface Run {
  child: ChildProcess;
  log: () => string;
  exited: Promise<number | null>;
}

/** Starts `node tools/bench/run.mjs ARGS` in a process group of its own. */
function startBench(args: string[]): Run {
  const env = { ...process.env, TMPDIR: runTmp };
  const child = spawn(process.execPath, ['tools/bench/run.mjs', ...args], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, log: () => out, exited };
}

async function until(what: string, run: Run, test: () => boolean, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (run.child.exitCode !== null) throw new Error(`the bench ended before ${what}:\n${run.log()}`);
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms:\n${run.log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopAndCheck(args: string[], ready: RegExp, stop: (run: Run) => void, expectedCode: number): Promise<void> {
  const before = new Set(benchDirs());
  const keptBefore = kept.map((f) => (existsSync(f) ? readFileSync(f, 'utf8') : null));
  const run = startBench(args);
  const group = run.child.pid!;
  try {
    await until(`'${ready}' in its log`, run, () => ready.test(run.log()));
    const made = () => benchDirs().filter((d) => !before.has(d));
    // There is something to remove: containers running below the run's directories, and their mounts.
    await until('a running sandbox', run, () => containerPids(made()).length > 0 && mountsUnder(made()).length > 0);
    const dirs = made();
    const pids = containerPids(dirs);
    stop(run);
    const code = await run.exited;
    const found = {
      code,
      saidNoResults: run.log().includes('no results written'),
      dirs: dirs.filter((d) => existsSync(d)),
      mounts: mountsUnder(dirs),
      cgroups: cgroupsOf(dirs),
      loopDevices: dirs.flatMap((d) => loopDevicesUnder(d)),
      processes: alive(pids, group),
      resultsKept: kept.every((f, i) => (existsSync(f) ? readFileSync(f, 'utf8') : null) === keptBefore[i]),
    };
    const clean = { code: expectedCode, saidNoResults: true, dirs: [], mounts: [], cgroups: [], loopDevices: [], processes: [], resultsKept: true };
    try {
      expect(found).toEqual(clean);
    } catch (err) {
      // What the run printed while it stopped says why something was left.
      (err as Error).message += `\n\nthe run's log:\n${run.log()}`;
      throw err;
    }
  } finally {
    if (run.child.exitCode === null) process.kill(-group, 'SIGKILL');
    // A run that was not stopped in time wrote its results over the repository's.
    kept.forEach((f, i) => keptBefore[i] !== null && writeFileSync(f, keptBefore[i]!));
  }
}

test('a Ctrl-C during the SDK suite, while 10 creates are in flight, removes every sandbox, mount and directory of the run', async () => {
  await stopAndCheck(['--quick', '--only', 'sdk'], /sdk: 10 concurrent creates, warm pool/, (run) => process.kill(-run.child.pid!, 'SIGINT'), 130);
});

test('SIGTERM to run.mjs alone during the memory suite (sandboxes made in the suite process) removes them all', async () => {
  await stopAndCheck(['--quick', '--only', 'memory'], /memory: 5 idle sandboxes/, (run) => run.child.kill('SIGTERM'), 143);
});

test('after a Ctrl-C, failures of the stopped code that nothing catches do not cut the undoing short', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'paddock-interrupt-'));
  try {
    const mark = join(dir, 'undone');
    // The undoing takes a while; meanwhile the stopped code rejects a promise no one awaits and throws in a timer.
    const script = `
      import { writeFileSync } from 'node:fs';
      import { undoAllOnSignals, undoOnInterrupt } from ${JSON.stringify(join(root, 'tools/bench/interrupt.mjs'))};
      undoAllOnSignals();
      undoOnInterrupt(async () => {
        await new Promise((r) => setTimeout(r, 300));
        writeFileSync(${JSON.stringify(mark)}, 'undone');
      });
      process.on('SIGINT', () => {
        void Promise.reject(new Error('a write the signal stopped'));
        setTimeout(() => { throw new Error('a callback the signal stopped'); }, 10);
      });
      setInterval(() => {}, 1000);
      process.stdout.write('ready\\n');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    while (!out.includes('ready')) {
      if (child.exitCode !== null) throw new Error(`the script ended before it was ready:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGINT');
    expect({ code: await exited, undone: existsSync(mark) && readFileSync(mark, 'utf8') }).toEqual({ code: 130, undone: 'undone' });
    expect(out).toContain('[bench] after SIGINT: a write the signal stopped');
    expect(out).toContain('[bench] after SIGINT: a callback the signal stopped');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
